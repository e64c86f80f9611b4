"""Workflow holds in the planner (queueing/holds.py): a job waits for its dependencies with the
reason naming them, an array never has more than its limit admitted, and a dependent's likely
start is when its dependencies are likely to end (a chain adds up)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from queueing import Node, PendingJob, PodSet, Reason, RunningJob, Snapshot, Workload, plan
from queueing.holds import Dependencies, GroupLimit
from tests.examples import examples

NOW = 1_800_000_000.0
GI = 2**30


def job(job_id, *, after=None, group=None, gpus=1, duration=600.0):
    workload = Workload(
        "TFJob", "kubeflow.org/v1", f"j{job_id}", None, (PodSet("Worker", 1, {"cpu": 1000, "nvidia.com/gpu": gpus}),)
    )
    return PendingJob(
        job_id, "team-a", 0, NOW - 1000 + job_id, workload, expected_duration=duration, after=after, group=group
    )


def node(name="n1", gpus=8):
    return Node(name, {"cpu": 64_000, "memory": 512 * GI, "nvidia.com/gpu": gpus, "pods": 110}, {}, {})


def decide(pending, nodes=None, running=(), groups=None):
    nodes = (node(),) if nodes is None else tuple(nodes)
    return plan(Snapshot(NOW, tuple(pending), (), tuple(running), nodes=nodes, groups=groups or {}))


def test_a_dependent_waits_with_the_reason_naming_its_dependencies():
    after = Dependencies(waiting=((1, "train", "ok"), (2, "prep", "any")))
    result = decide([job(1), job(3, after=after)])
    assert result.admitted == (1,)
    status = result.pending[3]
    assert status.reason is Reason.WAITING_FOR_DEPENDENCY
    assert status.message == "waits for train (#1) to succeed; prep (#2) to end"


def test_a_dependency_never_to_be_met_holds_a_kept_job_and_says_why():
    after = Dependencies(never=((1, "train", "ok", "Failed"),))
    status = decide([job(3, after=after)]).pending[3]
    assert status.reason is Reason.DEPENDENCY_NEVER_SATISFIED
    assert status.message.startswith("train (#1) failed: it was to succeed")
    assert status.eta is None


def test_met_dependencies_hold_nothing():
    assert decide([job(3, after=Dependencies())]).admitted == (3,)


def test_an_array_admits_up_to_its_limit_counting_those_already_admitted():
    jobs = [job(i, group=7) for i in range(1, 11)]
    result = decide(jobs, groups={7: GroupLimit("sweep", 5, admitted=2)})
    assert len(result.admitted) == 3
    held = [s for s in result.pending.values() if s.reason is Reason.ARRAY_CONCURRENCY_LIMIT]
    assert len(held) == 7
    assert held[0].message == "array sweep (#7) runs 5 jobs at once, its limit"


def test_a_chain_starts_when_its_dependencies_are_likely_to_end():
    """preprocess (running, ends in 10 min) -> train (1 h) -> evaluate."""
    prep = RunningJob(
        1,
        "team-a",
        job(1).workload,
        started_at=NOW - 600,
        expected_end=NOW + 600,
    )
    train = job(2, after=Dependencies(waiting=((1, "prep", "ok"),)), duration=3600.0)
    evaluate = job(3, after=Dependencies(waiting=((2, "train", "ok"),)))
    result = decide([train, evaluate], running=[prep])
    assert result.pending[2].eta == NOW + 600
    assert result.pending[3].eta == NOW + 600 + 3600


@settings(max_examples=examples(100), deadline=None)
@given(
    limit=st.integers(1, 6),
    admitted=st.integers(0, 6),
    size=st.integers(1, 12),
    nodes=st.integers(1, 3),
)
def test_an_array_never_has_more_than_its_limit_admitted(limit, admitted, size, nodes):
    admitted = min(admitted, limit)
    jobs = [job(i, group=9) for i in range(1, size + 1)]
    result = decide(jobs, nodes=[node(f"n{i}") for i in range(nodes)], groups={9: GroupLimit("a", limit, admitted)})
    assert admitted + len(result.admitted) <= limit
    # (and it admits up to the limit when the nodes have room: 8 one-GPU jobs per node)
    assert len(result.admitted) == min(limit - admitted, size, 8 * nodes)


def test_a_namespace_past_its_budget_waits_or_takes_what_is_left_as_borrowing():
    """issue 37: team-a used 1,050 of 1,000 GPU-h this month."""
    from queueing.holds import Budget

    def team(job_id, namespace):
        one = job(job_id, gpus=4)
        return PendingJob(one.id, namespace, 0, one.submitted_at, one.workload, expected_duration=600.0)

    pending = [team(1, "team-a"), team(2, "team-b"), team(3, "team-b")]
    over = {"team-a": Budget(1050.0, 1000.0, "wait")}
    result = plan(Snapshot(NOW, tuple(pending), nodes=(node(),), budgets=over))
    assert set(result.admitted) == {2, 3}
    assert result.pending[1].reason is Reason.OVER_BUDGET
    assert result.pending[1].message.startswith("team-a used 1,050 of its 1,000 GPU-h budget this month")
    # "borrow": it is admitted after everyone else (it comes first in the queue order), as borrowing
    borrow = {"team-a": Budget(1050.0, 1000.0, "borrow")}
    result = plan(Snapshot(NOW, tuple(pending), nodes=(node(),), budgets=borrow))
    assert set(result.admitted) == {2, 3}  # 8 GPUs: team-b's two jobs first
    roomy = plan(Snapshot(NOW, tuple(pending), nodes=(node(), node("n2")), budgets=borrow))
    admitted = {a.job_id: a.borrowing for a in roomy.admissions}
    assert admitted == {1: True, 2: False, 3: False}
