"""The admission core on hand-built worlds: the issue's scenarios and each policy's rules."""

import pytest

from queueing import (
    Admission,
    InFlightJob,
    NamespaceQuota,
    Node,
    PendingJob,
    PodSet,
    Reason,
    RunningJob,
    Snapshot,
    Taint,
    Workload,
    get_policy,
    parse_job,
    plan,
)

GI = 2**30
NOW = 1_000_000.0
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def tfjob(workers=1, *, cpu=1000, memory=GI, gpu=0, ps=0, selector=None, tolerations=(), annotations=None):
    requests, limits = {"cpu": cpu, "memory": memory}, {"memory": memory}
    if gpu:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = gpu
    pod_sets = [PodSet("PS", ps, {"cpu": 500, "memory": GI}, {"memory": GI})] if ps else []
    pod_sets.append(PodSet("Worker", workers, requests, limits, selector or {}, tolerations))
    return Workload("TFJob", "kubeflow.org/v1", "job", None, tuple(pod_sets), annotations=annotations or {})


def job(job_id, workload, namespace="team-a", priority=0, submitted_at=None, **kwargs):
    submitted = NOW - 60 + job_id if submitted_at is None else submitted_at
    return PendingJob(job_id, namespace, priority, submitted, workload, **kwargs)


def node(name, cpu=16_000, memory=64 * GI, gpu=0, pods=110, allocated=None, **kwargs):
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpu:
        allocatable["nvidia.com/gpu"] = gpu
    return Node(name, allocatable, allocated or {}, **kwargs)


def quota(hard, used=None, namespace="team-a", weight=1):
    return NamespaceQuota(namespace, hard, used or {}, weight)


def world(pending, nodes=(), quotas=(), **kwargs):
    return Snapshot(NOW, tuple(pending), quotas={q.namespace: q for q in quotas}, nodes=tuple(nodes), **kwargs)


# -- the scenarios ---------------------------------------------------------------


def test_deadlock_two_four_pod_jobs_and_quota_for_six_pods_admits_one_and_holds_the_other():
    snapshot = world([job(1, tfjob(4)), job(2, tfjob(4))], nodes=[node("n1", cpu=64_000)], quotas=[quota({"pods": 6})])
    result = plan(snapshot)
    assert result.admitted == (1,)
    assert len(result.admissions[0].placement) == 4
    held = result.pending[2]
    assert held.reason is Reason.QUOTA_EXCEEDED
    assert (held.detail["resource"], held.detail["needed"], held.detail["free"]) == ("pods", 4, 2)
    assert "pods" in held.message and "needs 4" in held.message


def test_deadlock_on_nodes_two_four_pod_jobs_and_room_for_six_pods_admits_one():
    nodes = [node(f"n{i}", cpu=2_000) for i in range(3)]  # 3 nodes x 2 one-cpu pods
    result = plan(world([job(1, tfjob(4)), job(2, tfjob(4))], nodes=nodes))
    assert result.admitted == (1,)
    assert sorted(n for _, _, n in result.admissions[0].placement) == ["n0", "n0", "n1", "n1"]  # best fit packs
    assert result.pending[2].reason is Reason.NO_NODE_FITS


def test_fragmentation_two_nodes_with_one_free_gpu_each_cannot_run_a_two_gpu_pod():
    nodes = [node(f"n{i}", gpu=4, allocated={"nvidia.com/gpu": 3}) for i in range(2)]
    result = plan(world([job(1, tfjob(1, gpu=2))], nodes=nodes, quotas=[quota({"requests.nvidia.com/gpu": 8})]))
    assert result.admitted == ()
    status = result.pending[1]
    assert status.reason is Reason.NO_NODE_FITS
    assert status.detail["resource"] == "nvidia.com/gpu"
    assert (status.detail["needed"], status.detail["free"]) == (2, 1)
    # The same world without node fit (the article's quota-only check) would release it.
    assert plan(world([job(1, tfjob(1, gpu=2))], nodes=nodes, node_fit=False)).admitted == (1,)


def _small_stream_world(t, running, queue, large):
    allocated = {"n1": 0, "n2": 0}
    for _, node_name, _ in running:
        allocated[node_name] += 1
    nodes = [
        node(
            name,
            cpu=64_000,
            memory=256 * GI,
            gpu=8,
            allocated={"nvidia.com/gpu": gpus, "cpu": 1000 * gpus, "memory": GI * gpus, "pods": gpus},
        )
        for name, gpus in allocated.items()
    ]
    pending = ([large] if large is not None else []) + queue
    return Snapshot(t, tuple(pending), nodes=tuple(nodes))


def _run_stream(policy, hours=3):
    """Two 8-GPU nodes kept busy by 1-GPU jobs (10 min each, 3 arriving per minute);
    one 8-GPU job waits from t=0.  Returns the time it was admitted, or None."""
    large = PendingJob(0, "team-a", 0, 0.0, tfjob(1, gpu=8))
    small = tfjob(1, gpu=1)
    running = [(index, "n1" if index < 8 else "n2", 60.0 * index % 600) for index in range(16)]  # (id, node, end)
    queue, next_id = [], 1
    for minute in range(hours * 60):
        t = 60.0 * minute
        running = [entry for entry in running if entry[2] > t]
        for _ in range(3):
            queue.append(PendingJob(next_id, "team-b", 0, t, small))
            next_id += 1
        result = plan(_small_stream_world(t, running, queue, large), policy)
        for admission in result.admissions:
            running.append((admission.job_id, admission.placement[0][2], t + 600))
            if admission.job_id == 0:
                return t
        admitted = set(result.admitted)
        queue = [pending for pending in queue if pending.id not in admitted]
    return None


def test_steady_stream_of_small_jobs_does_not_starve_a_large_one_under_priority():
    started = _run_stream(get_policy("priority", reservation_after_s=3600))
    # It reserves a node after an hour; the node drains within one small-job duration.
    assert started is not None and 3600 <= started <= 3600 + 600 + 60


def test_without_a_reservation_the_same_stream_starves_the_large_job():
    assert _run_stream(get_policy("priority", reservation_after_s=None)) is None


# -- quota rule ----------------------------------------------------------------------------


def test_every_constrained_key_counts_and_in_flight_outstanding_is_reserved():
    workload = tfjob(2, cpu=1000, memory=2 * GI, gpu=1)  # demand: 2 cpu, 4Gi, 2 GPUs, 2 pods, 1 TFJob
    in_flight = InFlightJob(99, "team-a", tfjob(1, gpu=1), outstanding={"requests.nvidia.com/gpu": 1})
    cases = {
        "requests.cpu": 1_999,
        "cpu": 1_999,
        "requests.memory": 4 * GI - 1,
        "memory": 4 * GI - 1,
        "limits.memory": 4 * GI - 1,
        "requests.nvidia.com/gpu": 2 + 1 - 1,
        "pods": 1,
        "count/tfjobs.kubeflow.org": 0,
    }
    for key, hard in cases.items():
        tight = NamespaceQuota("team-a", {key: hard + 100}, {key: 100})
        result = plan(Snapshot(NOW, (job(1, workload),), (in_flight,), quotas={"team-a": tight}, node_fit=False))
        assert result.pending[1].reason is Reason.QUOTA_EXCEEDED, key
        assert result.pending[1].detail["resource"] == key
        roomy = NamespaceQuota("team-a", {key: hard + 101 + (key == "requests.nvidia.com/gpu")}, {key: 100})
        assert plan(
            Snapshot(NOW, (job(1, workload),), (in_flight,), quotas={"team-a": roomy}, node_fit=False)
        ).admitted == (1,), key


def test_limits_cpu_without_limits_counts_as_zero_and_an_absent_quota_constrains_nothing():
    result = plan(world([job(1, tfjob(8, cpu=4000))], quotas=[quota({"limits.cpu": 1})], node_fit=False))
    assert result.admitted == (1,)  # no container sets a cpu limit
    unlimited = world([job(1, tfjob(50, cpu=64_000))], quotas=[quota({"pods": 1}, namespace="other")], node_fit=False)
    assert plan(unlimited).admitted == (1,)


def test_a_job_over_hard_outright_never_fits_and_says_so():
    result = plan(world([job(1, tfjob(1, gpu=16))], quotas=[quota({"requests.nvidia.com/gpu": 8})], node_fit=False))
    status = result.pending[1]
    assert status.reason is Reason.NEVER_FITS_QUOTA and status.reason.never
    assert (status.detail["needed"], status.detail["hard"]) == (16, 8)
    assert status.eta is None and "never fits" in status.message


def test_several_quotas_combine_to_the_tightest():
    combined = NamespaceQuota.combine(
        [
            NamespaceQuota("team-a", {"pods": 10, "requests.cpu": 4000}, {"pods": 2, "requests.cpu": 1000}),
            NamespaceQuota("team-a", {"pods": 5}, {"pods": 2}),
        ]
    )
    assert dict(combined.hard) == {"pods": 5, "requests.cpu": 4000}
    result = plan(world([job(1, tfjob(4)), job(2, tfjob(3))], quotas=[combined], node_fit=False))
    assert result.admitted == (2,)  # 2 used + 4 > 5, but 2 + 3 fits
    with pytest.raises(ValueError):
        NamespaceQuota.combine([quota({"pods": 1}, namespace="a"), quota({"pods": 1}, namespace="b")])


def test_a_pod_bigger_than_every_node_never_fits_even_while_quota_is_short():
    nodes = [node("n1", gpu=8)]
    result = plan(
        world(
            [job(1, tfjob(1, gpu=9))],
            nodes=nodes,
            quotas=[quota({"requests.nvidia.com/gpu": 16}, {"requests.nvidia.com/gpu": 16})],
        )
    )
    assert result.pending[1].reason is Reason.NEVER_FITS_NODES
    assert result.pending[1].detail == {
        "resource": "nvidia.com/gpu",
        "needed": 9,
        "free": 8,
        "role": "Worker",
        "node": "n1",
    }


# -- nodes ---------------------------------------------------------------------------------


def test_node_selector_taints_and_unschedulable_nodes_are_honoured():
    gpu_nodes = [
        node("tainted", gpu=8, taints=(GPU_TAINT,), labels={"pool": "gpu"}),
        node("cordoned", gpu=8, labels={"pool": "gpu"}, unschedulable=True),
        node("plain", gpu=8, labels={"pool": "cpu"}),
    ]
    tolerant = tfjob(1, gpu=1, selector={"pool": "gpu"}, tolerations=(GPU_TOLERATION,))
    intolerant = tfjob(1, gpu=1, selector={"pool": "gpu"})
    result = plan(world([job(1, tolerant), job(2, intolerant)], nodes=gpu_nodes))
    assert result.admissions[0].placement == (("Worker", 0, "tainted"),)
    assert result.pending[2].reason is Reason.NEVER_FITS_NODES
    assert "nodeSelector" in result.pending[2].message


def test_gpus_are_whole_per_node_and_a_gang_is_all_or_nothing():
    nodes = [node("a", gpu=4, allocated={"nvidia.com/gpu": 1}), node("b", gpu=4, allocated={"nvidia.com/gpu": 1})]
    # 6 GPUs free in total, but a 2-pod gang of 4 GPUs each fits nowhere; the 1-pod job after it does.
    result = plan(world([job(1, tfjob(2, gpu=4)), job(2, tfjob(2, gpu=3))], nodes=nodes))
    assert result.admitted == (2,)
    assert sorted(n for _, _, n in result.admissions[0].placement) == ["a", "b"]
    assert result.pending[1].reason is Reason.NO_NODE_FITS


def test_in_flight_placements_take_node_capacity():
    nodes = [node("a", gpu=2), node("b", gpu=2)]
    in_flight = InFlightJob(50, "team-z", tfjob(2, gpu=2), placements={"Worker-0": "a", "worker-1": "b"})
    assert in_flight.placements == (("Worker", 0, "a"), ("Worker", 1, "b"))
    result = plan(Snapshot(NOW, (job(1, tfjob(1, gpu=1)),), (in_flight,), nodes=tuple(nodes)))
    assert result.pending[1].reason is Reason.NO_NODE_FITS
    assert result.pending[1].detail["scope"] == "cluster"


def test_best_fit_keeps_a_whole_node_free_for_the_next_big_job():
    nodes = [node("a", gpu=8), node("b", gpu=8, allocated={"nvidia.com/gpu": 6})]
    result = plan(world([job(1, tfjob(1, gpu=2)), job(2, tfjob(1, gpu=8))], nodes=nodes))
    assert result.admitted == (1, 2)
    assert [a.placement[0][2] for a in result.admissions] == ["b", "a"]
    first_fit = plan(world([job(1, tfjob(1, gpu=2)), job(2, tfjob(1, gpu=8))], nodes=nodes), strategy="first")
    assert first_fit.admitted == (1,)


# -- policies ------------------------------------------------------------------------------


def test_seed_releases_the_largest_cpu_job_that_fits_per_namespace_without_in_flight():
    pending = [
        job(1, tfjob(1, cpu=2000)),
        job(2, tfjob(1, cpu=8000)),
        job(3, tfjob(1, cpu=4000)),
        job(4, tfjob(1, cpu=1000), namespace="team-b"),
        job(5, tfjob(1, cpu=9000), namespace="team-b"),
    ]
    in_flight = InFlightJob(9, "team-b", tfjob(1))
    quotas = {"team-a": quota({"requests.cpu": 9000}, {"requests.cpu": 1500})}
    result = plan(Snapshot(NOW, tuple(pending), (in_flight,), quotas=quotas, nodes=(node("tiny", cpu=1),)), "seed")
    assert result.admissions == (Admission(3, "team-a", None),)  # 8000 does not fit the 7500 free
    assert result.pending[2].reason is Reason.QUOTA_EXCEEDED
    assert result.pending[1].reason is Reason.WAITING_FOR_IN_FLIGHT
    assert result.pending[5].reason is Reason.WAITING_FOR_IN_FLIGHT and "job 9" in result.pending[5].message
    assert [result.pending[i].position for i in (2, 1)] == [1, 2]  # seed queues by CPU, largest first


def test_fifo_strict_head_blocks_its_namespace_and_besteffort_skips_it():
    pending = [job(1, tfjob(1, gpu=4)), job(2, tfjob(1, gpu=1)), job(3, tfjob(1, gpu=1), namespace="team-b")]
    nodes = [node("n", gpu=4, allocated={"nvidia.com/gpu": 2})]
    strict = plan(world(pending, nodes=nodes), "fifo")
    assert strict.admitted == (3,)
    assert strict.pending[2].reason is Reason.BLOCKED_BY_QUEUE_HEAD and strict.pending[2].detail == {"head": 1}
    assert plan(world(pending, nodes=nodes), "fifo-besteffort").admitted == (2, 3)


def test_priority_orders_by_priority_then_submission_and_aging_lifts_old_jobs():
    old = job(1, tfjob(1, gpu=1), submitted_at=NOW - 5 * 3600)
    urgent = job(2, tfjob(1, gpu=1), priority=3, submitted_at=NOW - 60)
    nodes = [node("n", gpu=1)]
    assert plan(world([old, urgent], nodes=nodes), get_policy("priority", aging_per_hour=0.0)).admitted == (2,)
    assert plan(world([old, urgent], nodes=nodes), get_policy("priority", aging_per_hour=1.0)).admitted == (1,)


def test_a_reservation_holds_quota_for_the_old_head():
    big_old = job(1, tfjob(1, gpu=4), submitted_at=NOW - 7200)
    small = job(2, tfjob(1, gpu=1))
    quotas = [quota({"requests.nvidia.com/gpu": 4}, {"requests.nvidia.com/gpu": 1})]
    result = plan(world([big_old, small], quotas=quotas, node_fit=False))
    assert result.admitted == ()
    assert result.pending[2].reason is Reason.RESERVED_FOR_OLDER_JOB
    assert result.pending[2].detail["reserved_for"] == 1
    assert plan(
        world([big_old, small], quotas=quotas, node_fit=False), get_policy("priority", reservation_after_s=None)
    ).admitted == (2,)


def test_fair_share_gives_scarce_capacity_to_the_namespace_using_least():
    heavy = RunningJob(70, "team-a", tfjob(1, gpu=6), NOW - 100)
    pending = [job(1, tfjob(1, gpu=1), namespace="team-a", priority=5), job(2, tfjob(1, gpu=1), namespace="team-b")]
    nodes = [node("n", cpu=64_000, gpu=8, allocated={"nvidia.com/gpu": 7})]
    snapshot = Snapshot(NOW, tuple(pending), running=(heavy,), nodes=tuple(nodes))
    assert plan(snapshot, "priority").admitted == (1,)
    assert plan(snapshot, "fair").admitted == (2,)


def test_fair_share_with_memory_gives_the_turn_to_the_namespace_that_used_least_lately():
    """issue 37: both run nothing now; team-a used 1,200 GPU-h lately and team-b 400: at
    equal weights team-a used 1.5 times its share, and waits, saying so."""
    pending = [job(1, tfjob(1, gpu=1), namespace="team-a", priority=5), job(2, tfjob(1, gpu=1), namespace="team-b")]
    nodes = [node("n", cpu=64_000, gpu=8, allocated={"nvidia.com/gpu": 7})]
    usage = {"team-a": 1200.0, "team-b": 400.0}
    snapshot = Snapshot(NOW, tuple(pending), nodes=tuple(nodes), usage=usage)
    assert plan(snapshot, "fair").admitted == (1,)  # (no memory: priority breaks the tie)
    remembering = get_policy("fair", usage_half_life_days=7.0)
    result = plan(snapshot, remembering)
    assert result.admitted == (2,)
    waiting = result.pending[1]
    assert waiting.message.endswith("; team-a used 1,200 GPU-h lately, 1.5 times its share")
    twice = Snapshot(NOW, tuple(pending), nodes=tuple(nodes), usage={"team-a": 1200.0, "team-b": 0.0})
    assert plan(twice, remembering).pending[1].message.endswith("used 1,200 GPU-h lately, twice its share")
    with pytest.raises(ValueError, match="usage_half_life_days"):
        get_policy("fair", usage_half_life_days=0)


def test_backing_off_jobs_wait_with_their_reason_and_eta_at_the_earliest_the_backoff_end():
    snapshot = world([job(1, tfjob(1), backoff_until=NOW + 300, attempts=2)], nodes=[node("n")])
    status = plan(snapshot).pending[1]
    assert status.reason is Reason.BACKING_OFF and "2 failed" in status.message
    assert status.eta == NOW + 300


def test_an_example_manifest_from_the_repo_is_planned_onto_the_gpu_pool(example_text):
    _, workload = parse_job(example_text("resnet-multi-gpu"))
    nodes = [
        node(
            f"gpu{i}",
            cpu=64_000,
            memory=512 * GI,
            gpu=8,
            labels={"pool": "gpu"},
            taints=(Taint("gpu", "true", "NoSchedule"),),
        )
        for i in range(2)
    ]
    result = plan(world([job(1, workload, namespace="team-b")], nodes=nodes))
    assert result.admitted == (1,)
    assert len(result.admissions[0].placement) == workload.pods
