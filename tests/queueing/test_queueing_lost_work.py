"""Issue 48: what a victim loses, and victims chosen by it (lost_work.py, preemption.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from queueing import NamespaceQuota, Snapshot, get_policy, plan
from queueing.lost_work import gpu_seconds_lost, last_checkpoint, protected, seconds_lost
from queueing.preemption import RECLAIM, victim_order
from tests.queueing.test_queueing_elastic import GPU, NOW, gpu_nodes, pending, quotas, running

checkpoints = st.fixed_dictionaries(
    {
        "started": st.floats(0, 10_000),
        "every": st.one_of(st.none(), st.floats(1, 5_000)),
        "reported": st.one_of(st.none(), st.floats(-1_000, 20_000)),
        "on_notice": st.one_of(st.none(), st.floats(0, 600)),
        "ran": st.floats(0, 20_000),
        "gpus": st.integers(1, 8),
    }
)


def _job(c: dict, **more):
    return running(
        1,
        "a",
        ["n0"] * c["gpus"],
        started=c["started"],
        checkpoint_every_s=c["every"],
        checkpointed_at=c["reported"],
        checkpoint_on_notice_s=c["on_notice"],
        **more,
    )


@given(checkpoints)
def test_lost_work_is_the_run_since_the_last_checkpoint_reported_or_declared(c):
    job, now = _job(c), c["started"] + c["ran"]
    lost = seconds_lost(job, now)
    assert 0.0 <= lost <= c["ran"] + 1e-6
    assert gpu_seconds_lost(job, now) == lost * c["gpus"]
    if c["on_notice"] is not None:
        assert lost == 0.0  # it writes one when told: the notice is time, not work
        return
    last = last_checkpoint(job, now)
    if last is None:
        assert abs(lost - c["ran"]) < 1e-6  # never saved: the whole run
        return
    assert c["started"] <= last <= now and abs(lost - (now - last)) < 1e-6
    if c["every"] is not None:
        assert lost < c["every"] + 1e-6  # at most one period since the last declared checkpoint
    if c["reported"] is not None and c["started"] <= c["reported"] <= now:
        assert last >= c["reported"]


def test_a_checkpoint_reported_later_than_the_declared_ones_is_the_last():
    job = running(1, "a", ["n0"], started=0.0, checkpoint_every_s=600.0, checkpointed_at=900.0)
    assert last_checkpoint(job, 1000.0) == 900.0 and seconds_lost(job, 1000.0) == 100.0
    assert last_checkpoint(job, 1300.0) == 1200.0 and seconds_lost(job, 1300.0) == 100.0
    assert last_checkpoint(running(2, "a", ["n0"], started=0.0), 50.0) is None


def test_among_equals_the_victim_is_the_one_that_loses_least_not_the_newest():
    # Both borrowers of team-a hold 4 GPUs; 12 started later but never saved, 11 saved a minute ago.
    jobs = (
        running(10, "team-a", ["n0"] * 8),
        running(11, "team-a", ["n1"] * 4, borrowing=True, started=NOW - 7200, checkpointed_at=NOW - 60),
        running(12, "team-a", ["n1"] * 4, borrowing=True, started=NOW - 1800),
    )
    snapshot = Snapshot(
        NOW,
        (pending(1, "team-b", 4),),
        running=jobs,
        quotas=quotas({"team-a": 8, "team-b": 8}, 16, jobs),
        nodes=gpu_nodes(2, 8, jobs),
    )
    result = plan(snapshot, "priority")
    (preemption,) = result.preemptions
    assert (preemption.victim, preemption.cause) == (11, RECLAIM)
    assert preemption.lost_s == 60.0 and preemption.lost_gpu_s == 240.0 and preemption.checkpointed_at == NOW - 60
    # Blind to checkpoints (none reported) the newest goes, losing its whole half hour.
    blind = tuple(
        job if job.id != 11 else running(11, "team-a", ["n1"] * 4, borrowing=True, started=NOW - 7200) for job in jobs
    )
    (preemption,) = plan(
        Snapshot(NOW, snapshot.pending, running=blind, quotas=snapshot.quotas, nodes=snapshot.nodes), "priority"
    ).preemptions
    assert preemption.victim == 12 and preemption.lost_gpu_s == 4 * 1800.0


def test_a_job_inside_its_minimum_run_time_is_no_victim_even_when_it_is_the_only_one():
    jobs = (running(10, "team-a", ["n0"] * 8, priority=0, started=NOW - 100, min_runtime_s=600.0),)
    world = dict(
        running=jobs, quotas={"team-a": NamespaceQuota("team-a", {GPU: 8}, {GPU: 8})}, nodes=gpu_nodes(1, 8, jobs)
    )
    urgent = (pending(1, "team-a", 8, priority=5),)
    policy = get_policy("priority", preempt_lower_priority=True)
    assert protected(jobs[0], NOW) and plan(Snapshot(NOW, urgent, **world), policy).preemptions == ()
    later = plan(Snapshot(NOW + 500, urgent, **world), policy)
    assert not protected(jobs[0], NOW + 500) and [p.victim for p in later.preemptions] == [10]


def test_a_job_that_checkpoints_on_notice_goes_before_one_that_would_lose_a_minute():
    on_notice = running(1, "a", ["n0"] * 8, started=NOW - 86400, checkpoint_on_notice_s=30.0)
    fresh = running(2, "a", ["n0"], started=NOW - 60)
    assert [job.id for job in victim_order([fresh, on_notice], NOW)] == [1, 2]
    # Priority still comes first.
    higher = running(3, "a", ["n0"], priority=1, started=NOW - 60, checkpoint_on_notice_s=30.0)
    assert [job.id for job in victim_order([higher, fresh], NOW)] == [2, 3]
