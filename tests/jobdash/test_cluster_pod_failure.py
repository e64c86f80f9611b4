"""convert.pod reads a pod's failure only for pods that show trouble, through queueing.failures."""

from jobdash.cluster import convert
from queueing.failures import Failure


def pod(phase, container_state, conditions=()):
    return {
        "metadata": {"name": "train-worker-0", "namespace": "team-a", "labels": {}},
        "spec": {"nodeName": "n3", "containers": [{"name": "pytorch", "image": "repo/x:v1"}]},
        "status": {
            "phase": phase,
            "conditions": list(conditions),
            "containerStatuses": [{"name": "pytorch", "image": "repo/x:v1", "state": container_state}],
        },
    }


def test_a_failed_pod_carries_its_failure():
    info = convert.pod(pod("Failed", {"terminated": {"exitCode": 3, "reason": "Error"}}))
    assert info.failure == Failure("ExitCode", "ExitCode: exit code 3 (pod train-worker-0, container pytorch)", 3)


def test_a_pending_pod_that_cannot_pull_its_image():
    info = convert.pod(pod("Pending", {"waiting": {"reason": "ImagePullBackOff"}}))
    assert info.failure == Failure("ImagePull", 'ImagePull: image "repo/x:v1" could not be pulled (ImagePullBackOff)')


def test_a_running_pod_with_a_disruption_target():
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
    info = convert.pod(pod("Running", {"running": {}}, [condition]))
    assert info.failure == Failure("NodeLost", "NodeLost: node n3 failed (pod train-worker-0)")


def test_healthy_and_restarting_pods_are_not_read():
    assert convert.pod(pod("Running", {"running": {}})).failure is None
    assert convert.pod(pod("Pending", {"waiting": {"reason": "ContainerCreating"}})).failure is None
    # A running pod whose container restarted is not failed (its job decides when it is).
    restarting = pod("Running", {"waiting": {"reason": "CrashLoopBackOff"}})
    assert convert.pod(restarting).failure is None
    assert convert.pod(pod("Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed"}})).failure is None
