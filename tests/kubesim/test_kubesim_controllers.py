"""The simulated training-operator, scheduler, kubelet and work clock, in virtual time."""

import pytest
from kubernetes import client

from kubesim.resources import PODS
from kubesim.testing import tfjob_manifest

G, V, P = "kubeflow.org", "v1", "tfjobs"
GPU_TOLERATION = [{"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]


def conditions(sim, name, namespace="team-a"):
    job = sim.cluster.tfjob(namespace, name)
    return {c["type"]: (c["status"], c["reason"]) for c in job["status"]["conditions"]}


def phases(sim, job, namespace="team-a"):
    return {p["metadata"]["name"]: p["status"]["phase"] for p in sim.cluster.pods(namespace, job)}


def test_operator_creates_named_labelled_owned_pods(custom, core, sim):
    job = custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("dist", "team-a", chief=True, ps=1, workers=2)
    )
    sim.settle()
    pods = {p.metadata.name: p for p in core.list_namespaced_pod("team-a").items}
    assert sorted(pods) == ["dist-chief-0", "dist-ps-0", "dist-worker-0", "dist-worker-1"]
    worker = pods["dist-worker-1"]
    assert worker.metadata.labels["training.kubeflow.org/job-name"] == "dist"
    assert worker.metadata.labels["training.kubeflow.org/replica-type"] == "worker"
    assert worker.metadata.labels["training.kubeflow.org/replica-index"] == "1"
    assert pods["dist-chief-0"].metadata.labels["training.kubeflow.org/job-role"] == "master"
    owner = worker.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("TFJob", "dist", job["metadata"]["uid"], True)
    assert worker.spec.restart_policy == "Never" and worker.spec.node_name.startswith("cpu-node-")


def test_kubelet_starts_a_bound_pod_after_the_start_delay(custom, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("slow", "team-a"))
    sim.settle()
    assert phases(sim, "slow") == {"slow-worker-0": "Pending"}
    sim.advance(1.5)
    assert phases(sim, "slow") == {"slow-worker-0": "Pending"}
    sim.advance(0.5)
    assert phases(sim, "slow") == {"slow-worker-0": "Running"}
    pod = sim.cluster.pods("team-a", "slow")[0]
    assert pod["status"]["containerStatuses"][0]["state"]["running"] and pod["status"]["podIP"]


def test_chief_decides_running_and_success(custom, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("c", "team-a", chief=True, workers=2, duration=30)
    )
    sim.settle()
    chief = sim.cluster.pods("team-a", "c")[0]
    assert chief["metadata"]["name"] == "c-chief-0"
    sim.advance(2)
    assert conditions(sim, "c")["Running"] == ("True", "TFJobRunning")
    sim.advance(30)
    assert conditions(sim, "c")["Succeeded"] == ("True", "TFJobSucceeded")
    assert conditions(sim, "c")["Running"][0] == "False"
    status = sim.cluster.tfjob("team-a", "c")["status"]
    assert (
        status["replicaStatuses"]["Chief"]["succeeded"] == 1 and status["replicaStatuses"]["Worker"]["succeeded"] == 2
    )
    assert status["completionTime"] and status["startTime"]


@pytest.mark.parametrize("policy, succeeded", [(None, True), ("AllWorkers", False)])
def test_worker_zero_decides_success_unless_all_workers(custom, sim, policy, succeeded):
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("w", "team-a", workers=3, duration=1000, success_policy=policy)
    )
    sim.advance(3)
    assert conditions(sim, "w")["Running"] == ("True", "TFJobRunning")
    sim.cluster.kubelet.terminate(("team-a", "w-worker-0"), 0, sim.clock.now())  # worker 0 exits 0 early
    sim.settle()
    assert ("Succeeded" in conditions(sim, "w")) is succeeded


def test_a_failing_replica_fails_the_job_and_running_pods_are_cleaned_up(custom, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("f", "team-a", workers=3, duration=5, fail=True)
    )
    sim.advance(10)
    assert conditions(sim, "f")["Failed"] == ("True", "TFJobFailed")
    message = next(
        c["message"] for c in sim.cluster.tfjob("team-a", "f")["status"]["conditions"] if c["type"] == "Failed"
    )
    assert message == "TFJob team-a/f has failed because 1 Worker replica(s) failed."
    assert phases(sim, "f") == {"f-worker-0": "Failed"}  # cleanPodPolicy Running deleted the others


def test_parameter_servers_outlive_workers_unless_cleaned_up(custom, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("ps-run", "team-a", ps=1, workers=1, duration=5)
    )
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("ps-keep", "team-a", ps=1, workers=1, duration=5, clean_pod_policy="None")
    )
    sim.advance(10)
    assert "Succeeded" in conditions(sim, "ps-run") and "Succeeded" in conditions(sim, "ps-keep")
    assert phases(sim, "ps-run") == {"ps-run-worker-0": "Succeeded"}
    assert phases(sim, "ps-keep") == {"ps-keep-ps-0": "Running", "ps-keep-worker-0": "Succeeded"}
    assert sim.cluster.quota_status("team-a")["used"]["pods"] == "1"  # the orphaned PS still holds quota


def test_suspend_deletes_pods_and_resume_recreates_them(custom, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("s", "team-a", workers=2, duration=100))
    sim.advance(5)
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "s", {"spec": {"runPolicy": {"suspend": True}}})
    sim.settle()
    assert phases(sim, "s") == {}
    assert conditions(sim, "s")["Suspended"] == ("True", "TFJobSuspended")
    assert conditions(sim, "s")["Running"] == ("False", "TFJobSuspended")
    assert sim.cluster.quota_status("team-a")["used"]["requests.cpu"] == "0"
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "s", {"spec": {"runPolicy": {"suspend": False}}})
    sim.advance(3)
    assert phases(sim, "s") == {"s-worker-0": "Running", "s-worker-1": "Running"}
    assert conditions(sim, "s")["Suspended"] == ("False", "TFJobResumed")
    sim.advance(100)
    assert "Succeeded" in conditions(sim, "s")


def test_gpu_pods_need_the_toleration_and_say_why_not(custom, core, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("gpu", "team-a", workers=1, gpu=4, tolerations=GPU_TOLERATION)
    )
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("notol", "team-a", workers=1, gpu=4))
    sim.settle()
    assert core.read_namespaced_pod("gpu-worker-0", "team-a").spec.node_name.startswith("gpu-node-")
    pending = core.read_namespaced_pod("notol-worker-0", "team-a")
    assert pending.spec.node_name is None and pending.status.phase == "Pending"
    scheduled = next(c for c in pending.status.conditions if c.type == "PodScheduled")
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    assert (
        scheduled.message
        == "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint {gpu: true}."
    )


def test_node_fragmentation_leaves_a_partial_gang_holding_resources(custom, sim, core):
    # 5 pods of 3 cpu: two fit on each 8-cpu node (GPU nodes are tainted), the fifth never does.
    custom.create_namespaced_custom_object(
        G, V, "team-b", P, tfjob_manifest("frag", "team-b", workers=5, cpu="3", duration=10)
    )
    sim.advance(600)
    states = phases(sim, "frag", "team-b")
    assert sorted(states.values()) == ["Pending", "Running", "Running", "Running", "Running"]
    assert "Succeeded" not in conditions(sim, "frag", "team-b")
    for node in ("cpu-node-0", "cpu-node-1"):
        assert sim.cluster.scheduler.allocated[node]["cpu"] == 6000


def test_scheduler_spreads_by_least_allocated(custom, core, sim):
    custom.create_namespaced_custom_object(G, V, "team-b", P, tfjob_manifest("spread", "team-b", workers=4, cpu="1"))
    sim.settle()
    nodes = sorted(p.spec.node_name for p in core.list_namespaced_pod("team-b").items)
    assert nodes == ["cpu-node-0", "cpu-node-0", "cpu-node-1", "cpu-node-1"]


@pytest.mark.parametrize(
    "config",
    [
        {
            "nodes": [{"prefix": "cpu-node", "count": 2, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
            "namespaces": [{"name": "team-b"}],
            "users": [{"token": "jobdash-token", "username": "system:serviceaccount:jobdash:jobdash"}],
            "scheduler": {"scoring": "MostAllocated"},
        }
    ],
)
def test_scheduler_packs_by_most_allocated(custom, core, sim):
    """A batch cluster's bin-packing: one node filled first, the other kept whole for a large pod."""
    custom.create_namespaced_custom_object(G, V, "team-b", P, tfjob_manifest("pack", "team-b", workers=4, cpu="1"))
    sim.settle()
    nodes = sorted(p.spec.node_name for p in core.list_namespaced_pod("team-b").items)
    assert len(nodes) == 4 and len(set(nodes)) == 1


def test_scheduler_honours_node_affinity_on_the_node_name(custom, core, sim):
    """matchFields metadata.name, as the DaemonSet controller (and jobdash's pinning) uses it."""
    manifest = tfjob_manifest("pinned", "team-b", workers=2, cpu="1")
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["cpu-node-1"]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"] = affinity
    custom.create_namespaced_custom_object(G, V, "team-b", P, manifest)
    sim.settle()
    nodes = [p.spec.node_name for p in core.list_namespaced_pod("team-b").items]
    assert nodes == ["cpu-node-1", "cpu-node-1"]  # spreading alone would use both nodes


def test_a_deleted_pod_is_recreated_and_the_gang_clock_restarts(custom, core, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("r", "team-a", workers=2, duration=20))
    sim.advance(12)  # gang runs since t=2
    core.delete_namespaced_pod("r-worker-1", "team-a")
    sim.advance(15)  # the replacement runs from t=14; the old deadline t=22 has passed without success
    assert "Succeeded" not in conditions(sim, "r")
    assert phases(sim, "r") == {"r-worker-0": "Running", "r-worker-1": "Running"}
    sim.advance(10)
    assert "Succeeded" in conditions(sim, "r")


def test_scaling_replicas_creates_and_deletes_pods(custom, sim):
    custom.create_namespaced_custom_object(G, V, "team-b", P, tfjob_manifest("scale", "team-b", workers=3, cpu="100m"))
    sim.settle()
    custom.patch_namespaced_custom_object(
        G, V, "team-b", P, "scale", {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1}}}}
    )
    sim.settle()
    assert list(phases(sim, "scale", "team-b")) == ["scale-worker-0"]
    custom.patch_namespaced_custom_object(
        G, V, "team-b", P, "scale", {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2}}}}
    )
    sim.settle()
    assert list(phases(sim, "scale", "team-b")) == ["scale-worker-0", "scale-worker-1"]


def test_on_failure_restarts_in_place_until_the_backoff_limit(custom, sim):
    custom.create_namespaced_custom_object(
        G,
        V,
        "team-a",
        P,
        tfjob_manifest(
            "retry", "team-a", workers=1, duration=10, fail=True, restart_policy="OnFailure", backoff_limit=2
        ),
    )
    sim.advance(13)
    pod = sim.cluster.pods("team-a", "retry")[0]
    assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["restartCount"] == 1
    assert "Failed" not in conditions(sim, "retry")
    sim.advance(10)
    assert conditions(sim, "retry")["Failed"] == ("True", "TFJobFailed")


def test_pod_creations_of_concurrent_jobs_interleave(custom, sim):
    for name in ("x", "y"):
        custom.create_namespaced_custom_object(G, V, "team-b", P, tfjob_manifest(name, "team-b", workers=3, cpu="100m"))
    sim.settle()
    watcher, log = sim.model.watch(PODS, "team-b", 0)  # the store's event log, in creation order
    watcher.close()
    created = [e.obj["metadata"]["name"] for e in log if e.type == "ADDED"]
    assert created == ["x-worker-0", "y-worker-0", "x-worker-1", "y-worker-1", "x-worker-2", "y-worker-2"]


def test_tfjob_status_is_visible_through_the_client(custom, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("vis", "team-a", workers=2, duration=5))
    sim.advance(3)
    status = custom.get_namespaced_custom_object(G, V, "team-a", P, "vis")["status"]
    assert status["replicaStatuses"]["Worker"]["active"] == 2
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running"]
    with pytest.raises(client.ApiException):
        custom.get_namespaced_custom_object(G, V, "team-a", P, "missing")


def test_node_affinity_in_accepts_values_that_are_not_numbers(core, sim):
    # A numeric node label once made every operator parse the first value as a number.
    core.patch_node("cpu-node-1", {"metadata": {"labels": {"rack": "7"}}})
    affinity = {"key": "rack", "operator": "In", "values": ["seven", "7"]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "racked", "namespace": "team-b"},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [affinity]}]
                    }
                }
            },
        },
    }
    core.create_namespaced_pod("team-b", pod)
    sim.settle()
    assert core.read_namespaced_pod("racked", "team-b").spec.node_name == "cpu-node-1"
