"""MPIJob (kubeflow.org/v2beta1) as the MPI operator runs it: workers, a launcher Job, its pod."""

import pytest
from kubernetes import client

from kubesim.testing import mpijob_manifest

G, V, P = "kubeflow.org", "v2beta1", "mpijobs"


def conditions(sim, name, namespace="team-a"):
    job = sim.cluster.job("mpijobs.kubeflow.org", namespace, name)
    return {c["type"]: (c["status"], c["reason"]) for c in job["status"]["conditions"]}


def pods(core, namespace="team-a"):
    return {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}


@pytest.fixture
def batch(sim):
    api_client = sim.api_client("alice@example.com")
    yield client.BatchV1Api(api_client)
    api_client.close()


def test_workers_and_a_launcher_job_whose_pod_the_job_controller_names(custom, core, batch, sim):
    job = custom.create_namespaced_custom_object(G, V, "team-a", P, mpijob_manifest("pi", "team-a", workers=2))
    sim.settle()
    launcher_job = batch.read_namespaced_job("pi-launcher", "team-a")
    owner = launcher_job.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("MPIJob", "pi", job["metadata"]["uid"], True)
    listed = pods(core)
    workers = sorted(n for n in listed if n.startswith("pi-worker-"))
    launchers = [n for n in listed if n.startswith("pi-launcher-")]
    assert (
        workers == ["pi-worker-0", "pi-worker-1"]
        and len(launchers) == 1
        and len(launchers[0]) == len("pi-launcher-") + 5
    )
    worker = listed["pi-worker-1"].metadata.labels
    assert worker == {
        "training.kubeflow.org/job-name": "pi",
        "training.kubeflow.org/job-role": "worker",
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/replica-index": "1",
    }
    launcher = listed[launchers[0]].metadata.labels
    assert launcher["training.kubeflow.org/job-name"] == "pi"
    assert launcher["training.kubeflow.org/job-role"] == "launcher"
    assert launcher["batch.kubernetes.io/job-name"] == "pi-launcher"
    assert listed[launchers[0]].metadata.owner_references[0].kind == "Job"
    assert listed["pi-worker-0"].spec.hostname == "pi-worker-0" and listed["pi-worker-0"].spec.subdomain == "pi"
    selected = core.list_namespaced_pod("team-a", label_selector="training.kubeflow.org/job-name=pi").items
    assert len(selected) == 3


def test_running_once_all_run_then_the_launcher_decides(custom, core, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, mpijob_manifest("ok", "team-a", workers=2, duration=20))
    sim.advance(3)
    assert conditions(sim, "ok") == {"Created": ("True", "MPIJobCreated"), "Running": ("True", "MPIJobRunning")}
    status = sim.cluster.job("MPIJob", "team-a", "ok")["status"]
    assert status["replicaStatuses"] == {"Launcher": {"active": 1}, "Worker": {"active": 2}}
    sim.advance(20)
    assert conditions(sim, "ok")["Succeeded"] == ("True", "MPIJobSucceeded")
    assert conditions(sim, "ok")["Running"][0] == "False"
    status = sim.cluster.job("MPIJob", "team-a", "ok")["status"]
    assert status["replicaStatuses"]["Launcher"] == {"succeeded": 1} and status["completionTime"]
    # cleanPodPolicy Running (the manifest's) removed the still running workers.
    assert [(n, p.status.phase) for n, p in pods(core).items()] == [
        (n, "Succeeded") for n in pods(core) if n.startswith("ok-launcher-")
    ]


def test_with_clean_pod_policy_none_the_workers_keep_running(custom, core, sim):
    manifest = mpijob_manifest("keep", "team-a", workers=1, duration=5, clean_pod_policy=None)
    custom.create_namespaced_custom_object(G, V, "team-a", P, manifest)
    sim.advance(10)
    assert "Succeeded" in conditions(sim, "keep")
    assert pods(core)["keep-worker-0"].status.phase == "Running"


def test_a_failing_launcher_fails_the_mpijob(custom, sim):
    manifest = mpijob_manifest("bad", "team-a", workers=1, duration=5, fail=True, backoff_limit=0)
    custom.create_namespaced_custom_object(G, V, "team-a", P, manifest)
    sim.advance(10)
    job = sim.cluster.job("MPIJob", "team-a", "bad")
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"] == "Job has reached the specified backoff limit"
    assert job["status"]["replicaStatuses"]["Launcher"] == {"failed": 1}


def test_suspend_deletes_workers_and_suspends_the_launcher_job(custom, core, batch, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, mpijob_manifest("s", "team-a", workers=2, duration=100))
    sim.advance(5)
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "s", {"spec": {"runPolicy": {"suspend": True}}})
    sim.settle()
    assert pods(core) == {}
    assert batch.read_namespaced_job("s-launcher", "team-a").spec.suspend is True
    assert conditions(sim, "s")["Suspended"] == ("True", "MPIJobSuspended")
    assert conditions(sim, "s")["Running"] == ("False", "MPIJobSuspended")
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "s", {"spec": {"runPolicy": {"suspend": False}}})
    sim.advance(3)
    assert batch.read_namespaced_job("s-launcher", "team-a").spec.suspend is False
    assert sorted(p.status.phase for p in pods(core).values()) == ["Running"] * 3
    assert conditions(sim, "s")["Suspended"] == ("False", "MPIJobResumed")
    sim.advance(100)
    assert "Succeeded" in conditions(sim, "s")


def test_created_suspended_makes_a_suspended_launcher_and_no_pods(custom, core, batch, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, mpijob_manifest("later", "team-a", suspend=True))
    sim.settle()
    assert pods(core) == {} and batch.read_namespaced_job("later-launcher", "team-a").spec.suspend is True


def test_deleting_the_mpijob_deletes_workers_launcher_job_and_its_pod(custom, core, batch, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, mpijob_manifest("gone", "team-a", workers=2))
    sim.advance(3)
    assert len(pods(core)) == 3
    custom.delete_namespaced_custom_object(G, V, "team-a", P, "gone")
    assert pods(core) == {} and batch.list_namespaced_job("team-a").items == []


def test_an_invalid_mpijob_gets_a_validation_event(custom, core, sim):
    manifest = mpijob_manifest("nolauncher", "team-a", workers=1)
    del manifest["spec"]["mpiReplicaSpecs"]["Launcher"]
    custom.create_namespaced_custom_object(G, V, "team-a", P, manifest)  # the CRD accepts it
    sim.settle()
    assert pods(core) == {}
    events = core.list_namespaced_event("team-a", field_selector="reason=ValidationError").items
    assert [e.involved_object.kind for e in events] == ["MPIJob"]
    assert "spec.mpiReplicaSpecs[Launcher]" in events[0].message


def test_quota_counts_mpijobs_and_their_launcher_jobs(custom, core, sim):
    core.replace_namespaced_resource_quota(
        "quota",
        "team-a",
        {"metadata": {"name": "quota"}, "spec": {"hard": {"count/mpijobs.kubeflow.org": "2", "count/jobs.batch": "5"}}},
    )
    custom.create_namespaced_custom_object(G, V, "team-a", P, mpijob_manifest("q", "team-a"))
    sim.settle()
    used = core.read_namespaced_resource_quota("quota", "team-a").status.used
    assert used == {"count/mpijobs.kubeflow.org": "1", "count/jobs.batch": "1"}
