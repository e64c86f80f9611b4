"""A cluster lost for a while in the replay (issue 49, part 6; bench/replay/lost_cluster.py).

By hand: VCs "a" and "b" of 8 nodes each, ``--clusters 2`` (c0 and c1, 64 GPUs each), half
the jobs checkpointing (job ids 1, 5, 7, ... by the hash: 5 does, 2 and 3 do not).  Job 2
(vc a, 64 GPUs, 3000 s) fills one cluster; job 5 (vc b, 8 GPUs, checkpoints every 1800 s,
10000 s) and job 3 (vc b, 8 GPUs, never checkpoints, 10000 s) run in the other.  That
cluster falls silent at 600 s for 7200 s: Lost at 660 s, job 5 planned again at 2460 s (its
run since its checkpoint at about 1800 s lost), starting in the other cluster once job 2 ends
at 3000 s; job 3 waits; at 7800 s job 5's copy is deleted, having run 7800 - 2460 s twice.
"""

import json
from types import SimpleNamespace

import pytest

from bench import trace_replay
from bench.replay.engine import Replay, ReplayConfig
from bench.replay.metrics import json_line, summarize
from bench.replay.records import DONE
from bench.replay.trace import TraceJob, parse_time

T0 = parse_time("2017-10-01")
VCS = {"a": 8, "b": 8}
JOBS = [TraceJob(2, T0, 3000.0, 64, "a"), TraceJob(3, T0, 10000.0, 8, "b"), TraceJob(5, T0, 10000.0, 8, "b")]


def replayed(lose: str) -> Replay:
    config = ReplayConfig("priority", clusters=2, checkpointing=0.5, lose_at_s=600.0, lose_for_s=7200.0)
    if lose == "the cluster of jobs 3 and 5":
        probe = Replay(list(JOBS), VCS, ReplayConfig("priority", clusters=2, checkpointing=0.5), T0)
        probe.run()
        lose = probe.all_records[2].cluster
    config.lose_cluster = lose
    replay = Replay(list(JOBS), VCS, config, T0)
    replay.result = replay.run()
    return replay


def test_a_checkpointing_job_is_planned_again_and_its_copy_deleted_at_the_return():
    replay = replayed("the cluster of jobs 3 and 5")
    found = replay.stats["lost_cluster"]
    recs = {rec.job.id: rec for rec in replay.result.jobs}
    assert all(rec.state == DONE for rec in recs.values())
    lost = found["cluster"]
    assert recs[3].cluster == lost and recs[2].cluster != lost
    assert recs[5].cluster != lost  # started again in the other cluster
    assert recs[5].declared_every_s == 1800.0 and recs[3].declared_every_s is None
    assert found["jobs_replanned_released"] == 0
    assert found["jobs_replanned_running"] == 1
    assert found["jobs_waited"] == 1
    assert found["ran_twice_behind_partition"] == 1
    assert found["jobs_running_twice_while_both_answered"] == 0
    # Its run since the checkpoint at ~1800 s (started a few seconds after T0): ~660 s of 8 GPUs.
    assert 8 * 600 / 3600 < found["lost_gpu_hours"] < 8 * 700 / 3600
    assert recs[5].lost_cluster_s == recs[5].lost_s
    # The copy ran from the replan (2460 s) to the return (7800 s): its own end (~10000 s) is later.
    assert found["ran_twice_gpu_hours"] == pytest.approx(8 * (7800 - 2460) / 3600, abs=0.01)
    assert recs[5].started_at is not None and recs[5].run_started_at >= T0 + 3000
    summary = summarize(replay.result)
    assert summary["lost_gpu_hours_by_cause"]["cluster"] == pytest.approx(found["lost_gpu_hours"], abs=0.1)
    line = json.loads(json.dumps(json_line(summary)))
    assert line["lost_cluster"] == found


def test_a_copy_still_running_when_both_answer_raises():
    replay = replayed("c0")
    replay.copies[5] = (8, T0, T0 + 10**6)  # (as if a copy had been left undeleted)
    replay.lost_now = False
    replay.records[5] = replay.all_records[2]
    replay.records[5].state = "running"
    with pytest.raises(AssertionError, match="run twice"):
        replay._check_twice(T0 + 100)


def test_the_command_line_refuses_a_cluster_it_does_not_make(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["x", "--policy", "priority", "--clusters", "2", "--lose-cluster", "c2"])
    with pytest.raises(SystemExit):
        trace_replay.main()
    assert "--lose-cluster" in capsys.readouterr().err
    assert SimpleNamespace  # (imported for symmetry with the clusters tests)
