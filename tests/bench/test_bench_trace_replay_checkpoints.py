"""Jobs that checkpoint and jobs that never do in the replay (issue 48, bench/replay/checkpoints.py).

The cluster of test_bench_trace_replay.py: VCs "a" and "b" with one node of 8 GPUs each,
the kubelet starts a pod 1 s after it is bound; times are seconds after T0 (2017-10-01
00:00 UTC).  ``checkpointing=0.5`` picks, by the hash ``--elastic`` picks by, the jobs 1,
5, 7, 9, 14, ... (among 1..15): those checkpoint every 1800 s of a run, the others never.
"""

import json

import pytest

from bench.replay.elastic_jobs import picked
from bench.replay.engine import Replay, ReplayConfig
from bench.replay.metrics import json_line, summarize
from bench.replay.records import run_label
from bench.replay.trace import TraceJob, parse_time
from kubesim.kubeflow import CHECKPOINT_ANNOTATION, CHECKPOINTED_AT_ANNOTATION
from kubesim.resources import TFJOBS
from queueing import PendingJob

T0 = parse_time("2017-10-01")
HOUR = 3600.0
TWO_VCS = {"a": 1, "b": 1}
CHECKPOINTING = {1, 5, 7, 9, 14}  # (among 1..15, at a share of 0.5)


def job(job_id: int, at: float, vc: str, gpus: int, duration: float) -> TraceJob:
    return TraceJob(job_id, T0 + at, duration, gpus, vc)


def replayed(jobs, vc_nodes=TWO_VCS, learned=(), **options) -> Replay:
    """The replay, run; its result is ``replay.result``."""
    config = ReplayConfig("priority", **options)
    replay = Replay(sorted(jobs, key=lambda j: (j.submit, j.id)), vc_nodes, config, T0, learned=learned)
    replay.stops = []  # (job, when, the run's start, preemptor) of every stop
    suspend = replay._suspend

    def noted(rec, now, preemptor):
        replay.stops.append((rec.job.id, now, rec.run_started_at, preemptor))
        suspend(rec, now, preemptor)

    replay._suspend = noted
    replay.result = replay.run()
    return replay


def records(replay: Replay) -> dict[int, object]:
    return {rec.job.id: rec for rec in replay.all_records}


def test_the_share_picks_its_jobs_by_the_hash_and_only_they_checkpoint_and_declare_it():
    assert {i for i in range(1, 16) if picked(i, 0.5)} == CHECKPOINTING
    jobs = [job(i, 10 * i, "a", 1, 100) for i in range(1, 9)]
    for blind in (False, True):
        replay = replayed(jobs, checkpointing=0.5, checkpoint_every_s=60, checkpoint_blind=blind)
        recs = records(replay)
        assert replay.stats["checkpointing_jobs"] == 3
        for job_id, rec in recs.items():
            ours = job_id in {1, 5, 7}
            assert rec.checkpoint_s == (60 if ours else 0)
            # What kubesim was told on the object, and what it wrote back: one checkpoint at 60 s of 100.
            obj = replay.cluster.store.find(TFJOBS, "a", f"job-{job_id}")
            annotations = obj["metadata"]["annotations"]
            assert annotations[CHECKPOINT_ANNOTATION] == ("60" if ours else "0")
            assert (CHECKPOINTED_AT_ANNOTATION in annotations) is ours
            assert (rec.checkpointed_at == int(rec.started_at + 60)) if ours else rec.checkpointed_at is None
            # What the planner is told: the interval, and that it may run on lent nodes.
            declared = ours and not blind
            assert rec.declared_every_s == (60 if declared else None)
            assert PendingJob(job_id, "a", 0, 0.0, rec.workload).checkpoints is declared
        assert replay.stats["checkpoints_seen"] == 3
    # Without the flag nothing is set: kubesim's default interval, nothing reported.
    plain = replayed(jobs)
    obj = plain.cluster.store.find(TFJOBS, "a", "job-1")
    assert CHECKPOINT_ANNOTATION not in obj["metadata"]["annotations"]
    assert all(rec.checkpoint_s is None and rec.checkpointed_at is None for rec in plain.all_records)


@pytest.mark.parametrize(("borrower", "lost"), [(5, 4_049 - 3_600), (2, 4_049)])
def test_a_checkpointing_victim_loses_at_most_its_interval_and_one_that_never_does_its_run(borrower, lost):
    """j4 fills a's node, the borrower (from 10 s, on b's node since 11) is preempted for b's
    j3 at 4000 and suspended after its 60 s grace, at 4060: it ran 4049 s.  j5 checkpoints
    every 1800 s and keeps 3600 s of it; j2 never checkpoints and keeps nothing."""
    jobs = [job(4, 0, "a", 8, 10_000), job(borrower, 10, "a", 8, 10_000), job(3, 4_000, "b", 8, 1_000)]
    replay = replayed(jobs, quota="elastic", checkpointing=0.5)
    victim = records(replay)[borrower]
    assert victim.preemptions == 1 and victim.lost_s == lost and victim.lost_reclaim_s == 0
    assert victim.run_s == 10_000 + lost  # (its work done once, and what was lost)
    if borrower in CHECKPOINTING:
        assert victim.lost_s <= 1_800
    summary = summarize(replay.result)
    line = json_line(summary)
    assert line["lost_gpu_hours"] == line["preempted_gpu_hours"] == round(8 * lost / 3600, 1)
    assert line["lost_gpu_hours_by_cause"] == {"preemption": round(8 * lost / 3600, 1), "reclaim": 0.0, "move": 0.0}
    # The 8-GPU jobs' longest queueing: the victim's first wait (1 s) and its wait once
    # suspended (4060 -> 5063, after j3), 1004 s in all.
    assert line["max_wait_8gpu_s"] == 1_004 and line["max_wait_1gpu_s"] == 0
    assert summary["lost_gpu_s_by_cause"] == {"preemption": 8 * lost, "reclaim": 0.0, "move": 0.0}


def test_declared_and_blind_choose_different_victims():
    """j2 fills a's node; two borrowers of b's node, j5 (checkpoints) since 1 and j4 (never)
    since 1501; b's j3 wants half of it at 1810.  Blind, the planner takes the one that ran
    least, j4, which loses its whole run (1501 -> 1870); told, it takes j5, 9 s past its
    checkpoint at 1801, which loses 69 s."""
    jobs = [job(2, 0, "a", 8, 10_000), job(5, 0, "a", 4, 5_000), job(4, 1_500, "a", 4, 5_000)]
    jobs += [job(3, 1_810, "b", 4, 1_000)]
    victims = {}
    for blind in (False, True):
        recs = records(replayed(jobs, quota="elastic", checkpointing=0.5, checkpoint_blind=blind))
        victims[blind] = {job_id: rec.lost_s for job_id, rec in recs.items() if rec.preemptions}
    assert victims == {False: {5: 69.0}, True: {4: 369.0}}


def test_a_victim_that_checkpoints_in_its_notice_leaves_then_when_declared_and_not_when_blind():
    """A grace of 600 s.  j5 borrows b's node from 11; b's j3 arrives at 1500 and j5 is told
    to leave by 2100.  It writes a checkpoint at 1811: told, it leaves then, losing nothing,
    and j3 starts at 1813; blind, it runs on to 2100, losing 289 s, and j3 starts at 2101."""
    jobs = [job(4, 0, "a", 8, 10_000), job(5, 10, "a", 8, 10_000), job(3, 1_500, "b", 8, 1_000)]
    seen = {}
    for blind in (False, True):
        replay = replayed(jobs, quota="elastic", grace_s=600, checkpointing=0.5, checkpoint_blind=blind)
        recs = records(replay)
        assert recs[5].preemptions == 1
        seen[blind] = (recs[5].lost_s, recs[3].started_at - T0, replay.stats["preemption_notices_ended"])
    assert seen == {False: (0.0, 1_813, 1), True: (289.0, 2_101, 0)}


# -- lent nodes (issue 35): VCs a and b lend one night node each, reclaimed at T0 + 8 h -------------


def test_a_checkpointing_job_goes_on_a_lent_node_and_leaves_it_at_its_checkpoint_in_the_notice():
    """Nobody has a run-time bound (nothing learned), so only a job that says it checkpoints
    may go on the night nodes.  b's j2 and j3 never checkpoint: they take the two nodes of
    the cluster for 20 h.  a's j1 and j5 checkpoint: told, they run on the night nodes (a's
    quota grows by one node at night) and, told at 07:30 that the pool goes at 08:00, each
    leaves at its next checkpoint, losing nothing.  Blind, nothing goes on the night nodes."""
    jobs = [job(2, 0, "b", 8, 20 * HOUR), job(3, 0, "b", 8, 20 * HOUR)]
    jobs += [job(1, 60, "a", 8, 20 * HOUR), job(5, 60, "a", 8, 20 * HOUR)]
    told = replayed(jobs, lent=1.0, checkpointing=0.5)
    recs = records(told)
    assert told.lent_started == {1, 5} and not told.lent_started & {2, 3}
    st = told.stats
    assert st["reclaim_left_at_checkpoint"] >= 1 and st["reclaim_kills"] == 0
    assert st["reclaim_left_at_checkpoint"] == st["reclaim_notices"] == sum(rec.preemptions for rec in recs.values())
    assert all(rec.lost_s == 0 for rec in recs.values())
    line = json_line(summarize(told.result))
    assert line["lent_gpu_hours"] == round(st["lent_gpu_s"] / 3600, 1) > 0
    assert line["lent_lost_pct"] == 0.0 and line["lost_gpu_hours_by_cause"] == {
        "preemption": 0.0,
        "reclaim": 0.0,
        "move": 0.0,
    }
    # Each stop: a reclaim's, in a notice (07:30 - 08:00), at a checkpoint of the run (1800 s apart).
    assert told.stops
    for job_id, at, started, preemptor in told.stops:
        assert job_id in {1, 5} and preemptor is None
        assert 7.5 * HOUR <= (at - T0) % 86_400 < 8 * HOUR
        assert (at - started) % 1_800 == 0

    blind = replayed(jobs, lent=1.0, checkpointing=0.5, checkpoint_blind=True)
    assert not blind.lent_started and blind.stats["lent_gpu_s"] == 0
    assert blind.stats["reclaim_left_at_checkpoint"] == 0


def test_a_job_on_a_lent_node_that_never_checkpoints_is_preempted_at_the_reclaim_and_loses_its_run():
    """The reclaim's loss, by cause: b alone, one node and one night node.  Its j2 and j3 (8
    GPUs, 10 h, never checkpoint) have a bound (learned from 200 one-hour runs of b's: 4096
    s), so one runs on the night node: done
    long before 07:30 by its bound, it is not told; at 08:00 it is preempted, its whole run
    lost.  It runs again once the other is done (10:00), on a node of the cluster."""
    learned = [TraceJob(1000 + i, T0 - 10 * HOUR, HOUR, 8, "b") for i in range(200)]
    jobs = [job(2, 0, "b", 8, 10 * HOUR), job(3, 60, "b", 8, 10 * HOUR)]
    replay = replayed(jobs, {"b": 1}, learned=learned, lent=1.0, checkpointing=0.5)
    recs = records(replay)
    assert len(replay.lent_started) == 1 and replay.stats["reclaim_kills"] == 1
    (killed,) = replay.lent_started
    assert [(job_id, preemptor) for job_id, _, _, preemptor in replay.stops] == [(killed, None)]
    ran = 8 * HOUR - 0.001 - (recs[killed].started_at - T0)
    assert recs[killed].lost_s == recs[killed].lost_reclaim_s == pytest.approx(ran, abs=0.01)
    assert recs[killed].finished_at is not None and recs[killed].checkpointed_at is None
    summary = summarize(replay.result)
    assert summary["lost_gpu_s_by_cause"]["reclaim"] == pytest.approx(8 * ran, abs=20)
    assert summary["lost_gpu_s_by_cause"]["preemption"] == 0
    assert json_line(summary)["lent_lost_pct"] == pytest.approx(100.0, abs=0.01)


def test_checkpointing_runs_are_labelled_and_checked():
    assert run_label("priority", quota="elastic", factor=3, checkpointing=0.5) == "priority+elastic+ckpt0.5@x3"
    blind = run_label("priority", pin=False, quota="elastic", factor=3, checkpointing=0.5, checkpoint_blind=True)
    assert blind == "priority+no-pin+elastic+ckpt0.5-blind@x3"
    assert (
        run_label("priority", lent=0.3, checkpointing=0.5, checkpoint_every=600)
        == "priority+lent0.3+ckpt0.5[every=600]"
    )
    with pytest.raises(ValueError, match="checkpoint_blind"):
        ReplayConfig("priority", checkpoint_blind=True)
    with pytest.raises(ValueError, match="not both"):
        ReplayConfig("priority", checkpointing=0.5, checkpoints_declared=True)
    with pytest.raises(ValueError, match="share of the jobs"):
        ReplayConfig("priority", checkpointing=1.5)
    with pytest.raises(ValueError, match="checkpoint_every_s"):
        ReplayConfig("priority", checkpointing=0.5, checkpoint_every_s=0)


def test_cli_names_the_runs_and_refuses_what_does_not_go_together(tmp_path, capsys):
    from bench import trace_replay

    trace = tmp_path / "trace.csv"
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster", "2017-10-01 00:00:00,100,1,100,a"]
    trace.write_text("\n".join(rows) + "\n")
    vcs = tmp_path / "vc.csv"
    vcs.write_text("vc,node num\na,1\nb,1\n")
    common = ["--trace", str(trace), "--vc-nodes", str(vcs), "--policy", "priority", "--from", "2017-10-01"]
    common += ["--cache-dir", str(tmp_path / "cache")]
    trace_replay.main([*common, "--checkpointing", "0.5", "--checkpoint-every", "60"])
    trace_replay.main([*common, "--checkpointing", "0.5", "--checkpoint-every", "60", "--checkpoint-blind"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["label"] for line in lines] == ["priority+ckpt0.5[every=60]", "priority+ckpt0.5-blind[every=60]"]
    summary = json.loads((tmp_path / "cache" / "2017-10-01_all" / "priority+ckpt0.5[every=60].json").read_text())
    # Job 1 (the trace's first row) checkpoints: one at 60 s of its 100.
    assert summary["stats"]["checkpointing_jobs"] == 1 and summary["stats"]["checkpoints_seen"] == 1
    for wrong in (
        ["--checkpoint-blind"],
        ["--checkpointing", "0.5", "--declare-checkpoints"],
        ["--checkpointing", "2"],
    ):
        with pytest.raises(SystemExit):
            trace_replay.main([*common, *wrong])
