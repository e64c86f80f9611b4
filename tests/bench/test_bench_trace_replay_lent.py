"""The replay with nodes lent for the night (issue 35, bench/replay/lending.py).

VCs "a" and "b" with one node each and ``lent=1.0``: one more node per VC (night-0,
night-1) from 22:00 to 08:00 UTC, cordoned at 07:30.  The replay starts at T0 =
2017-10-01 00:00 UTC, inside the night: the pool is reclaimed at T0 + 8 h.  VC a submits a
1 h job of 8 GPUs every 30 min; VC b two 10 h jobs.  The dispatcher has learned from 200
earlier 1 h runs of a's (``LEARNED``, as a new leader learns from the jobs finished before
it), so a's jobs have a tail bound (4096 s: the upper edge of 1 h's bucket, queueing/run_tails.py),
and b's, with no run of their namespace on record, none: they never go on the pool.
"""

import json

import pytest

from bench.replay.engine import Replay, ReplayConfig
from bench.replay.metrics import json_line, summarize
from bench.replay.records import run_label
from bench.replay.trace import TraceJob, parse_time

T0 = parse_time("2017-10-01")
HOUR = 3600.0
RECLAIM = T0 + 8 * HOUR
NIGHT = [TraceJob(i, T0 + (i - 1) * 1800, HOUR, 8, "a") for i in range(1, 13)]
NIGHT += [TraceJob(100 + i, T0 + 60 + i * 60, 10 * HOUR, 8, "b") for i in range(2)]
LEARNED = [TraceJob(1000 + i, T0 - 10 * HOUR, HOUR, 8, "a") for i in range(200)]


def night(blind: bool, learned: int = len(LEARNED)) -> Replay:
    jobs = sorted(NIGHT, key=lambda j: (j.submit, j.id))
    config = ReplayConfig(policy="priority", lent=1.0, tide_blind=blind)
    replay = Replay(jobs, {"a": 1, "b": 1}, config, start=T0, learned=LEARNED[:learned])
    replay.result = replay.run()
    return replay


def test_tide_aware_admission_kills_fewer_jobs_at_the_reclaim_than_tide_blind():
    aware, blind = night(False), night(True)
    assert aware.stats["lent_node_count"] == blind.stats["lent_node_count"] == 2
    # Both ran work on the night nodes; only the blind one had a job there at the reclaim.
    assert aware.stats["lent_runs"] > 0 and aware.stats["lent_gpu_s"] > 0
    assert blind.stats["lent_runs"] > 0
    assert blind.stats["reclaim_kills"] >= 1
    assert aware.stats["reclaim_kills"] < blind.stats["reclaim_kills"]
    # The killed job was suspended and queued again, and finished all the same.
    killed = blind.reclaim_killed
    assert killed and all(
        rec.preemptions == 1 and rec.finished_at is not None for rec in blind.all_records if rec.job.id in killed
    )
    assert all(rec.finished_at is not None for rec in aware.all_records)


def test_the_work_a_reclaim_throws_away_is_counted_as_the_reclaims_against_what_ran_there():
    """(issue 48) The blind run's kill at the reclaim: its run since its last checkpoint is lost
    work of cause "reclaim" (fixed quotas preempt nothing else), set against the GPU-hours run
    on the night nodes."""
    blind = night(True)
    lost = sum(rec.gpus * rec.lost_s for rec in blind.all_records)
    assert lost > 0 and all(rec.lost_reclaim_s == rec.lost_s for rec in blind.all_records)
    summary = summarize(blind.result)
    assert summary["lost_gpu_s_by_cause"] == {"preemption": 0.0, "reclaim": round(lost, 1), "move": 0.0}
    line = json_line(summary)
    assert line["lost_gpu_hours"] == line["lost_gpu_hours_by_cause"]["reclaim"] == round(lost / 3600, 1)
    lent_gpu_s = blind.stats["lent_gpu_s"]
    assert line["lent_gpu_hours"] == round(lent_gpu_s / 3600, 1) > 0
    assert line["lent_lost_pct"] == round(100 * lost / lent_gpu_s, 3)
    # Tide-aware, nothing was killed there: nothing lost.
    aware = json_line(summarize(night(False).result))
    assert aware["lent_lost_pct"] == 0 and aware["lost_gpu_hours"] == 0 and aware["lent_gpu_hours"] > 0


def test_a_job_whose_bound_outlasts_the_night_is_never_placed_on_a_lent_node():
    aware = night(False)
    assert aware.lent_admissions  # (else the rule below holds for nothing)
    for job_id, planned_at, bound, reclaim_at in aware.lent_admissions:
        assert reclaim_at == RECLAIM
        assert bound is not None and planned_at + bound <= reclaim_at, job_id
        assert planned_at < reclaim_at - 1800  # nothing new in the notice
    # b's jobs (no tail bound) stayed off the pool; a's went there.
    assert not aware.lent_started & {100, 101} and aware.lent_started & {1, 2, 3}
    assert aware.stats["lent_admitted_outlasting"] == 0
    # The blind planner put jobs without a bound there.
    blind = night(True)
    assert blind.stats["lent_admitted_outlasting"] > 0
    assert blind.lent_started & {100, 101}


def test_a_key_with_too_few_runs_for_its_tail_keeps_its_jobs_off_the_night():
    """With 50 runs on record (98 needed at 0.99) a's jobs have no tail bound either."""
    cautious = night(False, learned=50)
    assert not cautious.lent_started and not cautious.lent_admissions
    assert cautious.stats["lent_coverage"] == 0.99 and cautious.stats["reclaim_kills"] == 0
    assert all(rec.finished_at is not None for rec in cautious.all_records)


def test_lent_runs_are_labelled_and_checked():
    assert run_label("priority", factor=3, lent=0.3) == "priority+lent0.3@x3"
    assert run_label("priority", factor=3, lent=0.3, tide_blind=True) == "priority+lent0.3-blind@x3"
    assert run_label("priority", lent=0.3, bound_factor=1.5) == "priority+lent0.3[bound=1.5x]"
    assert run_label("priority", lent=0.3, lent_coverage=0.9) == "priority+lent0.3[cover=0.9]"
    with pytest.raises(ValueError, match="lent_coverage"):
        ReplayConfig(policy="priority", lent=0.3, lent_coverage=1.0)
    with pytest.raises(ValueError, match="lent_bound_factor"):
        ReplayConfig(policy="priority", lent=0.3, lent_bound_factor=0)
    with pytest.raises(ValueError, match="tide_blind"):
        ReplayConfig(policy="priority", tide_blind=True)
    with pytest.raises(ValueError, match="fixed quotas"):
        ReplayConfig(policy="priority", lent=0.3, quota="elastic")


def test_cli_replays_the_night_three_ways_and_reports_them_in_their_own_section(tmp_path, capsys):
    from bench import trace_replay

    trace = tmp_path / "trace.csv"
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for j in sorted(NIGHT, key=lambda j: (j.submit, j.id)):
        seconds = int(j.submit - T0)
        stamp = f"2017-10-01 {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        rows.append(f"{stamp},{j.duration},{j.gpus},{j.duration * j.gpus},{j.vc}")
    trace.write_text("\n".join(rows) + "\n")
    vcs = tmp_path / "vc.csv"
    vcs.write_text("vc,node num\na,1\nb,1\n")
    common = ["--trace", str(trace), "--vc-nodes", str(vcs), "--policy", "priority", "--from", "2017-10-01"]
    common += ["--to", "2017-10-02", "--cache-dir", str(tmp_path / "cache"), "--results-dir", str(tmp_path / "out")]
    aware = ["--lend-nodes", "100", "--lent-coverage", "0.5"]  # (one run bounds a tail at 50 %)
    for extra in (aware, ["--lent", "1", "--tide-blind"], []):
        trace_replay.main(common + extra)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["label"] for line in lines] == ["priority+lent1[cover=0.5]", "priority+lent1-blind", "priority"]
    # The JSON line's share of the jobs admitted to lent nodes that a reclaim killed
    assert lines[0]["reclaim_killed_pct"] == 0.0 and lines[1]["reclaim_killed_pct"] == 14.29
    assert "reclaim_killed_pct" not in lines[2]
    trace_replay.main(common + ["--report-tide"])
    report = (tmp_path / "out" / "trace_replay.md").read_text()
    section = report.split("<!-- generated:tide -->")[1].split("<!-- /generated:tide -->")[0]
    rows = [line for line in section.splitlines() if line.startswith("| 2017")]
    assert [row.split(" | ")[1] for row in rows] == [
        "priority+lent1[cover=0.5] (tide-aware)",
        "priority+lent1-blind (tide-blind)",
        "priority (no night nodes)",
    ]
    # tide-aware: no kill; tide-blind: the first long job of b
    assert "| 0 (0.0%) |" in rows[0] and "| 1 (14.3%) |" in rows[1]
    assert "0.0% killed - yes" in section
    # (issue 48) what reclaims threw away, of the GPU-h run on lent nodes: nothing tide-aware,
    # the killed job's run since its last checkpoint tide-blind
    assert "| 0.0 (0.00%) |" in rows[0] and "priority+lent1[cover=0.5]: 0.00% lost - yes" in section
    blind = json.loads((tmp_path / "cache" / "2017-10-01_2017-10-02" / "priority+lent1-blind.json").read_text())
    lost = blind["lost_gpu_s_by_cause"]["reclaim"]
    pct = 100 * lost / blind["stats"]["lent_gpu_s"]
    assert lost > 0 and f"| {lost / 3600:,.1f} ({pct:.2f}%) |" in rows[1]
    assert f"priority+lent1-blind: {pct:.2f}% lost - {'yes' if pct <= 1 else 'no'}" in section
    with pytest.raises(SystemExit):
        trace_replay.main(common + ["--tide-blind"])


def test_a_wider_bound_keeps_more_jobs_off_the_night_nodes():
    """a's bound is 4096 s (1 h's bucket); at 4x it is 4.6 h, which only the jobs planned by 03:25 fit."""
    jobs = sorted(NIGHT, key=lambda j: (j.submit, j.id))
    config = ReplayConfig(policy="priority", lent=1.0, lent_bound_factor=4.0)
    wide = Replay(jobs, {"a": 1, "b": 1}, config, start=T0, learned=LEARNED)
    wide.run()
    assert wide.lent_admissions and len(wide.lent_started) < len(night(False).lent_started)
    for job_id, planned_at, bound, reclaim_at in wide.lent_admissions:
        assert bound is not None and bound > 4 * HOUR and planned_at + bound <= reclaim_at, job_id
