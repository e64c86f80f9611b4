"""Lent capacity (queueing/tide.py): a job is placed on a lent pool only if it will be done
by the reclaim (its 90 % bound) or checkpoints, and nothing new starts there in the notice
window; a job kept off a pool that it would fit with says why, in the pool's time zone."""

from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queueing import (
    CHECKPOINTS_ANNOTATION,
    LentPool,
    NamespaceQuota,
    Node,
    PendingJob,
    PodSet,
    Reason,
    RunningJob,
    Snapshot,
    Workload,
    clock_words,
    get_policy,
    plan,
)
from queueing.tide import may_use
from queueing.topology import REQUIRED_ANNOTATION
from tests.examples import examples

GI = 2**30
BERLIN = "Europe/Berlin"
RACK = "topology.jobdash.io/rack"


def berlin(day: int, hour: int, minute: int = 0) -> float:
    return datetime(2026, 11, day, hour, minute, tzinfo=ZoneInfo(BERLIN)).timestamp()


NOW = berlin(27, 23)  # 23:00 in Berlin; the night pool goes back at 08:00
RECLAIM = berlin(28, 8)
HOUR = 3600.0


def gpu_job(job_id, *, bound=None, checkpoints=None, gpus=8, workers=1, priority=0, annotations=None):
    annotations = dict(annotations or {})
    if checkpoints is not None:
        annotations[CHECKPOINTS_ANNOTATION] = checkpoints
    workload = Workload(
        "TFJob",
        "kubeflow.org/v1",
        f"j{job_id}",
        None,
        (PodSet("Worker", workers, {"cpu": 1000 * gpus, "memory": 8 * GI * gpus, "nvidia.com/gpu": gpus}),),
        annotations=annotations,
    )
    return PendingJob(job_id, "team-a", priority, NOW - 100 + job_id, workload, bound=bound)


def gpu_node(name, *, used=0, labels=None):
    allocated = {"nvidia.com/gpu": used, "cpu": 1000 * used, "memory": 8 * GI * used}
    return Node(name, {"cpu": 64_000, "memory": 512 * GI, "nvidia.com/gpu": 8, "pods": 110}, allocated, labels or {})


def night(nodes=("night-1",), reclaim_at=RECLAIM, notice_s=1800.0, name="night-a"):
    return LentPool(name, frozenset(nodes), reclaim_at, notice_s, BERLIN)


def decide(pending, nodes, pools, now=NOW, **kwargs):
    return plan(Snapshot(now, tuple(pending), nodes=tuple(nodes), lent=tuple(pools), **kwargs))


def nodes_of(result, job_id):
    admission = next(a for a in result.admissions if a.job_id == job_id)
    return {node for _, _, node in admission.placement}


# -- examples ----------------------------------------------------------------------------


def test_a_short_job_is_placed_on_the_lent_pool():
    result = decide([gpu_job(1, bound=2 * HOUR)], [gpu_node("night-1")], [night()])
    assert nodes_of(result, 1) == {"night-1"}


def test_a_job_ending_exactly_at_the_reclaim_may_use_the_pool():
    result = decide([gpu_job(1, bound=RECLAIM - NOW)], [gpu_node("night-1")], [night()])
    assert result.admitted == (1,)


def test_a_long_job_is_kept_off_with_the_reclaim_time_in_the_pools_zone():
    result = decide([gpu_job(1, bound=10 * HOUR)], [gpu_node("night-1")], [night()])
    status = result.pending[1]
    assert status.reason is Reason.OUTLASTS_LENT_POOL
    assert status.message == "would run past 08:00, when node-pool night-a is reclaimed"
    assert (status.detail["pool"], status.detail["reclaim_at"], status.detail["bound"]) == ("night-a", RECLAIM, 36000)


def test_a_long_job_goes_to_a_node_of_its_own_rather_than_the_tighter_lent_one():
    # Best fit would take the half-used lent node; the long job may not.
    nodes = [gpu_node("day-1"), gpu_node("night-1", used=4)]
    result = decide([gpu_job(1, bound=10 * HOUR, gpus=2), gpu_job(2, bound=HOUR, gpus=4)], nodes, [night()])
    assert nodes_of(result, 1) == {"day-1"}
    assert nodes_of(result, 2) == {"night-1"}


def test_a_job_without_prediction_is_kept_off_unless_it_checkpoints():
    nodes, pools = [gpu_node("night-1")], [night()]
    unknown = decide([gpu_job(1)], nodes, pools).pending[1]
    assert unknown.reason is Reason.OUTLASTS_LENT_POOL
    assert unknown.message == (
        "has no run-time prediction, so it is not placed on node-pool night-a (reclaimed at 08:00) unless it checkpoints"
    )
    assert decide([gpu_job(1, checkpoints="true")], nodes, pools).admitted == (1,)
    # Only "true" says it checkpoints.
    for words in ("yes", "True", "false", ""):
        assert decide([gpu_job(1, checkpoints=words)], nodes, pools).pending[1].reason is Reason.OUTLASTS_LENT_POOL


def test_a_checkpointing_job_is_placed_though_its_bound_runs_past_the_reclaim():
    result = decide([gpu_job(1, bound=30 * HOUR, checkpoints="true")], [gpu_node("night-1")], [night()])
    assert nodes_of(result, 1) == {"night-1"}


def test_the_api_s_checkpoint_on_notice_counts_as_its_annotation_does():
    said = replace(gpu_job(1, bound=30 * HOUR), checkpoints_on_notice=True)
    assert said.checkpoints and decide([said], [gpu_node("night-1")], [night()]).admitted == (1,)
    assert decide([gpu_job(1, bound=30 * HOUR)], [gpu_node("night-1")], [night()]).admitted == ()


def test_inside_the_notice_window_nothing_new_starts_even_a_one_second_checkpointing_job():
    late = berlin(28, 7, 45)
    pending = [gpu_job(1, bound=1.0), gpu_job(2, bound=1.0, checkpoints="true")]
    result = decide(pending, [gpu_node("night-1")], [night()], now=late)
    assert result.admitted == ()
    for job_id in (1, 2):
        status = result.pending[job_id]
        assert status.reason is Reason.OUTLASTS_LENT_POOL
        assert status.message == "node-pool night-a is reclaimed at 08:00: nothing new starts there in its last 30 min"
    # Just before the window opens, it still starts.
    assert decide(pending[:1], [gpu_node("night-1")], [night()], now=RECLAIM - 1800.0 - 1.0).admitted == (1,)


def test_a_job_that_would_not_fit_even_with_the_lent_nodes_gets_the_usual_reason():
    result = decide([gpu_job(1, bound=10 * HOUR, workers=3)], [gpu_node("day-1"), gpu_node("night-1")], [night()])
    assert result.pending[1].reason is Reason.NO_NODE_FITS


def test_a_required_rack_is_narrowed_to_the_nodes_the_job_may_use():
    # Rack r1: one day node and one lent node; rack r2: two day nodes, one of them busy.
    nodes = [
        gpu_node("day-1", labels={RACK: "r1"}),
        gpu_node("night-1", labels={RACK: "r1"}),
        gpu_node("day-2", labels={RACK: "r2"}),
        gpu_node("day-3", used=8, labels={RACK: "r2"}),
    ]
    two = {REQUIRED_ANNOTATION: RACK}
    long = gpu_job(1, bound=10 * HOUR, workers=2, annotations=two)
    short = gpu_job(2, bound=HOUR, workers=2, annotations=two)
    kept = decide([long], nodes, [night()]).pending[1]
    assert kept.reason is Reason.OUTLASTS_LENT_POOL and kept.detail["pool"] == "night-a"
    assert nodes_of(decide([short], nodes, [night()]), 2) == {"day-1", "night-1"}
    # With room for two pods on day nodes of one rack, the long job takes them.
    freed = [replace(node, allocated={}) if node.name == "day-3" else node for node in nodes]
    assert nodes_of(decide([long], freed, [night()]), 1) == {"day-2", "day-3"}


def test_a_barred_job_preempts_only_to_run_on_nodes_it_may_use():
    # A low-priority job on the lent node and one on the day node: the urgent long job may
    # only take the day node's.
    nodes = [gpu_node("day-1", used=8), gpu_node("night-1", used=8)]
    running = tuple(
        RunningJob(
            10 + index,
            "team-a",
            gpu_job(10 + index).workload,
            NOW - 600 - index,
            priority=0,
            placements=(("Worker", 0, node),),
        )
        for index, node in enumerate(["night-1", "day-1"])
    )
    policy = get_policy("priority", preempt_lower_priority=True)
    urgent = gpu_job(1, bound=10 * HOUR, priority=5)
    result = plan(Snapshot(NOW, (urgent,), running=running, nodes=tuple(nodes), lent=(night(),)), policy)
    assert [p.victim for p in result.preemptions] == [11]  # the day node's, though the other started later
    assert result.pending[1].reason is Reason.PREEMPTING


def test_the_reclaim_time_carries_its_date_when_it_is_more_than_a_day_away():
    assert clock_words(RECLAIM, BERLIN, NOW) == "08:00"
    assert clock_words(RECLAIM, "UTC", NOW) == "07:00"
    assert clock_words(berlin(29, 8), BERLIN, NOW) == "Nov 29 08:00"
    far = night(reclaim_at=berlin(29, 8))
    status = decide([gpu_job(1, bound=40 * HOUR)], [gpu_node("night-1")], [far]).pending[1]
    assert status.message == "would run past Nov 29 08:00, when node-pool night-a is reclaimed"


def test_pools_and_snapshots_refuse_bad_input():
    with pytest.raises(ValueError, match="notice_s"):
        night(notice_s=-1)
    with pytest.raises(ValueError, match="timezone"):
        LentPool("night-a", frozenset(), RECLAIM, 0, "Mars/Olympus")
    with pytest.raises(ValueError, match="lent pool names"):
        Snapshot(NOW, (), lent=(night(), night(nodes=("night-2",))))


def test_a_pool_whose_nodes_are_not_in_the_snapshot_bars_nothing():
    result = decide([gpu_job(1)], [gpu_node("day-1")], [night(nodes=("gone",))])
    assert nodes_of(result, 1) == {"day-1"}


# -- properties --------------------------------------------------------------------------

NAMES = ("n0", "n1", "n2", "n3", "n4")
SETTINGS = settings(max_examples=examples(150), deadline=None)


@st.composite
def worlds(draw):
    nodes = tuple(
        Node(
            name,
            {"cpu": 8000, "nvidia.com/gpu": draw(st.integers(2, 4)), "pods": 110},
            {"nvidia.com/gpu": draw(st.integers(0, 1))},
            {RACK: draw(st.sampled_from("ab"))},
        )
        for name in NAMES[: draw(st.integers(1, len(NAMES)))]
    )
    pools = []
    free_names = list(NAMES)
    for index in range(draw(st.integers(1, 2))):
        members = draw(st.sets(st.sampled_from(free_names), min_size=1, max_size=3)) if free_names else set()
        free_names = [name for name in free_names if name not in members]
        reclaim_in = draw(st.floats(-600, 12 * HOUR))
        pools.append(
            LentPool(f"pool-{index}", frozenset(members), NOW + reclaim_in, draw(st.sampled_from([0, 600, 1800])))
        )
    pending = []
    for job_id in range(1, draw(st.integers(1, 6)) + 1):
        annotations = {}
        if draw(st.booleans()):
            annotations[CHECKPOINTS_ANNOTATION] = draw(st.sampled_from(["true", "false", "maybe"]))
        if draw(st.integers(0, 4)) == 0:
            annotations[REQUIRED_ANNOTATION] = RACK
        workload = Workload(
            "TFJob",
            "kubeflow.org/v1",
            f"j{job_id}",
            None,
            (PodSet("Worker", draw(st.integers(1, 3)), {"cpu": 1000, "nvidia.com/gpu": draw(st.integers(1, 2))}),),
            annotations=annotations,
        )
        bound = draw(st.none() | st.floats(1, 16 * HOUR))
        pending.append(
            PendingJob(job_id, draw(st.sampled_from(["team-a", "team-b"])), 0, NOW - job_id, workload, bound=bound)
        )
    quotas = {"team-b": NamespaceQuota("team-b", {"requests.nvidia.com/gpu": draw(st.integers(2, 12))})}
    return Snapshot(NOW, tuple(pending), nodes=nodes, lent=tuple(pools), quotas=quotas, topology_levels=(RACK,))


def _may_use(pool: LentPool, job: PendingJob) -> bool:
    """The contract's rule, written out again here."""
    checkpoints = job.workload.annotations.get(CHECKPOINTS_ANNOTATION) == "true"
    open_now = NOW < pool.reclaim_at - pool.notice_s
    return open_now and (checkpoints or (job.bound is not None and NOW + job.bound <= pool.reclaim_at))


@SETTINGS
@given(worlds())
def test_nothing_is_admitted_onto_a_pool_it_may_not_use(snapshot):
    result = plan(snapshot)
    jobs = {job.id: job for job in snapshot.pending}
    for admission in result.admissions:
        job = jobs[admission.job_id]
        for _, _, node in admission.placement:
            for pool in snapshot.lent:
                if node in pool.nodes:
                    assert NOW < pool.reclaim_at - pool.notice_s  # never inside the notice window
                    assert _may_use(pool, job)


@SETTINGS
@given(worlds())
def test_a_job_kept_off_a_lent_pool_would_have_fit_without_it(snapshot):
    result = plan(snapshot)
    for job in snapshot.pending:
        status = result.pending.get(job.id)
        if status is None or status.reason is not Reason.OUTLASTS_LENT_POOL:
            continue
        assert not _may_use(next(p for p in snapshot.lent if p.name == status.detail["pool"]), job)
        alone = replace(snapshot, pending=(job,), lent=())
        assert plan(alone).admitted == (job.id,)


@SETTINGS
@given(worlds())
def test_pools_that_bar_no_job_change_nothing(snapshot):
    # Every job checkpoints, and every pool is open: the same plan as with no pools at all.
    opened = tuple(replace(pool, reclaim_at=NOW + 30 * HOUR) for pool in snapshot.lent)
    pending = tuple(
        replace(
            job,
            workload=replace(job.workload, annotations={**job.workload.annotations, CHECKPOINTS_ANNOTATION: "true"}),
        )
        for job in snapshot.pending
    )
    with_pools = plan(replace(snapshot, pending=pending, lent=opened))
    without = plan(replace(snapshot, pending=pending, lent=()))
    assert with_pools.admissions == without.admissions
    assert with_pools.pending == without.pending


def test_a_job_whose_tail_nobody_can_bound_yet_is_kept_off_and_told_why():
    """An infinite bound: its key has too few runs for a 99 % tail (run_tails.py)."""
    import math

    result = decide([gpu_job(1, bound=math.inf)], [gpu_node("night-1")], [night()])
    status = result.pending[1]
    assert status.reason is Reason.OUTLASTS_LENT_POOL
    assert (
        status.message
        == "too few runs like it on record to be sure it ends by 08:00, when node-pool night-a is reclaimed"
    )


def test_a_job_that_checkpoints_on_notice_counts_as_losing_nothing_to_a_reclaim():
    """(issue 48) No tail bound at all, yet it may use the pool: it writes a checkpoint when told."""
    told = gpu_job(1, annotations={"jobdash.io/checkpoint-on-notice": "2m"})
    blind = gpu_job(2)
    assert told.checkpoints and not blind.checkpoints
    pool = LentPool("night", frozenset({"n1"}), RECLAIM, 1800.0, BERLIN)
    assert may_use(pool, NOW, told.bound, told.checkpoints) is None
    assert may_use(pool, NOW, blind.bound, blind.checkpoints) == "unpredicted"
