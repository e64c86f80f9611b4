"""Elastic jobs in the trace replay (issue 35, bench/replay/elastic_jobs.py).

``elastic=1.0`` makes every multi-GPU job of these tiny traces an elastic PyTorchJob: one
1-GPU Worker per GPU, minimum half of them, maximum all.  VC "a" has one 8-GPU node; with
``lent=1.0`` one more (night-0) is lent from 22:00 to 08:00 UTC, and the replay starts at
T0 = 2017-10-01 00:00 UTC, inside the night: the pool goes back at T0 + 8 h.
"""

import pytest

from bench.replay.elastic_jobs import picked
from bench.replay.engine import Replay, ReplayConfig
from bench.replay.records import run_label
from bench.replay.trace import TraceJob, parse_time

T0 = parse_time("2017-10-01")
HOUR = 3600.0
CHECKPOINT = 1800.0  # kubesim's default, the replay's: work kept when a gang breaks


def replay(jobs: list[TraceJob], **options) -> Replay:
    run = Replay(jobs, {"a": 1}, ReplayConfig(policy="priority", elastic=1.0, **options), start=T0)
    run.run()
    return run


def record(run: Replay, job_id: int):
    return next(rec for rec in run.all_records if rec.job.id == job_id)


def test_an_elastic_job_starts_at_its_minimum_when_only_that_fits_and_grows_when_room_frees():
    # A 4-GPU job holds half the node for 2 h; the 8-GPU elastic job (4 h at 8 Workers) fits only at 4.
    run = replay([TraceJob(2, T0, 2 * HOUR, 4, "a"), TraceJob(1, T0 + 10, 4 * HOUR, 8, "a")])
    job, blocker = record(run, 1), record(run, 2)
    assert job.elastic and job.admitted == 4 and run.stats["elastic_partial_admissions"] == 1
    assert job.started_at == pytest.approx(T0 + 11, abs=2)
    # Once the 4-GPU job ends, it grows to its maximum, through its operator.
    assert run.stats["elastic_grows"] == 1 and run.grown_jobs == {1} and job.gang == 8
    # Work = 4 h x 8 Workers.  At 4 Workers until the blocker ends, the work up to the last
    # checkpoint kept when the new Workers join (its gang restarts), the rest at 8.
    ran = blocker.finished_at - job.started_at
    kept = (ran // CHECKPOINT) * CHECKPOINT * 4
    expected = blocker.finished_at + (4 * HOUR * 8 - kept) / 8
    assert job.finished_at == pytest.approx(expected, abs=5)
    assert 4 * HOUR < job.finished_at - job.started_at < 8 * HOUR
    # What growth ran: 4 Workers above the 4 admitted, from the growth to the end.
    assert run.stats["elastic_grown_gpu_s"] == pytest.approx(4 * (job.finished_at - blocker.finished_at), abs=20)
    assert run.stats["elastic_restart_lost_gpu_s"] == pytest.approx((ran - ran // CHECKPOINT * CHECKPOINT) * 4, abs=10)
    assert job.preemptions == 0


def test_a_job_at_its_minimum_throughout_runs_proportionally_longer():
    run = replay([TraceJob(2, T0, 10 * HOUR, 4, "a"), TraceJob(1, T0 + 10, HOUR, 8, "a")])
    job = record(run, 1)
    assert job.admitted == 4 and not run.grown_jobs
    assert job.finished_at - job.started_at == pytest.approx(2 * HOUR, abs=2)


def test_extras_grown_onto_a_lent_pool_are_given_back_at_the_reclaim_and_the_job_runs_on():
    # 16 GPUs (8 to 16 Workers) for 20 h: no run of a's on record, so no bound: only its
    # minimum goes on the day node, and its extras grow onto the night pool (they need no bound).
    run = replay([TraceJob(1, T0 + 60, 20 * HOUR, 16, "a")], lent=1.0)
    job = record(run, 1)
    assert job.admitted == 8 and run.stats["elastic_grows"] >= 1
    assert run.stats["elastic_lent_extra_gpu_s"] > 0
    # At 08:00 the Workers on the pool go back: the job is shrunk, not killed, and finishes.
    assert run.stats["reclaim_shrinks"] >= 1 and run.reclaim_shrunk == {1} and run.stats["reclaim_shrunk_jobs"] == 1
    assert run.stats["reclaim_kills"] == 0 and not run.reclaim_killed and job.preemptions == 0
    assert job.finished_at is not None
    # Its work (20 h x 16) was done faster than at its minimum (40 h), slower than at its maximum.
    assert 20 * HOUR < job.finished_at - job.started_at < 40 * HOUR


def test_a_job_whose_lent_workers_are_not_its_extras_is_preempted_at_the_reclaim():
    """The blind planner puts the job's first Workers on the pool: giving them back would not
    leave its highest-numbered ones, so it is preempted whole (dispatch/reclaim.extras_on)."""
    run = replay([TraceJob(1, T0 + 60, 20 * HOUR, 16, "a")], lent=1.0, tide_blind=True)
    job = record(run, 1)
    assert run.stats["reclaim_shrinks"] == 0 and run.reclaim_killed == {1} and job.preemptions == 1
    assert job.finished_at is not None


def test_the_same_jobs_are_elastic_in_every_replay_and_runs_are_labelled():
    share = sum(picked(job_id, 0.3) for job_id in range(10_000)) / 10_000
    assert 0.28 < share < 0.32
    assert [picked(job_id, 0.3) for job_id in range(50)] == [picked(job_id, 0.3) for job_id in range(50)]
    assert not any(picked(job_id, 0.0) for job_id in range(100)) and all(picked(j, 1.0) for j in range(100))
    assert run_label("priority", factor=3, lent=0.3, elastic=0.3) == "priority+lent0.3+elastic0.3@x3"
    # A 1-GPU job is never elastic: there is nothing to shrink.
    run = replay([TraceJob(1, T0, HOUR, 1, "a")])
    assert not record(run, 1).elastic and run.stats["elastic_jobs"] == 0
    with pytest.raises(ValueError, match="elastic"):
        ReplayConfig(policy="priority", elastic=1.5)
    with pytest.raises(ValueError, match="elastic jobs are replayed with fixed or borrowing quotas only"):
        ReplayConfig(policy="priority", elastic=0.3, quota="elastic")
