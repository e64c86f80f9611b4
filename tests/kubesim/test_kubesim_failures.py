"""How workloads fail, as a kubelet and the controllers report it: exit codes, OOM kills,
images that do not pull, pods lost with their node. Read through the official client."""

import json

import pytest
from kubernetes import client

from kubesim.testing import batch_job_manifest, pytorchjob_manifest
from tests.kubesim.conftest import BASE_CONFIG

UNPULLABLE = "registry.example.com/team/trainer:v7"


@pytest.fixture
def config():
    return {**BASE_CONFIG, "unpullable_images": [UNPULLABLE]}


@pytest.fixture
def batch(sim):
    api_client = sim.api_client("alice@example.com")
    yield client.BatchV1Api(api_client)
    api_client.close()


def annotated(manifest, **annotations):
    manifest["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
    return manifest


def only_pod(core, job):
    pods = core.list_namespaced_pod("team-a", label_selector=f"job-name={job}").items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


def job_conditions(batch, name):
    return {
        c.type: (c.status, c.reason) for c in batch.read_namespaced_job_status(name, "team-a").status.conditions or []
    }


def test_exit_code_annotation_fails_the_lead_pod_with_that_code(sim, core, batch):
    manifest = annotated(
        batch_job_manifest("exit3", "team-a", duration=30, backoff_limit=0), **{"kubesim.io/exit-code": "3"}
    )
    batch.create_namespaced_job("team-a", manifest)
    sim.advance(40)
    pod = only_pod(core, "exit3")
    assert pod.status.phase == "Failed"
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (3, "Error")
    assert job_conditions(batch, "exit3")["Failed"] == ("True", "BackoffLimitExceeded")


def test_fail_annotation_stays_exit_code_1(sim, core, batch):
    batch.create_namespaced_job(
        "team-a", batch_job_manifest("plain", "team-a", duration=30, fail=True, backoff_limit=0)
    )
    sim.advance(40)
    terminated = only_pod(core, "plain").status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (1, "Error")


def test_an_exit_code_out_of_range_is_ignored(sim, core, batch):
    manifest = annotated(batch_job_manifest("bad", "team-a", duration=30), **{"kubesim.io/exit-code": "256"})
    batch.create_namespaced_job("team-a", manifest)
    sim.advance(40)
    pod = only_pod(core, "bad")
    assert pod.status.phase == "Succeeded"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0


def test_oom_with_restart_policy_never_fails_the_pod(sim, core):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hog", "annotations": {"kubesim.io/duration-seconds": "20", "kubesim.io/oom": "true"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "python:3.11", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
            ],
        },
    }
    core.create_namespaced_pod("team-a", pod)
    sim.advance(30)
    pod = core.read_namespaced_pod_status("hog", "team-a")
    assert pod.status.phase == "Failed"
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (137, "OOMKilled")


def test_oom_under_on_failure_restarts_in_place(sim, core, custom):
    manifest = pytorchjob_manifest("oom", "team-a", workers=1, duration=30)
    master = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    master.setdefault("metadata", {}).setdefault("annotations", {})["kubesim.io/oom"] = "true"
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", manifest)
    sim.advance(45)
    pod = core.read_namespaced_pod_status("oom-master-0", "team-a")
    assert pod.spec.restart_policy == "OnFailure"
    assert pod.status.phase == "Running"
    status = pod.status.container_statuses[0]
    assert status.restart_count == 1 and status.state.running is not None
    assert (status.last_state.terminated.exit_code, status.last_state.terminated.reason) == (137, "OOMKilled")


def pull_events(core, pod):
    events = core.list_namespaced_event("team-a", field_selector=f"involvedObject.name={pod}").items
    return {(e.type, e.reason, e.message): e.count for e in events if e.source.component == "kubelet"}


@pytest.mark.parametrize("image", [UNPULLABLE, "busybox:does-not-exist"])
def test_an_image_that_does_not_pull_keeps_the_pod_pending(sim, core, batch, image):
    manifest = batch_job_manifest("pull", "team-a", duration=30)
    manifest["spec"]["template"]["spec"]["containers"][0]["image"] = image
    container = manifest["spec"]["template"]["spec"]["containers"][0]["name"]
    batch.create_namespaced_job("team-a", manifest)
    sim.advance(2)  # bound; the kubelet starts it now (start_delay 2)
    pod = only_pod(core, "pull")
    error = (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
        f'failed to resolve reference "{image}": {image}: not found'
    )
    waiting = pod.status.container_statuses[0].state.waiting
    assert pod.status.phase == "Pending" and pod.spec.node_name
    assert (waiting.reason, waiting.message) == ("ErrImagePull", error)
    assert pod.status.container_statuses[0].ready is False and pod.status.start_time is not None
    ready = {c.type: (c.status, c.reason, c.message) for c in pod.status.conditions}
    assert ready["Ready"] == ("False", "ContainersNotReady", f"containers with unready status: [{container}]")
    assert ready["PodScheduled"][0] == "True"
    assert pull_events(core, pod.metadata.name) == {
        ("Normal", "Pulling", f'Pulling image "{image}"'): 1,
        ("Warning", "Failed", f'Failed to pull image "{image}": {error}'): 1,
        ("Warning", "Failed", "Error: ErrImagePull"): 1,
    }

    def reason_at(seconds):
        sim.advance(seconds)
        return core.read_namespaced_pod_status(pod.metadata.name, "team-a").status.container_statuses[0].state.waiting

    backoff = reason_at(1)
    assert (backoff.reason, backoff.message) == ("ImagePullBackOff", f'Back-off pulling image "{image}"')
    # The back-off: 10 s after the first pull, then 20, 40 ... at most 300.
    assert reason_at(8).reason == "ImagePullBackOff"
    assert reason_at(1).reason == "ErrImagePull"  # t = 10 s after the first pull
    assert reason_at(1).reason == "ImagePullBackOff"
    assert reason_at(18).reason == "ImagePullBackOff"  # t = 29
    assert reason_at(1).reason == "ErrImagePull"  # t = 30: 10 + 20
    events = pull_events(core, pod.metadata.name)
    assert events[("Warning", "Failed", "Error: ErrImagePull")] == 3
    assert events[("Warning", "Failed", "Error: ImagePullBackOff")] == 2
    assert events[("Normal", "BackOff", f'Back-off pulling image "{image}"')] == 2
    sim.advance(3600)
    assert core.read_namespaced_pod_status(pod.metadata.name, "team-a").status.phase == "Pending"
    assert batch.read_namespaced_job_status("pull", "team-a").status.active == 1


@pytest.mark.parametrize(
    "lose, reason, message, after",
    [
        ("fail", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint", 300),
        ("delete", "DeletionByPodGC", "PodGC: node no longer exists", 40),
    ],
)
def test_a_job_whose_only_pod_was_lost_with_its_node_fails(sim, core, batch, lose, reason, message, after):
    batch.create_namespaced_job("team-a", batch_job_manifest("lost", "team-a", duration=3600, backoff_limit=0))
    sim.advance(5)
    pod = only_pod(core, "lost")
    assert pod.status.phase == "Running"
    rv = core.list_namespaced_pod("team-a").metadata.resource_version
    if lose == "fail":
        sim.fail_node(pod.spec.node_name)
    else:
        sim.delete_node(pod.spec.node_name)
    sim.advance(after - 1)
    assert core.read_namespaced_pod_status(pod.metadata.name, "team-a").status.phase == "Running"
    sim.advance(2)
    # The pod object is gone; a watch shows the condition it carried on the way out.
    stream = core.list_namespaced_pod(
        "team-a", watch=True, resource_version=rv, timeout_seconds=1, _preload_content=False
    )

    events = [json.loads(line) for line in stream.read().decode().splitlines() if line.strip()]
    mine = [e for e in events if e["object"]["metadata"].get("uid") == pod.metadata.uid]
    assert mine[-1]["type"] == "DELETED"
    disruption = [c for c in mine[-1]["object"]["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in disruption] == [("True", reason, message)]
    assert job_conditions(batch, "lost")["Failed"] == ("True", "BackoffLimitExceeded")
    assert batch.read_namespaced_job_status("lost", "team-a").status.failed == 1
