"""Failure classes read from pods shaped as the API server returns them (kubelet, taint
manager, pod GC, scheduler and Eviction API each write their own fields)."""

import copy

import pytest

from queueing.failures import Failure, backoff_s, deadline_exceeded, job_failure, node_lost, pod_failure, retriable
from queueing.job_options import RetryPolicy


def pod(phase="Running", containers=None, conditions=(), init=None, **status):
    """A pod of a training job: one main container (pytorch) and a sidecar, on node n3."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-worker-0", "namespace": "team-a", "uid": "7c1f"},
        "spec": {
            "nodeName": "n3",
            "restartPolicy": "Never",
            "initContainers": [{"name": "fetch", "image": "busybox:1.36"}],
            "containers": [
                {"name": "pytorch", "image": "repo/x:v1", "resources": {"limits": {"memory": "4Gi"}}},
                {"name": "logger", "image": "repo/logger:v1"},
            ],
        },
        "status": {
            "phase": phase,
            "conditions": list(conditions),
            "hostIP": "10.0.0.3",
            "initContainerStatuses": init or [],
            "containerStatuses": containers or [],
            **status,
        },
    }


def terminated(name, code, reason="Error", image="repo/x:v1", last=None):
    state = {"terminated": {"exitCode": code, "reason": reason, "startedAt": "2025-01-01T00:00:00Z"}}
    return {"name": name, "image": image, "ready": False, "restartCount": 1 if last else 0, "state": state,
            "lastState": last or {}}  # fmt: skip


def running(name, last=None):
    return {"name": name, "image": "repo/x:v1", "ready": True, "restartCount": 1 if last else 0,
            "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}, "lastState": last or {}}  # fmt: skip


def waiting(name, reason, image="repo/x:nope"):
    return {"name": name, "image": image, "ready": False, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": f"Back-off pulling image {image!r}"}}}  # fmt: skip


def disruption(reason, message=""):
    return {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": "2025-01-01T00:00:00Z"}  # fmt: skip


def test_a_healthy_pod_and_a_succeeded_pod_have_no_failure():
    assert pod_failure(pod("Running", [running("pytorch"), running("logger")])) is None
    assert pod_failure(pod("Pending")) is None
    restarted_then_done = terminated("pytorch", 0, "Completed", last={"terminated": {"exitCode": 1, "reason": "Error"}})
    assert pod_failure(pod("Succeeded", [restarted_then_done])) is None


def test_exit_code_of_the_main_container_first():
    # The status list's order is not the spec's: the main container (first in the spec) wins.
    found = pod_failure(pod("Failed", [terminated("logger", 2), terminated("pytorch", 3)]))
    assert found == Failure("ExitCode", "ExitCode: exit code 3 (pod train-worker-0, container pytorch)", 3)
    assert str(found) == found.message


def test_an_init_container_that_failed():
    found = pod_failure(pod("Failed", init=[terminated("fetch", 7, image="busybox:1.36")],
                            containers=[waiting("pytorch", "PodInitializing", "repo/x:v1")]))  # fmt: skip
    assert (found.cls, found.exit_code) == ("ExitCode", 7)
    assert "container fetch" in found.message


def test_oom_killed_names_the_container_and_its_limit():
    found = pod_failure(pod("Failed", [terminated("pytorch", 137, "OOMKilled"), terminated("logger", 143)]))
    assert found == Failure(
        "OOMKilled", "OOMKilled: container pytorch of pod train-worker-0 ran out of memory (limit 4Gi)", 137
    )


def test_oom_in_last_state_of_a_restarting_container():
    # restartPolicy OnFailure: the container was restarted; what killed it is in lastState.
    last = {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2025-01-01T00:10:00Z"}}
    crashing = {"name": "logger", "image": "repo/logger:v1", "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": last}  # fmt: skip
    found = pod_failure(pod("Failed", [running("pytorch"), crashing]))
    assert found.cls == "OOMKilled"
    assert "container logger" in found.message and "no memory limit" in found.message


def test_exit_code_in_last_state_when_the_current_state_says_nothing():
    crashing = {"name": "pytorch", "image": "repo/x:v1", "restartCount": 6,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 42, "reason": "Error"}}}  # fmt: skip
    assert pod_failure(pod("Running", [crashing])).exit_code == 42


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff", "InvalidImageName"])
def test_image_pull(reason):
    found = pod_failure(pod("Pending", [waiting("pytorch", reason)]))
    assert found == Failure("ImagePull", f'ImagePull: image "repo/x:nope" could not be pulled ({reason})')


def test_image_pull_of_an_init_container():
    found = pod_failure(pod("Pending", init=[waiting("fetch", "ErrImagePull", "busybox:nope")]))
    assert found.message == 'ImagePull: image "busybox:nope" could not be pulled (ErrImagePull)'


@pytest.mark.parametrize(
    ("reason", "cls"),
    [
        ("DeletionByTaintManager", "NodeLost"),
        ("DeletionByPodGC", "NodeLost"),
        ("EvictionByEvictionAPI", "Evicted"),
        ("TerminationByKubelet", "Evicted"),
        ("PreemptionByScheduler", "Preempted"),
    ],
)
def test_disruption_target_reasons(reason, cls):
    # The containers were killed by the disruption: their exit codes are not what failed.
    found = pod_failure(pod("Failed", [terminated("pytorch", 137)], [disruption(reason, "taken")]))
    assert found.cls == cls
    assert found.message.startswith(f"{cls}: ")
    assert "train-worker-0" in found.message


def test_node_lost_message():
    found = pod_failure(pod("Failed", [terminated("pytorch", 143)], [disruption("DeletionByTaintManager")]))
    assert found == Failure("NodeLost", "NodeLost: node n3 failed (pod train-worker-0)")
    assert node_lost("train-worker-0", "n3") == found


def test_a_false_disruption_condition_is_ignored():
    condition = {**disruption("PreemptionByScheduler"), "status": "False"}
    assert pod_failure(pod("Failed", [terminated("pytorch", 3)], [condition])).cls == "ExitCode"


def test_kubelet_eviction_by_status_reason():
    # What a kubelet under memory pressure writes (no DisruptionTarget on older clusters).
    message = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi."
    found = pod_failure(pod("Failed", [terminated("pytorch", 137)], reason="Evicted", message=message))
    assert found.cls == "Evicted"
    assert message in found.message


def test_node_lost_by_status_reason():
    found = pod_failure(pod("Failed", reason="NodeLost", message="Node n3 which was running pod is unresponsive"))
    assert found.cls == "NodeLost"


def test_failed_with_nothing_identifiable_is_unknown():
    found = pod_failure(pod("Failed", reason="UnexpectedAdmissionError", message="Allocate failed"))
    assert found == Failure("Unknown", "Unknown: pod train-worker-0 failed: Allocate failed")


def test_a_pod_is_not_modified():
    original = pod("Failed", [terminated("pytorch", 3)], [disruption("PreemptionByScheduler")])
    kept = copy.deepcopy(original)
    pod_failure(original)
    assert original == kept


def test_job_failure_picks_the_most_telling():
    exit_3 = Failure("ExitCode", "ExitCode: exit code 3", 3)
    oom = Failure("OOMKilled", "OOMKilled: ...", 137)
    lost = node_lost("w-1", "n3")
    assert job_failure([None, exit_3, oom, lost]) is lost
    assert job_failure([exit_3, oom]) is oom
    assert job_failure([exit_3, Failure("ExitCode", "ExitCode: exit code 9", 9)]) is exit_3
    assert job_failure([None], "Job has reached the specified backoff limit") == Failure(
        "Unknown", "Unknown: Job has reached the specified backoff limit"
    )
    assert job_failure([]).cls == "Unknown"


def test_retriable_by_class_and_limit():
    policy = RetryPolicy()  # limit 3, NodeLost, Evicted, Preempted
    lost = node_lost("w-0", "n3")
    assert retriable(policy, lost, 0) and retriable(policy, lost, 2)
    assert not retriable(policy, lost, 3)
    assert not retriable(policy, Failure("ExitCode", "ExitCode: exit code 3", 3), 0)
    assert not retriable(RetryPolicy(limit=0), lost, 0)


def test_retriable_exit_codes_only_those_listed():
    policy = RetryPolicy(exit_codes=frozenset({3, 42}))
    assert retriable(policy, Failure("ExitCode", "", 42), 0)
    assert not retriable(policy, Failure("ExitCode", "", 1), 0)
    # ExitCode in retry-on with codes listed: still only those codes.
    assert not retriable(
        RetryPolicy(on=frozenset({"ExitCode"}), exit_codes=frozenset({3})), Failure("ExitCode", "", 1), 0
    )
    assert retriable(RetryPolicy(on=frozenset({"ExitCode"})), Failure("ExitCode", "", 1), 0)


def test_deadline_exceeded_is_never_retried():
    failure = deadline_exceeded(7200)
    assert failure.message == "DeadlineExceeded: stopped after its max run time of 2h"
    assert not retriable(RetryPolicy(on=frozenset({"DeadlineExceeded"}), limit=100), failure, 0)


def test_backoff_doubles_up_to_an_hour():
    policy = RetryPolicy(backoff_s=30)
    assert [backoff_s(policy, n) for n in range(4)] == [30, 60, 120, 240]
    assert backoff_s(policy, 7) == 3600
    assert backoff_s(policy, 10_000) == 3600


def test_failure_json_round_trip():
    failure = Failure("ExitCode", "ExitCode: exit code 3 (pod p, container c)", 3)
    assert failure.to_json() == {"cls": "ExitCode", "message": failure.message, "exit_code": 3}
    assert Failure.from_json(failure.to_json()) == failure
