"""Kubeflow Trainer v2: TrainJob -> JobSet -> Jobs -> pods, from a (Cluster)TrainingRuntime."""

import json

import pytest
from kubernetes import client

from kubesim.testing import training_runtime_manifest, trainjob_manifest

G, V = "trainer.kubeflow.org", "v1alpha1"
JS = ("jobset.x-k8s.io", "v1alpha2")


@pytest.fixture
def runtime(custom):
    """The cluster's torch-distributed runtime: one node of 1 cpu unless a TrainJob says otherwise."""
    return custom.create_cluster_custom_object(G, V, "clustertrainingruntimes", training_runtime_manifest())


@pytest.fixture
def batch(sim):
    api_client = sim.api_client("alice@example.com")
    yield client.BatchV1Api(api_client)
    api_client.close()


def conditions(sim, name, namespace="team-a"):
    job = sim.cluster.job("trainjobs.trainer.kubeflow.org", namespace, name)
    return {c["type"]: (c["status"], c["reason"]) for c in (job.get("status") or {}).get("conditions", [])}


def phases(sim, name, namespace="team-a"):
    return sorted(p["status"]["phase"] for p in sim.cluster.pods_of("TrainJob", namespace, name))


def test_a_trainjob_becomes_a_jobset_with_num_nodes_and_resources_applied(custom, batch, core, sim, runtime):
    tj = custom.create_namespaced_custom_object(
        G, V, "team-a", "trainjobs", trainjob_manifest("llm", "team-a", num_nodes=3, cpu="2", memory="4Gi")
    )
    assert tj["spec"]["runtimeRef"] == {"name": "torch-distributed", "kind": "ClusterTrainingRuntime", "apiGroup": G}
    sim.settle()
    js = custom.get_namespaced_custom_object(*JS, "team-a", "jobsets", "llm")
    owner = js["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrainJob",
        "llm",
        tj["metadata"]["uid"],
        True,
    )
    node = js["spec"]["replicatedJobs"][0]
    assert node["name"] == "node" and node["replicas"] == 1
    assert node["template"]["spec"]["parallelism"] == 3 and node["template"]["spec"]["completions"] == 3
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"cpu": "2", "memory": "4Gi"},
    }
    assert [j.metadata.name for j in batch.list_namespaced_job("team-a").items] == ["llm-node-0"]
    pods = core.list_namespaced_pod("team-a", label_selector="jobset.sigs.k8s.io/jobset-name=llm").items
    assert sorted(p.metadata.name[: -len("-xxxxx")] for p in pods) == ["llm-node-0-0", "llm-node-0-1", "llm-node-0-2"]
    assert {p.spec.containers[0].resources.requests["cpu"] for p in pods} == {"2"}
    # The audit records the user's TrainJob, not the objects the controllers made from it.
    assert [(a["kind"], a["name"]) for a in sim.cluster.audit] == [("TrainJob", "llm")]


def test_complete_after_the_duration_once_every_node_runs(custom, sim, runtime):
    custom.create_namespaced_custom_object(
        G, V, "team-a", "trainjobs", trainjob_manifest("done", "team-a", num_nodes=2, duration=30)
    )
    sim.advance(3)
    assert phases(sim, "done") == ["Running", "Running"]
    status = sim.cluster.job("TrainJob", "team-a", "done")["status"]
    assert status["jobsStatus"] == [
        {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
    ]
    sim.advance(30)
    assert conditions(sim, "done") == {"Complete": ("True", "AllJobsCompleted")}
    assert phases(sim, "done") == ["Succeeded", "Succeeded"]


def test_a_failing_node_fails_the_trainjob(custom, sim):
    runtime = training_runtime_manifest("strict", "team-a", backoff_limit=0)
    custom.create_namespaced_custom_object(G, V, "team-a", "trainingruntimes", runtime)
    manifest = trainjob_manifest(
        "bad", "team-a", runtime="strict", runtime_kind="TrainingRuntime", duration=5, fail=True
    )
    custom.create_namespaced_custom_object(G, V, "team-a", "trainjobs", manifest)
    sim.advance(10)
    assert conditions(sim, "bad") == {"Failed": ("True", "FailedJobs")}


def test_suspend_propagates_to_the_jobset_and_its_jobs(custom, batch, sim, runtime):
    custom.create_namespaced_custom_object(
        G, V, "team-a", "trainjobs", trainjob_manifest("s", "team-a", num_nodes=2, suspend=True, duration=20)
    )
    sim.settle()
    assert custom.get_namespaced_custom_object(*JS, "team-a", "jobsets", "s")["spec"]["suspend"] is True
    assert batch.read_namespaced_job("s-node-0", "team-a").spec.suspend is True
    assert phases(sim, "s") == [] and conditions(sim, "s") == {"Suspended": ("True", "Suspended")}
    custom.patch_namespaced_custom_object(G, V, "team-a", "trainjobs", "s", {"spec": {"suspend": False}})
    sim.advance(3)
    assert custom.get_namespaced_custom_object(*JS, "team-a", "jobsets", "s")["spec"]["suspend"] is False
    assert phases(sim, "s") == ["Running", "Running"]
    assert conditions(sim, "s") == {"Suspended": ("False", "Resumed")}
    custom.patch_namespaced_custom_object(G, V, "team-a", "trainjobs", "s", {"spec": {"suspend": True}})
    sim.settle()
    assert phases(sim, "s") == [] and conditions(sim, "s")["Suspended"] == ("True", "Suspended")


def test_the_runtime_must_exist_when_the_trainjob_is_created(custom):
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", "trainjobs", trainjob_manifest("orphan", "team-a"))
    cause = json.loads(caught.value.body)["details"]["causes"][0]
    assert caught.value.status == 422 and cause["field"] == "spec.runtimeRef"
    assert "specified clusterTrainingRuntime must be created before the TrainJob is created" in cause["message"]


def test_a_runtime_gone_before_the_reconcile_is_an_event_and_no_jobset(custom, core, sim, runtime):
    custom.create_namespaced_custom_object(G, V, "team-a", "trainjobs", trainjob_manifest("late", "team-a"))
    custom.delete_cluster_custom_object(G, V, "clustertrainingruntimes", "torch-distributed")
    sim.advance(5)
    assert custom.list_namespaced_custom_object(*JS, "team-a", "jobsets")["items"] == []
    events = core.list_namespaced_event("team-a", field_selector="involvedObject.name=late").items
    assert [(e.reason, e.type) for e in events] == [("TrainJobResourcesCreationFailed", "Warning")]
    assert "ClusterTrainingRuntime specified in TrainJob is not found" in events[0].message and events[0].count > 1
    custom.create_cluster_custom_object(G, V, "clustertrainingruntimes", training_runtime_manifest())
    sim.advance(60)  # the next retry finds it
    assert custom.get_namespaced_custom_object(*JS, "team-a", "jobsets", "late")


def test_deleting_the_trainjob_deletes_jobset_jobs_and_pods(custom, batch, core, sim, runtime):
    custom.create_namespaced_custom_object(G, V, "team-a", "trainjobs", trainjob_manifest("gc", "team-a", num_nodes=2))
    sim.settle()
    assert len(core.list_namespaced_pod("team-a").items) == 2
    custom.delete_namespaced_custom_object(G, V, "team-a", "trainjobs", "gc")
    assert custom.list_namespaced_custom_object(*JS, "team-a", "jobsets")["items"] == []
    assert batch.list_namespaced_job("team-a").items == [] and core.list_namespaced_pod("team-a").items == []


def test_quota_counts_trainjobs(custom, core, sim, runtime):
    core.replace_namespaced_resource_quota(
        "quota",
        "team-a",
        {"metadata": {"name": "quota"}, "spec": {"hard": {"count/trainjobs.trainer.kubeflow.org": "1"}}},
    )
    custom.create_namespaced_custom_object(G, V, "team-a", "trainjobs", trainjob_manifest("one", "team-a"))
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", "trainjobs", trainjob_manifest("two", "team-a"))
    assert caught.value.status == 403


def test_runtimes_and_trainjobs_can_come_from_the_config():
    from kubesim.cluster import Cluster

    runtime = training_runtime_manifest("tiny", num_nodes=2, cpu="100m", memory="128Mi")
    cluster = Cluster(
        {
            "clock": "manual",
            "namespaces": [{"name": "ml"}],
            "objects": [runtime, trainjob_manifest("boot", "ml", runtime="tiny", duration=10)],
        }
    )
    cluster.advance(15)
    assert cluster.job("TrainJob", "ml", "boot")["status"]["conditions"][-1]["type"] == "Complete"
    assert len(cluster.pods_of("TrainJob", "ml", "boot")) == 2  # the runtime's mlPolicy.numNodes
