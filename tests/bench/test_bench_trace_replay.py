"""The trace replay on small traces whose outcome is worked out by hand below.

Cluster of the tests: VCs "a" and "b" with one node each (8 GPUs, 96 CPUs, 768 GiB),
so quota = 8 GPUs per namespace and 2 nodes in all; the kubelet starts a pod 1 s after
it is bound; a job's work starts when its whole gang runs.  Times are seconds after
T0 (2017-10-01 00:00 UTC); (start, finish) are when the whole gang ran and when the
TFJob succeeded.
"""

import json

import pytest

from bench.replay.engine import Replay, ReplayConfig
from bench.replay.metrics import json_line, percentile, summarize
from bench.replay.trace import TraceJob, load_trace, parse_time

T0 = parse_time("2017-10-01")
TWO_VCS = {"a": 1, "b": 1}


def job(job_id: int, at: float, vc: str, gpus: int, duration: float) -> TraceJob:
    return TraceJob(job_id, T0 + at, duration, gpus, vc)


# (id, submitted, VC, GPUs, duration)
SIX = [
    job(1, 0, "a", 2, 100),
    job(5, 0, "b", 8, 40),
    job(2, 1, "a", 4, 30),
    job(3, 2, "a", 8, 20),
    job(4, 3, "a", 1, 5),
    job(6, 4, "b", 1, 10),
]


def replay(jobs, policy, vc_nodes=TWO_VCS, **options):
    config = ReplayConfig(policy=policy, **options)
    return Replay(sorted(jobs, key=lambda j: (j.submit, j.id)), vc_nodes, config, start=T0).run()


def outcome(result) -> dict[int, tuple]:
    return {
        rec.job.id: (
            None if rec.started_at is None else rec.started_at - T0,
            None if rec.finished_at is None else rec.finished_at - T0,
        )
        for rec in result.jobs
    }


def test_seed_by_hand():
    """seed: a cycle every 10 s (no kicks), quota only, largest CPU request first, at most
    one in-flight job per namespace.
    @10  a: j3 (8 GPUs, the largest) fits; b: j5.  Both run 11 -> j3 ends 31, j5 ends 51.
    @20  quotas full: nothing.   (j3 ends at 31: next tick with news is 40)
    @40  a free 8: j2 (4 GPUs) of j2, j1, j4 -> runs 41-71.
    @50  a free 4: j1 (2 GPUs) -> runs 51-151 (one at a time: j4 waited for j2 to run).
    @60  a free 2: j4 -> 61-66; b (j5 ended at 51): j6 -> 61-71.
    """
    result = replay(SIX, "seed")
    assert outcome(result) == {1: (51, 151), 2: (41, 71), 3: (11, 31), 4: (61, 66), 5: (11, 51), 6: (61, 71)}
    assert result.stats["cycles"] == 5  # @10, 20, 40, 50, 60: ticks with nothing new are skipped


def test_fifo_by_hand():
    """fifo (strict): a cycle at each submission and 2 s ticks after changes; node fit.
    @0  j1 -> node-0 (best fit), j5 (8 GPUs) -> node-1; both run 1 -> j1 ends 101, j5 ends 41.
    @1  j2 (4) fits a's quota (2 used) and node-0 -> runs 2-32.
    @2  j3 (8) exceeds a's quota (6 used): a's head, so @3 j4 is blocked behind it.
    @4  j6 exceeds b's quota (j5).
    @32 (j2 ended) a has 6 free: j3 still waits.
    @42 (j5 ended 41, ticks from @32) j6 planned on node-0 (best fit), the scheduler's
        LeastAllocated binds it on the empty node-1: runs 43-53.
    @102 (j1 ended 101) j3 -> 103-123, j4 exceeds the quota again;  @124 j4 -> 125-130.
    """
    result = replay(SIX, "fifo")
    assert outcome(result) == {1: (1, 101), 2: (2, 32), 3: (103, 123), 4: (125, 130), 5: (1, 41), 6: (43, 53)}
    assert result.stats["cycles"] == 12  # @0 1 2 3 4 (kicks), 32 42 44 54 102 104 124 (ticks)
    summary = summarize(result)
    assert summary["avg_queue_s"] == pytest.approx((1 + 1 + 101 + 122 + 1 + 39) / 6, abs=0.1)
    assert summary["max_queue_s"] == 122 and summary["deadlocked_gangs"] == 0


def test_a_gang_the_scheduler_strands_is_taken_back_and_requeued():
    """priority (the default).  @0 j1 (4 GPUs) -> node-0, runs 1-1001.
    @10 j2 (1 GPU) is planned on node-0 (best fit) and j3 (8 GPUs) on the empty node-1;
    the scheduler is not gang-aware and spreads (LeastAllocated): j2 lands on node-1 and
    j3's pod fits nowhere.  j3 holds 8 GPUs of b's quota, bound nowhere, until the start
    timeout (300 s): @310 it is taken back and requeued, backoff 10 s; @320 no node fits;
    @1002 (j1 ended 1001) it is released again onto node-0 and runs 1003-1053."""
    jobs = [job(1, 0, "a", 4, 1000), job(2, 10, "a", 1, 5000), job(3, 10, "b", 8, 50)]
    result = replay(jobs, "priority")
    assert outcome(result) == {1: (1, 1001), 2: (11, 5011), 3: (1003, 1053)}
    assert result.stats["timeouts"] == 1 and result.stats["gave_up"] == 0
    third = next(rec for rec in result.jobs if rec.job.id == 3)
    assert third.attempts == 1 and third.first_released_at == T0 + 10 and third.released_at == T0 + 1002
    assert result.partial_quota_gpu_s == 8 * 300 and result.partial_node_gpu_s == 0
    assert summarize(result)["gangs_ever_partial"] == 1


DEADLOCK_VC = {"a": 4}  # 4 nodes, quota 32 GPUs
TWO_GANGS = [job(1, 0, "a", 24, 100), job(2, 0, "a", 24, 100)]  # 3 Workers of 8 GPUs each


def test_without_a_queue_two_gangs_deadlock_on_the_quota():
    """No jobdash: the operator creates the pods of both TFJobs round robin, A0 B0 A1 B1,
    and the quota (32 GPUs) refuses A2 and B2: each holds 16 GPUs, neither ever runs."""
    result = replay(TWO_GANGS, "none", DEADLOCK_VC, drain_idle_s=3600)
    summary = summarize(result)
    assert summary["deadlocked_gangs"] == 2 and summary["finished"] == 0 and summary["stuck_gpus"] == 32
    assert result.end - T0 > 3600 - 30  # stopped at the last operator retry before the hour of no progress
    assert result.partial_node_gpu_s == 32 * (result.end - T0)


def test_with_jobdash_the_same_gangs_run_one_after_the_other():
    """@0 A fits the quota (B does not): A runs 1-101; @102 B -> 103-203."""
    result = replay(TWO_GANGS, "priority", DEADLOCK_VC)
    assert outcome(result) == {1: (1, 101), 2: (103, 203)}
    assert summarize(result)["deadlocked_gangs"] == 0 and result.partial_quota_gpu_s == 0


def synthetic(count: int = 30, seed: int = 3) -> list[TraceJob]:
    import random

    rng = random.Random(seed)
    return [
        job(
            i,
            rng.randrange(0, 3600),
            rng.choice("ab"),
            rng.choice([1, 1, 1, 2, 4, 8, 16]),
            float(rng.randrange(10, 2000)),
        )
        for i in range(1, count + 1)
    ]


@pytest.mark.parametrize("policy", ["seed", "fifo", "priority", "none"])
def test_same_trace_same_result(policy):
    jobs = synthetic()
    vcs = {"a": 2, "b": 2}
    options = {"drain_idle_s": 300} if policy == "none" else {}  # stuck gangs: stop soon
    first, second = replay(jobs, policy, vcs, **options), replay(jobs, policy, vcs, **options)
    assert outcome(first) == outcome(second)
    one, two = summarize(first), summarize(second)
    for summary in (one, two):
        summary.pop("runtime_s"), summary.pop("stats")
    assert one == two
    if policy != "none":
        assert one["deadlocked_gangs"] == 0 and one["finished"] + one["gave_up"] == len(jobs)
        # seed checks quota only: a 16-GPU job it releases may find no two free nodes,
        # time out five times and be given up; the node-fit policies never release it early.
        assert one["gave_up"] == (1 if policy == "seed" else 0)


def test_the_oracle_and_the_estimate_see_what_they_should():
    """sjf-oracle orders by the true duration; shortest by the namespace's history, which
    is empty for the first jobs (so the later, shorter job cannot jump ahead of them)."""
    jobs = [job(1, 0, "a", 8, 1000), job(2, 10, "a", 8, 500), job(3, 10, "a", 8, 50)]
    oracle = outcome(replay(jobs, "sjf-oracle", {"a": 1}))
    assert oracle[3][0] < oracle[2][0]  # j3 (50 s) before j2 (500 s), both behind j1
    estimated = outcome(replay(jobs, "shortest", {"a": 1}))
    assert estimated[2][0] < estimated[3][0]  # no history yet: same estimate, submission order


def test_summary_and_json_line():
    result = replay(SIX, "fifo")
    line = json_line(summarize(result))
    assert list(line) == [
        "policy",
        "jobs",
        "avg_jct_s",
        "avg_queue_s",
        "p99_queue_s",
        "max_queue_s",
        "gpu_util_pct",
        "deadlocked_gangs",
        "max_wait_1gpu_s",
        "runtime_s",
    ]
    assert line["policy"] == "fifo" and line["jobs"] == 6 and line["max_wait_1gpu_s"] == 122
    assert json.loads(json.dumps(line)) == line
    assert percentile([1, 2, 3, 4], 50) == 2 and percentile([1, 2, 3, 4], 100) == 4 and percentile([], 99) == 0
    # The tail the report plots: waits 1, 1, 101, 122, 1, 39 s -> three above 1 s, two above 39 s, none above 1 h.
    tail = dict((threshold, fraction) for threshold, fraction in summarize(result)["queue_tail"])
    assert tail[1.0] == 0.5 and min(fraction for threshold, fraction in tail.items() if threshold >= 3600) == 0.0
    between = [fraction for threshold, fraction in tail.items() if 39 <= threshold < 101]
    assert between and all(fraction == pytest.approx(2 / 6, abs=1e-6) for fraction in between)


def test_cli_replays_a_trace_file_and_writes_the_report(tmp_path, capsys):
    from bench import trace_replay

    trace = tmp_path / "trace.csv"
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for j in SIX:
        stamp = f"2017-10-01 00:00:{int(j.submit - T0):02d}"
        rows.append(f"{stamp},{j.duration},{j.gpus},{j.duration * j.gpus},{j.vc}")
    trace.write_text("\n".join(rows) + "\n")
    vcs = tmp_path / "vc.csv"
    vcs.write_text("vc,node num\na,1\nb,1\n")
    assert [j.id for j in load_trace(trace)] == [1, 2, 3, 4, 5, 6]
    trace_replay.main(
        [
            "--trace",
            str(trace),
            "--vc-nodes",
            str(vcs),
            "--policy",
            "seed,fifo",
            "--from",
            "2017-10-01",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--results-dir",
            str(tmp_path / "results"),
            "--report",
        ]
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["policy"] for line in lines] == ["seed", "fifo"]
    assert lines[1]["avg_queue_s"] == pytest.approx(44.2, abs=0.1)
    report = (tmp_path / "results" / "trace_replay.md").read_text()
    assert "| fifo | 6 |" in report and "<!-- generated:targets -->" in report
    assert (tmp_path / "results" / "trace_replay_queue_cdf.png").stat().st_size > 0
