"""Quota arithmetic, taints, and the node pool's gang placement."""

import pytest

from queueing import InFlightJob, Node, PodSet, Taint, Workload
from queueing.fit import NodeFailure, NodePool
from queueing.quota_fit import QuotaLine, quota_check, quota_lines
from queueing.snapshot import gang_of, node_totals

GI = 2**30


def gang(workers=1, gpu=0, cpu=1000, selector=None, tolerations=(), memory=GI):
    requests = {"cpu": cpu, "memory": memory}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
    workload = Workload(
        "TFJob", "kubeflow.org/v1", "j", None, (PodSet("Worker", workers, requests, {}, selector or {}, tolerations),)
    )
    groups = gang_of(workload)
    return groups, node_totals(groups)


def gpu_node(name, gpus=8, used=0, **kwargs):
    return Node(
        name,
        {"cpu": 64_000, "memory": 512 * GI, "nvidia.com/gpu": gpus, "pods": 110},
        {"nvidia.com/gpu": used},
        **kwargs,
    )


def placed_nodes(pool, result):
    assert not isinstance(result, NodeFailure), result
    return sorted(pool.names[node] for _, node in result)


def test_quota_check_reports_never_before_short_and_ignores_unrequested_keys():
    hard = {"pods": 4, "requests.cpu": 2000, "requests.nvidia.com/gpu": 0}
    roomy = {"pods": 4, "requests.cpu": 2000, "requests.nvidia.com/gpu": 0}
    over_gpu = {"pods": 4, "requests.cpu": 1000, "requests.nvidia.com/gpu": -3}  # quota lowered below usage
    assert quota_check({"pods": 5, "requests.cpu": 1}, hard, roomy) == ("pods", "pods")
    assert quota_check({"pods": 2, "requests.cpu": 1500}, hard, over_gpu) == (None, "requests.cpu")
    assert quota_check({"pods": 2, "requests.cpu": 500}, hard, over_gpu) == (None, None)
    assert quota_check({"pods": 2, "requests.nvidia.com/gpu": 0}, hard, over_gpu) == (None, None)


def test_quota_lines_say_per_key_what_quota_check_says_of_the_whole_demand():
    hard = {"pods": 4, "requests.cpu": 2000, "requests.nvidia.com/gpu": 2}
    used = {"pods": 1, "requests.cpu": 500, "requests.nvidia.com/gpu": 3}  # quota lowered below usage
    reserved = {"requests.cpu": 500}
    cpu_only = quota_lines({"pods": 2, "requests.cpu": 1000}, hard, used, reserved)
    assert cpu_only == [
        QuotaLine("pods", 2, 3, 4, short=False, never=False),
        QuotaLine("requests.cpu", 1000, 1000, 2000, short=False, never=False),
        QuotaLine("requests.nvidia.com/gpu", 0, -1, 2, short=False, never=False),
    ]
    gpu = quota_lines({"pods": 5, "requests.nvidia.com/gpu": 1}, hard, used, reserved)
    assert [(line.key, line.short, line.never) for line in gpu] == [
        ("pods", True, True),
        ("requests.cpu", False, False),
        ("requests.nvidia.com/gpu", True, False),
    ]
    for demand in ({"pods": 2, "requests.cpu": 1000}, {"requests.cpu": 1001}, {"pods": 5}, {"pods": 1}):
        free = {line.key: line.free for line in quota_lines({}, hard, used, reserved)}
        fits = quota_check(demand, hard, free) == (None, None)
        assert fits == (not any(line.short for line in quota_lines(demand, hard, used, reserved)))


@pytest.mark.parametrize(
    ("taint", "toleration", "tolerated"),
    [
        (Taint("gpu", "true"), {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}, True),
        (Taint("gpu", "true"), {"key": "gpu", "value": "false"}, False),
        (Taint("gpu", "true"), {"key": "gpu", "operator": "Exists"}, True),
        (Taint("gpu", "true"), {"operator": "Exists"}, True),  # empty key + Exists tolerates everything
        (Taint("gpu", "true", "NoExecute"), {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, False),
        (Taint("gpu", ""), {"key": "gpu"}, True),
    ],
)
def test_taint_toleration_matching_follows_kubernetes(taint, toleration, tolerated):
    assert taint.tolerated_by([toleration]) is tolerated


def test_prefer_no_schedule_taints_do_not_keep_pods_off():
    node = gpu_node("n", taints=(Taint("spot", "yes", "PreferNoSchedule"),))
    assert node.admits(gang()[0][0])


@pytest.mark.parametrize(("strategy", "expected"), [("best", "b"), ("first", "a"), ("worst", "a")])
def test_strategies_choose_the_tightest_the_first_or_the_emptiest_node(strategy, expected):
    pool = NodePool([gpu_node("a"), gpu_node("b", used=6), gpu_node("c", used=4)], strategy=strategy)
    groups, totals = gang(1, gpu=2)
    assert placed_nodes(pool, pool.place(groups, totals)) == [expected]


def test_a_failing_gang_leaves_the_pool_exactly_as_it_was():
    pool = NodePool([gpu_node("a", used=4), gpu_node("b", used=4), gpu_node("c", used=6)])
    before = [dict(free) for free in pool.free], dict(pool.totals)
    groups, totals = gang(3, gpu=3)  # 9 of the 10 free GPUs, but the third pod finds only 2 on a node
    failure = pool.place(groups, totals)
    assert isinstance(failure, NodeFailure) and failure.kind == "nofit"
    assert (failure.placed, failure.pods, failure.resource) == (2, 3, "nvidia.com/gpu")
    assert ([dict(free) for free in pool.free], dict(pool.totals)) == before


def test_failures_are_memoised_and_the_cluster_wide_check_rejects_without_looking_at_nodes():
    pool = NodePool([gpu_node("a", used=7), gpu_node("b", used=7)])
    groups, totals = gang(1, gpu=2)
    first = pool.place(groups, totals)
    assert pool.place(groups, totals) is first
    assert pool.stats["memo_hits"] == 1
    groups, totals = gang(3, gpu=1)  # 3 GPUs wanted, 2 free in the whole cluster
    failure = pool.place(groups, totals)
    assert (failure.scope, failure.needed, failure.free) == ("cluster", 3, 2)
    assert pool.stats["cluster_rejects"] == 1


def test_a_pod_no_eligible_node_could_ever_hold_never_fits():
    pool = NodePool([gpu_node("a", labels={"pool": "gpu"}), Node("cpu", {"cpu": 4000, "memory": GI})])
    groups, totals = gang(1, cpu=100_000)
    failure = pool.place(groups, totals)
    assert (failure.kind, failure.resource, failure.needed, failure.free) == ("never", "cpu", 100_000, 64_000)
    groups, totals = gang(1, selector={"pool": "tpu"})
    assert pool.place(groups, totals).kind == "never"
    groups, totals = gang(1, gpu=9)
    assert pool.place(groups, totals).kind == "never"


def test_nodes_without_a_pod_limit_are_not_limited_and_in_flight_placements_are_charged():
    workload = Workload("TFJob", "kubeflow.org/v1", "j", None, (PodSet("Worker", 2, {"cpu": 3000}),))
    in_flight = InFlightJob(1, "ns", workload, (("Worker", 0, "a"), ("Worker", 1, "a")))
    pool = NodePool([Node("a", {"cpu": 8000}), Node("b", {"cpu": 1000})], [in_flight])
    assert pool.free[0]["cpu"] == 2000
    groups, totals = gang(2, cpu=1000, memory=0)
    assert placed_nodes(pool, pool.place(groups, totals)) == ["a", "b"]


def test_a_reservation_keeps_later_pods_off_the_reserved_capacity():
    pool = NodePool([gpu_node("a", used=6), gpu_node("b", used=3)])
    big, _ = gang(1, gpu=8)
    assert pool.reserve(42, big)
    assert [number for _, number, _ in pool.reservations] == [1]  # b: the most free GPUs now
    groups, totals = gang(1, gpu=2)
    assert placed_nodes(pool, pool.place(groups, totals)) == ["a"]
    failure = pool.place(groups, totals)
    assert failure.kind == "reserved" and failure.reserved_by == 42


def test_a_reservation_that_cannot_be_held_changes_nothing():
    pool = NodePool([gpu_node("a", gpus=4)])
    before = [dict(free) for free in pool.free]
    big, _ = gang(2, gpu=4)
    assert not pool.reserve(1, big)
    assert [dict(free) for free in pool.free] == before and pool.reservations == []


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="strategy"):
        NodePool([], strategy="random")
