"""Plain Pods and pod groups in the core (queueing/kinds/pod.py): a group's label and count
validated at their paths, its Workload (the group's count of pods, named by the group),
its status from its pods' phases, its quota held already, and the planner's rules for
it: it waits for its pods, and it is never a preemption victim."""

import pytest

from queueing import (
    NamespaceQuota,
    Node,
    PendingJob,
    PodSet,
    Reason,
    RunningJob,
    Snapshot,
    Workload,
    capabilities,
    plan,
)
from queueing.errors import ManifestError
from queueing.kinds.pod import COUNT_ANNOTATION, COUNT_PATH, GROUP_LABEL, GROUP_PATH, POD, asks_devices

NOW = 1_000_000.0
GPU = "nvidia.com/gpu"


def pod(name="p-0", gpus=2, labels=None, annotations=None) -> dict:
    amounts = {"cpu": "1", GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": amounts, "limits": amounts}}]},
    }


def member(name: str, count: str | None = "4", group: str = "gang") -> dict:
    return pod(name, labels={GROUP_LABEL: group}, annotations={COUNT_ANNOTATION: count} if count is not None else {})


def problems(manifest: dict) -> dict[str, str]:
    with pytest.raises(ManifestError) as error:
        POD.validate_and_build(manifest)
    return {e.path: e.message for e in error.value.errors}


def test_a_single_pod_is_a_job_of_one_pod_named_by_the_pod():
    workload = POD.validate_and_build(pod("solo", gpus=8))
    assert (workload.name, workload.pods, workload.requests[GPU]) == ("solo", 1, 8)


def test_whether_a_pod_asks_for_devices_is_read_from_its_raw_manifest():
    assert asks_devices(pod("solo", gpus=8))
    cpu_only = pod("cpu")
    cpu_only["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert not asks_devices(cpu_only)
    in_limits_only = pod("limits")
    in_limits_only["spec"]["containers"][0]["resources"] = {"limits": {"aliyun.com/gpu-mem": "4"}}
    assert asks_devices(in_limits_only)
    in_an_init_container = pod("init")
    in_an_init_container["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {GPU: "1"}}}]
    in_an_init_container["spec"]["containers"][0]["resources"] = {}
    assert asks_devices(in_an_init_container)
    # Asked before any validation: whatever is malformed is not a device asked for.
    for spec in (
        None,
        [],
        {"containers": None},
        {"containers": ["c"]},
        {"containers": 5},
        {"initContainers": "x"},
        {"containers": [{"resources": ["x"]}]},
    ):
        assert not asks_devices({"kind": "Pod", "spec": spec})


def test_a_group_is_its_count_of_pods_of_its_members_shape_named_by_the_group():
    assert POD.validate_and_build(member("m" * 100)).name == "gang"
    workload = POD.validate_and_build(member("gang-0"))
    assert (workload.name, workload.pods, workload.requests[GPU]) == ("gang", 4, 8)
    # Its pods are counted by "pods": no object of its own in the quota.
    assert workload.quota_demand()["pods"] == 4
    assert not any(key.startswith("count/") for key in workload.quota_demand())


@pytest.mark.parametrize(
    ("manifest", "path", "words"),
    [
        (member("g-0", count=None), COUNT_PATH, "required in a pod group"),
        (member("g-0", count="four"), COUNT_PATH, "whole number"),
        (member("g-0", count="0"), COUNT_PATH, "whole number"),
        (member("g-0", count="-2"), COUNT_PATH, "whole number"),
        (member("g-0", count="10001"), COUNT_PATH, "whole number"),
        (pod("g-0", annotations={COUNT_ANNOTATION: "2"}), GROUP_PATH, "required with the annotation"),
        (member("g-0", group="Not_A_Name"), f"metadata.labels.{GROUP_LABEL}", ""),
        # A single pod's name is its job's: no longer than 63 characters (a member's may be).
        (pod("p" * 64), "metadata.name", "at most 63 characters"),
    ],
)
def test_bad_group_labels_and_counts_are_refused_at_their_paths(manifest, path, words):
    found = problems(manifest)
    assert path in found, found
    assert words in found[path]


def test_status_follows_the_pods_phases():
    status = POD.status_of_pods
    assert status(["Succeeded"] * 4, 4).phase == "Succeeded"
    assert status(["Succeeded", "Succeeded", "Failed", "Running"], 4).phase == "Failed"
    assert status(["Running", "Pending"], 2).phase == "Running"
    assert status(["Pending", "Pending"], 2).phase == "Created"
    # A member deleted while the rest finished: the group cannot finish.
    gone = status(["Succeeded"] * 3, 4)
    assert gone.phase == "Failed" and "1 of 4 pods were deleted" in gone.message
    # One pod is one pod, not "all 1 pods".
    assert (status(["Succeeded"], 1).message, status(["Succeeded"] * 2, 2).message) == (
        "its pod succeeded",
        "all 2 pods succeeded",
    )
    assert status(["Failed"], 1).message == "1 of 1 pod failed"


def test_a_waiting_pod_jobs_quota_is_held_already():
    workload = POD.validate_and_build(member("gang-0"))
    demand = capabilities.waiting_demand(POD, workload, count_object=True)
    assert set(demand) == set(workload.quota_demand()) and set(demand.values()) == {0}


def gang(pods: int) -> Workload:
    return Workload("Pod", "v1", "gang", "team-a", (PodSet("pod", pods, {GPU: 2}, {GPU: 2}),))


def test_a_group_waits_for_its_pods_then_for_room_like_any_gang():
    nodes = (Node("n0", {GPU: 8, "pods": 110}),)
    quotas = {"team-a": NamespaceQuota("team-a", {"requests.nvidia.com/gpu": 8}, {"requests.nvidia.com/gpu": 8})}
    demand = capabilities.waiting_demand(POD, gang(4), count_object=True)
    waiting = PendingJob(1, "team-a", 0, NOW - 10, gang(4), demand=demand, pods_created=2)
    result = plan(Snapshot(NOW, (waiting,), quotas=quotas, nodes=nodes))
    status = result.pending[1]
    assert status.reason is Reason.WAITING_FOR_PODS and "2 of 4 created" in status.message
    # Every member there: admitted, although its quota shows all 8 GPUs used (by its own gated pods).
    complete = PendingJob(1, "team-a", 0, NOW - 10, gang(4), demand=demand)
    assert [a.job_id for a in plan(Snapshot(NOW, (complete,), quotas=quotas, nodes=nodes)).admissions] == [1]


def test_a_pod_job_is_never_a_preemption_victim():
    def world(preemptible: bool) -> Snapshot:
        pods = tuple(("pod", index, "n0") for index in range(4))
        victim = RunningJob(10, "team-a", gang(4), NOW - 50, borrowing=True, placements=pods, preemptible=preemptible)
        key = "requests.nvidia.com/gpu"
        quotas = {
            name: NamespaceQuota(name, {key: 8}, {key: used}, guaranteed={key: 4})
            for name, used in (("team-a", 8), ("team-b", 0))
        }
        nodes = (Node("n0", {GPU: 8, "pods": 110}, {GPU: 8}),)
        waiting = PendingJob(
            1, "team-b", 0, NOW - 10, Workload("Pod", "v1", "b", "team-b", (PodSet("pod", 2, {GPU: 2}, {GPU: 2}),))
        )
        return Snapshot(NOW, (waiting,), running=(victim,), quotas=quotas, nodes=nodes)

    assert [p.victim for p in plan(world(preemptible=True)).preemptions] == [10]
    assert plan(world(preemptible=False)).preemptions == ()
