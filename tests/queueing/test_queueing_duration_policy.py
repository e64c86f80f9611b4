"""``shortest``: shortest expected service first, from the caller's estimate; old jobs first."""

from hypothesis import given, settings
from hypothesis import strategies as st

from queueing import (
    POLICY_NAMES,
    NamespaceQuota,
    Node,
    PendingJob,
    PodSet,
    Policy,
    Snapshot,
    Workload,
    get_policy,
    plan,
)
from queueing.duration_policy import ShortestFirstPolicy
from tests.examples import examples

HOUR = 3600.0
NOW = 1_000_000.0


def tfjob(gpus: int, workers: int = 1, annotations: dict | None = None) -> Workload:
    worker = PodSet("Worker", workers, {"cpu": 1000, "memory": 2**30, "nvidia.com/gpu": gpus}, {"nvidia.com/gpu": gpus})
    return Workload("TFJob", "kubeflow.org/v1", "j", "team-a", (worker,), annotations=annotations or {})


def pending(
    job_id: int,
    *,
    gpus: int = 1,
    expected: float | None = None,
    waited: float = 60.0,
    namespace: str = "team-a",
    workers: int = 1,
    annotations: dict | None = None,
) -> PendingJob:
    return PendingJob(job_id, namespace, 0, NOW - waited, tfjob(gpus, workers, annotations), expected_duration=expected)


def ids(jobs) -> list[int]:
    return [job.id for job in jobs]


def test_registered_by_name():
    policy = get_policy("shortest", promote_after_s=7200)
    assert "shortest" in POLICY_NAMES and isinstance(policy, ShortestFirstPolicy) and isinstance(policy, Policy)
    assert policy.name == "shortest" and policy.promote_after_s == 7200
    assert policy.node_fit and not policy.strict and not policy.one_at_a_time and policy.uses_duration_estimate


def test_least_expected_gpu_time_first_ties_in_submission_order():
    jobs = [
        pending(1, gpus=1, expected=10 * HOUR, waited=500),  # 10 GPU-h
        pending(2, gpus=8, expected=HOUR, waited=400),  # 8 GPU-h
        pending(3, gpus=1, expected=HOUR, waited=300),  # 1 GPU-h
        pending(4, gpus=4, expected=15 * 60, waited=200),  # 1 GPU-h, submitted after 3
        pending(5, gpus=1, expected=60, waited=100),
    ]
    assert ids(ShortestFirstPolicy().order(jobs, NOW)) == [5, 3, 4, 2, 1]
    # By duration alone, the 8-GPU hour ties with the 1-GPU hour and goes by submission.
    assert ids(ShortestFirstPolicy(by_service=False).order(jobs, NOW)) == [5, 4, 2, 3, 1]


def test_without_an_estimate_the_annotation_then_the_default():
    jobs = [
        pending(1, expected=None, waited=300),  # unknown: 1 h by default
        pending(2, expected=None, waited=200, annotations={"jobdash.io/expected-duration": "30m"}),
        pending(3, expected=2 * HOUR, waited=100),
    ]
    assert ids(ShortestFirstPolicy().order(jobs, NOW)) == [2, 1, 3]
    assert ids(ShortestFirstPolicy(unknown_duration_s=3 * HOUR).order(jobs, NOW)) == [2, 3, 1]


def test_cpu_only_jobs_count_pods():
    cpu_only = PendingJob(
        1,
        "team-a",
        0,
        NOW - 10,
        Workload("TFJob", "kubeflow.org/v1", "c", "team-a", (PodSet("Worker", 4, {"cpu": 1000}),)),
        expected_duration=HOUR,
    )
    one_gpu = pending(2, gpus=1, expected=2 * HOUR, waited=5)
    assert ShortestFirstPolicy().expected_service(cpu_only) == 4 * HOUR
    assert ids(ShortestFirstPolicy().order([cpu_only, one_gpu], NOW)) == [2, 1]


def test_a_job_that_waited_long_enough_goes_first_oldest_first():
    policy = ShortestFirstPolicy(promote_after_s=6 * HOUR)
    jobs = [
        pending(1, gpus=32, workers=4, expected=50 * HOUR, waited=7 * HOUR),
        pending(2, gpus=8, expected=20 * HOUR, waited=6 * HOUR),  # exactly promote_after_s: promoted
        pending(3, gpus=1, expected=60, waited=10),
        pending(4, gpus=1, expected=600, waited=5 * HOUR),
    ]
    assert ids(policy.order(jobs, NOW)) == [1, 2, 3, 4]
    assert ids(policy.order(jobs, NOW - HOUR)) == [1, 3, 4, 2]  # an hour earlier only job 1 had waited 6 h


def test_plan_admits_the_short_job_the_quota_has_room_for():
    """8 GPUs of quota free: shortest admits the two short 4-GPU jobs, priority the long one first."""
    quota = {"team-a": NamespaceQuota("team-a", {"requests.nvidia.com/gpu": 8})}
    nodes = [Node("n0", {"cpu": 96000, "memory": 768 * 2**30, "nvidia.com/gpu": 8, "pods": 110})]
    jobs = [
        pending(1, gpus=8, expected=20 * HOUR, waited=300),
        pending(2, gpus=4, expected=600, waited=200),
        pending(3, gpus=4, expected=900, waited=100),
    ]
    snapshot = Snapshot(NOW, jobs, quotas=quota, nodes=nodes)
    assert plan(snapshot, "shortest").admitted == (2, 3)
    assert plan(snapshot, "priority").admitted == (1,)
    result = plan(snapshot, "shortest")
    assert result.pending[1].position == 1 and result.pending[1].reason == "QuotaExceeded"


jobs_strategy = st.lists(
    st.tuples(st.integers(1, 32), st.one_of(st.none(), st.floats(1, 1e6)), st.floats(0, 1e5)),
    min_size=0,
    max_size=25,
)


@settings(max_examples=examples(200), deadline=None)
@given(jobs_strategy, st.floats(0, 3e4), st.randoms(use_true_random=False))
def test_order_is_a_deterministic_permutation_promoted_first(rows, promote_after, rng):
    policy = ShortestFirstPolicy(promote_after_s=promote_after)
    jobs = [pending(i, gpus=g, expected=e, waited=w) for i, (g, e, w) in enumerate(rows)]
    ordered = policy.order(jobs, NOW)
    assert sorted(ids(ordered)) == sorted(ids(jobs))
    shuffled = list(jobs)
    rng.shuffle(shuffled)
    assert ids(policy.order(shuffled, NOW)) == ids(ordered)
    promoted = [job for job in ordered if NOW - job.submitted_at >= promote_after]
    assert ordered[: len(promoted)] == promoted
    assert [(j.submitted_at, j.id) for j in promoted] == sorted((j.submitted_at, j.id) for j in promoted)
    rest = ordered[len(promoted) :]
    keys = [(policy.expected_service(j), j.submitted_at, j.id) for j in rest]
    assert keys == sorted(keys)
