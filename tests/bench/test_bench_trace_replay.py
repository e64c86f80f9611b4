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
from bench.replay.records import run_label
from bench.replay.trace import TraceJob, load_trace, parse_time
from queueing import plan

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
    """priority, unpinned (--no-pin: the scheduler alone).  @0 j1 (4 GPUs) -> node-0, runs 1-1001.
    @10 j2 (1 GPU) is planned on node-0 (best fit) and j3 (8 GPUs) on the empty node-1;
    the scheduler is not gang-aware and spreads (LeastAllocated): j2 lands on node-1 and
    j3's pod fits nowhere.  j3 holds 8 GPUs of b's quota, bound nowhere, until the start
    timeout (300 s): @310 it is taken back and requeued, backoff 10 s; @320 no node fits;
    @1002 (j1 ended 1001) it is released again onto node-0 and runs 1003-1053."""
    jobs = [job(1, 0, "a", 4, 1000), job(2, 10, "a", 1, 5000), job(3, 10, "b", 8, 50)]
    result = replay(jobs, "priority", pin=False)
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
        "label",
        "policy",
        "quota",
        "compress",
        "jobs",
        "avg_jct_s",
        "avg_queue_s",
        "p99_queue_s",
        "max_queue_s",
        "gpu_util_pct",
        "deadlocked_gangs",
        "max_wait_1gpu_s",
        "max_wait_8gpu_s",
        "preemptions",
        "moves",
        "preempted_gpu_hours",
        "gpu_hours",
        "preempted_pct",
        "lost_gpu_hours",
        "lost_gpu_hours_by_cause",
        "runtime_s",
        "clusters",
        "dispatch",
        "gpu_hours_by_cluster",
        "estimator",
        "eta_median_rel_error",
        "eta_late_pct",
        "interval_coverage_pct",
    ]
    assert line["estimator"] == "new"
    assert (line["clusters"], line["dispatch"], line["gpu_hours_by_cluster"]) == (1, "plan", None)  # (not split)
    assert line["policy"] == "fifo" and line["jobs"] == 6 and line["max_wait_1gpu_s"] == 122
    assert line["label"] == "fifo" and line["quota"] == "fixed" and line["compress"] == 1
    assert line["preemptions"] == 0 and line["preempted_gpu_hours"] == 0 and line["preempted_pct"] == 0
    assert line["lost_gpu_hours"] == 0 and line["lost_gpu_hours_by_cause"] == {"preemption": 0, "reclaim": 0, "move": 0}
    # The 8-GPU jobs: j5 waits 1 s, j3 (a's whole quota) waits for j1 to end: 2 -> 103.
    assert line["max_wait_8gpu_s"] == 101
    assert line["gpu_hours"] == round((2 * 100 + 4 * 30 + 8 * 20 + 1 * 5 + 8 * 40 + 1 * 10) / 3600, 1)
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


# -- fixed quotas: the replay as it was before elastic quota ----------------------------------

# synthetic(40, 5) on VCs of two nodes each, replayed by the code before issue #15.
FIXED_BEFORE = {
    "fifo": (2712.2, 6866.0, 52.04, 93),
    "priority": (1591.1, 4924.0, 46.57, 110),
}
PRIORITY_STARTS_BEFORE = [
    7475, 6225, 4347, 643, 4465, 418, 1287, 7475, 4257, 4347, 8, 3905, 1287, 7189, 4257, 89, 597, 1302, 7475, 1456,
    1614, 4257, 2893, 75, 2370, 4257, 3391, 7475, 5993, 3731, 151, 4347, 1130, 4347, 440, 1287, 199, 1863, 6951, 4347,
]  # fmt: skip


@pytest.mark.parametrize("policy", ["fifo", "priority"])
def test_fixed_quotas_give_the_results_they_gave_before(policy):
    """... with the old duration estimator (issue #16: the new one changes what backfill sees)."""
    jobs = synthetic(40, 5)
    vcs = {"a": 2, "b": 2}
    result = replay(jobs, policy, vcs, estimator="old", pin=False)  # (the scheduler placed the pods then)
    summary = summarize(result)
    assert (summary["avg_queue_s"], summary["p99_queue_s"], summary["gpu_util_pct"], result.stats["cycles"]) == (
        FIXED_BEFORE[policy]
    )
    if policy == "priority":
        assert [start for start, _ in (outcome(result)[i] for i in range(1, 41))] == PRIORITY_STARTS_BEFORE
    assert outcome(replay(jobs, policy, vcs, quota="fixed", estimator="old", pin=False)) == outcome(result)
    assert summary["quota"] == "fixed" and summary["preemptions"] == 0 and summary["preempted_gpu_hours"] == 0


# -- elastic quota (issue #15) ---------------------------------------------------------------

# VCs a and b of one node each (a share of 8 GPUs, the ceiling 16 with elastic quota).
# a submits two 8-GPU jobs at once: its share fits one of them.
BORROWER = [job(1, 0, "a", 8, 10_000), job(2, 0, "a", 8, 5_000)]
# ... and b, within its share, wants its node back at 2000 s.
RECLAIM = [*BORROWER, job(3, 2_000, "b", 8, 1_000)]


def borrowing(result) -> dict[int, bool]:
    return {rec.job.id: rec.borrowing for rec in result.jobs}


def test_elastic_quota_lets_a_vc_borrow_beyond_its_share_while_the_cluster_is_idle():
    """Fixed: j2 waits for j1 (a's quota is 8 GPUs), @10002 -> 10003-15003.  Borrowing: a
    uses b's idle share, j2 runs at once beyond a's guarantee."""
    assert outcome(replay(BORROWER, "priority")) == {1: (1, 10_001), 2: (10_003, 15_003)}
    for quota in ("borrow", "elastic"):
        result = replay(BORROWER, "priority", quota=quota)
        assert outcome(result) == {1: (1, 10_001), 2: (1, 5_001)}, quota
        assert borrowing(result) == {1: False, 2: True}
        assert result.stats["borrowing_admitted"] == 1 and result.stats["preemptions_planned"] == 0
    # fifo borrows the same way
    assert outcome(replay(BORROWER, "fifo", quota="elastic")) == {1: (1, 10_001), 2: (1, 5_001)}


def test_reclaim_preempts_the_borrower_which_resumes_after_its_last_checkpoint():
    """elastic.  @2000 j3 (b, within its share) finds no node: the planner preempts j2, a's
    borrower (j1 is within a's guarantee).  j2 runs on through its 60 s grace period; @2060
    its TFJob is suspended: it ran 2059 s, kubesim keeps the work up to its last checkpoint
    (1800 s, the default interval), 259 s are lost, and it is queued again with its
    submission time.  @2060 (the tick grid from @2000) j3 -> 2061-3061.  @3062 j2 is
    released again: the same TFJob unsuspended, which does the 3200 s left: 3063-6263."""
    result = replay(RECLAIM, "priority", quota="elastic")
    assert outcome(result) == {1: (1, 10_001), 2: (1, 6_263), 3: (2_061, 3_061)}
    recs = {rec.job.id: rec for rec in result.jobs}
    victim = recs[2]
    assert victim.preemptions == 1 and victim.preempted_for is None
    assert victim.preempted_by is None  # (cleared when it was released again, as the dispatcher's claim does)
    assert victim.lost_s == 259 and victim.run_s == 2_059 + 3_200
    assert victim.run_started_at == T0 + 3_063 and victim.requeued_s == 3_063 - 2_060 and victim.wait_s == 1 + 1_003
    assert victim.releases == 2 and victim.attempts == 0
    assert result.stats["preemptions"] == 1 and result.stats["preemptions_called_off"] == 0
    summary = summarize(result)
    assert summary["preemptions"] == 1 and summary["jobs_preempted"] == 1 and summary["deadlocked_gangs"] == 0
    run = 8 * (10_000 + 2_059 + 3_200 + 1_000)
    assert summary["gpu_hours"] == round(run / 3600, 1) and summary["preempted_gpu_hours"] == round(8 * 259 / 3600, 1)
    assert summary["preempted_pct"] == round(100 * 8 * 259 / run, 3)
    assert summary["avg_queue_s"] == pytest.approx((1 + 1_004 + 61) / 3, abs=0.1)


def test_a_shorter_checkpoint_interval_loses_less():
    result = replay(RECLAIM, "priority", quota="elastic", checkpoint_s=600)
    victim = next(rec for rec in result.jobs if rec.job.id == 2)
    assert victim.lost_s == 2_059 - 1_800 and victim.run_s == 2_059 + 5_000 - 1_800
    result = replay(RECLAIM, "priority", quota="elastic", checkpoint_s=0)  # no checkpoints: it all goes
    victim = next(rec for rec in result.jobs if rec.job.id == 2)
    assert victim.lost_s == 2_059 and victim.run_s == 2_059 + 5_000


# Two borrowers of a on b's node: j2 since 0, j4 since 1500; b wants half its node at 1810.
TWO_BORROWERS = [job(1, 0, "a", 8, 10_000), job(2, 0, "a", 4, 5_000), job(4, 1_500, "a", 4, 5_000)]
TWO_BORROWERS += [job(3, 1_810, "b", 4, 1_000)]


def test_declared_checkpoints_make_the_victim_the_one_just_past_a_checkpoint():
    """(issue 48) Blind, the newest borrower goes (j4, its whole run); told that every job
    checkpoints each 1800 s of its run, the planner takes j2, 9 s past its checkpoint."""
    lost = {}
    for declared in (False, True):
        result = replay(TWO_BORROWERS, "priority", quota="elastic", checkpoints_declared=declared)
        victims = [rec for rec in result.jobs if rec.preemptions]
        assert len(victims) == 1
        lost[declared] = (victims[0].job.id, victims[0].lost_s)
    assert lost[False][0] == 4 and lost[False][1] > 300
    assert lost[True][0] == 2 and lost[True][1] < 100
    assert run_label("priority", quota="elastic", factor=3, declared=True) == "priority+elastic+ckpt@x3"


def test_borrowing_without_reclaim_never_preempts():
    """borrow: j3 waits for the borrower to end (5001), @5002 -> 5003-6003."""
    result = replay(RECLAIM, "priority", quota="borrow")
    assert outcome(result) == {1: (1, 10_001), 2: (1, 5_001), 3: (5_003, 6_003)}
    assert result.stats["preemptions_planned"] == 0 and summarize(result)["preemptions"] == 0


def test_a_preemption_whose_preemptor_starts_elsewhere_in_the_grace_period_is_called_off(monkeypatch):
    """j1 ends at 2031, in j2's grace period.  The planner (as of this writing) has j3 hold
    out for its victim; one that starts it on j1's node instead (@2032 -> 2033-3033) is
    stood in for here: at the deadline (2060) j3 runs, so the preemption is called off and
    j2 ends as if nothing had happened."""
    import dataclasses

    from bench.replay import cycle

    def starting_preemptors_on_free_room(snapshot, policy, **options):
        leaving = {job.preempted_for for job in snapshot.running if job.preempted_for is not None}
        if leaving:  # the plan of a world where nobody leaves, if it starts a preemptor
            unmarked = tuple(dataclasses.replace(job, preempted_for=None) for job in snapshot.running)
            alternative = plan(dataclasses.replace(snapshot, running=unmarked, preemption_limit=0), policy, **options)
            if leaving & set(alternative.admitted):
                return alternative
        return plan(snapshot, policy, **options)

    monkeypatch.setattr(cycle, "plan", starting_preemptors_on_free_room)
    jobs = [job(1, 0, "a", 8, 2_030), job(2, 0, "a", 8, 5_000), job(3, 2_000, "b", 8, 1_000)]
    result = replay(jobs, "priority", quota="elastic")
    assert outcome(result) == {1: (1, 2_031), 2: (1, 5_001), 3: (2_033, 3_033)}
    assert result.stats["preemptions_planned"] == 1 and result.stats["preemptions_called_off"] == 1
    assert result.stats["preemptions"] == 0
    assert all(rec.preemptions == 0 and rec.preempted_for is None and rec.lost_s == 0 for rec in result.jobs)


def test_a_victim_that_ends_in_its_grace_period_is_not_suspended():
    """j2 would end at 2031 anyway: at the deadline there is nothing to suspend; j3 takes
    the node it left (@2032 -> 2033-3033)."""
    jobs = [job(1, 0, "a", 8, 10_000), job(2, 0, "a", 8, 2_030), job(3, 2_000, "b", 8, 1_000)]
    result = replay(jobs, "priority", quota="elastic")
    assert outcome(result) == {1: (1, 10_001), 2: (1, 2_031), 3: (2_033, 3_033)}
    assert result.stats["preemptions_planned"] == 1 and result.stats["preemptions"] == 0
    assert result.stats["preemptions_called_off"] == 0
    assert all(rec.preemptions == 0 and rec.lost_s == 0 for rec in result.jobs)


def test_elastic_quota_on_a_busy_synthetic_trace_finishes_every_job():
    jobs = synthetic(40, 5)
    vcs = {"a": 2, "b": 2}
    for policy in ("fifo", "priority"):
        for quota in ("borrow", "elastic"):
            result = replay(jobs, policy, vcs, quota=quota)
            summary = summarize(result)
            assert summary["finished"] == len(jobs) and summary["deadlocked_gangs"] == 0, (policy, quota)
            assert all(rec.preemptions <= 3 for rec in result.jobs)
            if quota == "borrow":
                assert summary["preemptions"] == 0
            lost = sum(rec.gpus * rec.lost_s for rec in result.jobs)
            work = sum(rec.gpus * rec.job.duration for rec in result.jobs)
            # every job did its work once; what ran beyond that is the work preemption threw away
            assert sum(rec.gpus * rec.run_s for rec in result.jobs) == pytest.approx(work + lost)


# -- compressed arrivals -----------------------------------------------------------------------


def test_compress_divides_the_time_between_submissions():
    from bench.replay.trace import compress

    jobs = [job(1, 0, "a", 1, 10), job(2, 30, "a", 1, 20), job(3, 90, "b", 2, 30)]
    squeezed = compress(jobs, T0, 3)
    assert [j.submit - T0 for j in squeezed] == [0, 10, 30]
    assert [(j.id, j.duration, j.gpus, j.vc) for j in squeezed] == [(j.id, j.duration, j.gpus, j.vc) for j in jobs]
    assert compress(jobs, T0, 1) is jobs
    assert [j.submit - (T0 + 30) for j in compress(jobs, T0 + 30, 2)] == [-15, 0, 30]
    with pytest.raises(ValueError):
        compress(jobs, T0, 0)


def test_cli_runs_quota_modes_and_compression_under_labels_of_their_own(tmp_path, capsys):
    from bench import trace_replay

    trace, vcs = write_trace(tmp_path, [*RECLAIM, job(4, 3_000, "b", 1, 100)])
    cache = tmp_path / "cache"
    common = ["--trace", str(trace), "--vc-nodes", str(vcs), "--from", "2017-10-01", "--cache-dir", str(cache)]
    trace_replay.main([*common, "--policy", "priority", "--quota", "fixed,borrow", "--quota", "elastic"])
    trace_replay.main([*common, "--policy", "fifo", "--compress", "3", "--results-dir", str(tmp_path / "r")])
    lines = {line["label"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}
    assert list(lines) == ["priority", "priority+borrow", "priority+elastic", "fifo@x3"]
    assert [lines[label]["quota"] for label in lines] == ["fixed", "borrow", "elastic", "fixed"]
    assert [lines[label]["compress"] for label in lines] == [1, 1, 1, 3]
    assert lines["priority+elastic"]["preemptions"] == 1 and lines["priority+borrow"]["preemptions"] == 0
    assert lines["priority+elastic"]["preempted_gpu_hours"] == 0.6
    cached = sorted(path.name for path in (cache / "2017-10-01_all").glob("*.json"))
    assert cached == ["fifo@x3.json", "priority+borrow.json", "priority+elastic.json", "priority.json"]
    squeezed = json.loads((cache / "2017-10-01_all" / "fifo@x3.json").read_text())
    assert squeezed["compress"] == 3 and squeezed["window"] == ["2017-10-01 00:00:00", "2017-10-01 00:16:40"]
    import gzip

    with gzip.open(cache / "2017-10-01_all" / "jobs" / "fifo@x3.json.gz", "rt") as handle:
        dumped = json.load(handle)
    assert [at - T0 for at in dumped["submit"]] == pytest.approx([0, 0, 2_000 / 3, 1_000])
    assert dumped["preemptions"] == [0] * 4

    # The report: the section on elastic quota and its targets; the main tables only from
    # fixed quotas at the trace's pace.
    results = tmp_path / "results"
    trace_replay.main([*common, "--report-only", "--results-dir", str(results)])
    report = (results / "trace_replay.md").read_text()
    assert "## Elastic quota (issue #15)" in report and "| priority+elastic |" in report
    assert "| shared window | priority+borrow | borrowing, no reclaim |" in report
    assert "| arrivals x3 | fifo@x3 | fixed quotas |" in report
    assert report.index("<!-- /generated:targets -->") < report.index("<!-- generated:targets-elastic -->")
    main_table = report[report.index("<!-- generated:results -->") : report.index("<!-- /generated:results -->")]
    assert "| priority | 4 |" in main_table and "elastic" not in main_table and "@x3" not in main_table
    # Issue #31: every run since is pinned by default, and has a section of its own.
    placed = report[report.index("<!-- generated:placement -->") : report.index("<!-- /generated:placement -->")]
    assert "| shared window | priority+elastic | pinned (gated, sent to the planned node) |" in placed
    assert "| arrivals x3 | fifo@x3 | pinned" in placed
    assert "<!-- generated:targets-placement -->" in report and (results / "trace_replay_placement.png").exists()
    trace_replay.main([*common, "--policy", "priority", "--quota", "elastic", "--no-pin"])
    trace_replay.main([*common, "--report-only", "--results-dir", str(results)])
    report = (results / "trace_replay.md").read_text()
    assert "| shared window | priority+no-pin+elastic | scheduler alone |" in report


def test_the_report_keeps_main_tables_it_has_no_summaries_for(tmp_path):
    """A cache with only some of the runs the report shows (another machine): the main
    tables stay as they are, the section on elastic quota is added."""
    from bench.replay.report import write_report

    old = (
        "# Trace replay\n\n<!-- generated:results -->\n| policy | jobs |\n|---|---|\n| seed | 9 |\n"
        "| priority | 9 |\n<!-- /generated:results -->\n\n<!-- generated:targets -->\n| old |\n"
        "<!-- /generated:targets -->\n\nProse.\n"
    )
    (tmp_path / "trace_replay.md").write_text(old)
    summaries = []
    for quota in ("fixed", "elastic"):
        summary = summarize(replay(RECLAIM, "priority", quota=quota))
        summary["label"] = "priority" if quota == "fixed" else "priority+elastic"
        summary["compress"] = 1
        summaries.append(summary)
    written = write_report(summaries, tmp_path)
    report = (tmp_path / "trace_replay.md").read_text()
    assert written == [tmp_path / "trace_replay.md"]  # no plots either
    assert report.startswith(old.rstrip()[: old.index("Prose.")])
    assert "| seed | 9 |" in report and "| old |" in report and "Prose." in report
    assert "<!-- generated:targets-elastic -->" in report and "| priority+elastic |" in report


def write_trace(tmp_path, jobs):
    trace = tmp_path / "trace.csv"
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for j in jobs:
        at = int(j.submit - T0)
        stamp = f"2017-10-01 {at // 3600:02d}:{at % 3600 // 60:02d}:{at % 60:02d}"
        rows.append(f"{stamp},{j.duration},{j.gpus},{j.duration * j.gpus},{j.vc}")
    trace.write_text("\n".join(rows) + "\n")
    vcs = tmp_path / "vc.csv"
    vcs.write_text("vc,node num\na,1\nb,1\n")
    return trace, vcs


def test_a_pinned_victim_resumes_on_the_nodes_planned_for_its_new_release():
    """Pinned (the default): suspended, the victim's templates are restored (no gate); its
    next release holds them again, and its new pod is sent to the node planned for it then
    (j2 ran on node-1, which j3 took; it resumes on node-0 once j1 is done)."""
    from queueing.placement import GATE

    jobs = [job(1, 0, "a", 8, 3_000), job(2, 0, "a", 8, 5_000), job(3, 2_000, "b", 8, 10_000)]
    config = ReplayConfig(policy="priority", quota="elastic")
    engine = Replay(jobs, TWO_VCS, config, start=T0)
    templates, selected = [], []

    def template_when_suspended(rt, event):
        name = event.obj["metadata"]["name"]
        if rt.plural == "tfjobs" and name == "job-2":
            spec = event.obj["spec"]
            suspend = (spec.get("runPolicy") or {}).get("suspend", False)
            templates.append((suspend, spec["tfReplicaSpecs"]["Worker"]["template"]))
        elif rt.plural == "pods" and name.startswith("job-2-") and event.type != "DELETED":
            selected.append((event.obj["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname"))

    engine.cluster.store.hooks.append(template_when_suspended)
    result = engine.run()
    assert outcome(result) == {1: (1, 3_001), 2: (1, 6_203), 3: (2_061, 12_061)}
    victim = next(rec for rec in result.jobs if rec.job.id == 2)
    assert victim.preemptions == 1 and victim.placement == (("Worker", 0, "node-0"),)
    assert templates[0][1]["spec"]["schedulingGates"] == [{"name": GATE}]  # created held
    assert any(suspend and "schedulingGates" not in template["spec"] for suspend, template in templates)  # restored
    held_again = [i for i, (suspend, template) in enumerate(templates) if suspend and GATE in json.dumps(template)]
    assert held_again and not templates[-1][0]  # held while still suspended, then unsuspended
    assert selected[0] is None and "node-1" in selected and selected[-1] == "node-0"
    assert result.stats["off_plan"] == 0 and result.stats["timeouts"] == 0
    assert result.stats["ungated"] == 4  # j1, j2, j3, j2 again


# -- start-time ranges (issue #16) -------------------------------------------------------------


def busy(count: int = 120, seed: int = 7, hours: int = 10) -> list[TraceJob]:
    """Jobs of 5 min to 2 h on VCs of one node each: a queue that lasts for hours."""
    import random

    rng = random.Random(seed)
    return [
        job(i, rng.randrange(0, hours * 3600), rng.choice("ab"), rng.choice([1, 1, 2, 4, 8]), rng.randrange(300, 7200))
        for i in range(1, count + 1)
    ]


@pytest.fixture(scope="module")
def ranged():
    """The busy trace under priority with each estimator, forecasts every 10 minutes."""
    jobs = sorted(busy(), key=lambda j: (j.submit, j.id))
    return {
        estimator: Replay(jobs, TWO_VCS, ReplayConfig(policy="priority", estimator=estimator, eta_every_s=600.0), T0)
        for estimator in ("old", "new")
    }


def test_start_ranges_are_sampled_calibrated_and_scored(ranged):
    for estimator, engine in ranged.items():
        result = engine.run()
        assert result.config.estimator == estimator
        assert result.eta_samples and all(len(sample) == 5 for sample in result.eta_samples)
        for _, eta, at, likely, late in result.eta_samples:
            assert at <= likely <= late and eta >= at
        # One observation per forecast a job was given, when it starts; past the warm-up.
        assert engine.calibrator.observed == result.stats["calibration_observed"] > 50
        assert not engine.forecasts.jobs  # every job given a forecast has started
        waited = {job_id for job_id, *_ in result.eta_samples}  # (each waited through an ETA cycle)
        assert engine.calibrator.observed >= len(waited)
        assert any(likely != eta for _, eta, _, likely, _ in result.eta_samples[-50:])
        summary = summarize(result)
        eta = summary["eta"]
        for key in ("median_rel_error", "late_pct", "median_abs_error_s", "raw_median_rel_error", "raw_late_pct"):
            assert eta[key] >= 0, key
        assert 0 <= eta["interval_coverage_pct"] <= 100 and 0 <= eta["late_pct"] <= 100
        assert eta["median_late_over_likely"] >= 1
        assert eta["with_eta_or_note_pct"] == 100.0 and eta["with_eta_pct"] <= 100.0
        assert sum(band["samples"] for band in eta["bands"]) == eta["samples"]
        # (issue 47) the same samples by month, with the namespace-days they come from
        assert sum(month["samples"] for month in eta["months"].values()) == eta["samples"] == eta["episodes"]["samples"]
        assert (eta["episodes"]["late_pct"], eta["episodes"]["covered_pct"]) == (
            eta["late_pct"],
            eta["interval_coverage_pct"],
        )
        assert 1 <= eta["episodes"]["episodes"] <= eta["samples"]
        assert (summary["estimator"], summary["interval_coverage_pct"]) == (estimator, eta["interval_coverage_pct"])
        assert summary["eta_median_rel_error"] == eta["median_rel_error"] and summary["eta_late_pct"] == eta["late_pct"]
        assert summary["deadlocked_gangs"] == 0 and summary["finished"] == len(result.jobs)
        estimate = summary["estimate"]
        assert 0 < estimate["within_2x_pct"] <= 100
        assert ("p90_coverage_pct" in estimate) == (estimator == "new")


def test_the_new_estimator_predicts_and_learns_and_gives_likely_ends_only_when_forecasting(monkeypatch):
    from bench.replay import cycle

    seen = []

    def recording(snapshot, policy, **options):
        seen.append((options.get("forecasts", True), [job.likely_end for job in snapshot.running]))
        return plan(snapshot, policy, **options)

    monkeypatch.setattr(cycle, "plan", recording)
    jobs = sorted(busy(40, seed=2, hours=3), key=lambda j: (j.submit, j.id))
    engine = Replay(jobs, TWO_VCS, ReplayConfig(policy="priority", eta_every_s=600.0), T0)
    result = engine.run()
    assert engine.predictor is not None and engine.predictor.observed == len(jobs)
    forecasting = [ends for eta, ends in seen if eta and ends]
    # (the first forecast comes before any job has finished: nothing to predict from yet)
    assert [all(end is not None for end in ends) for ends in forecasting[1:]] == [True] * (len(forecasting) - 1)
    assert all(end is None for eta, ends in seen if not eta for end in ends)  # ordinary cycles pay nothing
    later = [rec for rec in result.jobs if rec.prediction is not None and rec.prediction.source != "none"]
    assert later and all(rec.estimate == rec.prediction.median_s for rec in result.jobs)
    assert result.stats["likely_end_s"] > 0

    seen.clear()
    old = Replay(jobs, TWO_VCS, ReplayConfig(policy="priority", estimator="old", eta_every_s=600.0), T0)
    old.run()
    assert old.predictor is None and all(end is None for _, ends in seen for end in ends)
    with pytest.raises(ValueError):
        ReplayConfig(policy="priority", estimator="oracle")


def test_cli_names_the_old_estimator_and_the_report_compares_ranges(tmp_path, capsys):
    from bench import trace_replay

    trace, vcs = write_trace(tmp_path, sorted(busy(60, seed=4, hours=4), key=lambda j: (j.submit, j.id)))
    cache, results = tmp_path / "cache", tmp_path / "results"
    common = ["--trace", str(trace), "--vc-nodes", str(vcs), "--from", "2017-10-01", "--cache-dir", str(cache)]
    trace_replay.main([*common, "--policy", "priority", "--estimator", "old"])
    trace_replay.main([*common, "--policy", "priority,sjf-oracle", "--results-dir", str(results), "--report"])
    lines = {line["label"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}
    assert list(lines) == ["priority+old-est", "priority", "sjf-oracle"]
    assert [line["estimator"] for line in lines.values()] == ["old", "new", "new"]
    assert all(0 <= line["interval_coverage_pct"] <= 100 for line in lines.values())
    report = (results / "trace_replay.md").read_text()
    assert "## Start-time ranges (issue #16)" in report
    section = report[report.index("<!-- generated:ranges -->") : report.index("<!-- /generated:ranges -->")]
    assert "| shared window | priority+old-est | old (VC median) |" in section
    assert "| shared window | priority | new (predictor) |" in section
    targets = report[report.index("<!-- generated:targets-ranges -->") :]
    assert "avg queueing <= 1.5 x sjf-oracle" in targets and "the 90% late bound covers" in targets
    import gzip

    with gzip.open(cache / "2017-10-01_all" / "jobs" / "priority.json.gz", "rt") as handle:
        dumped = json.load(handle)
    assert dumped["eta_samples"] and all(len(sample) == 5 for sample in dumped["eta_samples"])


# -- pinned placement (issue #31) --------------------------------------------------------------


@pytest.mark.parametrize("quota", ["fixed", "elastic"])
def test_the_default_path_binds_every_pod_on_its_planned_node_and_never_times_out(quota):
    """The dispatcher's release path: every TFJob is created held (each pod gated), each
    gated pod is sent to a node of its job's placement, and kubesim's scheduler binds it
    there; so no pod is bound off the plan, no gang is stranded and no start times out,
    although the scheduler alone (LeastAllocated) strands gangs on this trace."""
    from queueing.placement import GATE

    jobs = sorted(synthetic(60, 11), key=lambda j: (j.submit, j.id))
    vcs = {"a": 2, "b": 2}
    engine = Replay(jobs, vcs, ReplayConfig(policy="priority", quota=quota), start=T0)
    bindings, created_gated = [], []

    def watch(rt, event):
        obj = event.obj
        if rt.plural != "pods" or event.type == "DELETED":
            return
        spec, name = obj["spec"], obj["metadata"]["name"]
        if event.type == "ADDED":
            created_gated.append(any(gate["name"] == GATE for gate in spec.get("schedulingGates") or ()))
        elif spec.get("nodeName") and name not in {b[0] for b in bindings}:
            job_id = int(name.split("-")[1])
            planned = {node for _, _, node in engine.records[job_id].placement}
            selected = (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")
            bindings.append((name, spec["nodeName"], selected, planned))

    engine.cluster.store.hooks.append(watch)
    result = engine.run()
    summary = summarize(result)
    assert summary["finished"] == len(jobs) and summary["deadlocked_gangs"] == 0
    assert created_gated and all(created_gated)  # every pod was created held
    assert bindings and all(node == selected and node in planned for _, node, selected, planned in bindings)
    assert result.stats["off_plan"] == 0 and result.stats["timeouts"] == 0 and summary["gave_up"] == 0
    assert result.stats["ungated"] == len(created_gated) and result.stats["beyond_plan"] == 0
    assert summary["gangs_ever_partial"] == 0
    # The same trace with the scheduler alone: pods land where the plan did not put them.
    unpinned = replay(jobs, "priority", vcs, quota=quota, pin=False)
    assert unpinned.stats["ungated"] == 0 and unpinned.stats["off_plan"] == 0  # (not counted unpinned)


def test_a_gang_whose_planned_room_is_taken_is_placed_again():
    """Lost slots (dispatch/phases/lost.py over the replay's watch cache): a released job's planned
    node whose room another pod took before its pod was bound there is placed again by the
    plan (Snapshot.replacements), the pod held by the lost slot deleted, and the job starts
    on its new node without a start timeout."""
    jobs = [job(1, 0, "a", 8, 100)]
    engine = Replay(jobs, TWO_VCS, ReplayConfig(policy="priority"), start=T0)
    real_pin = engine._pin
    stolen = []

    def pin_after_a_stranger():
        # Before the first pin, a pod that did not come through jobdash takes the planned node.
        if not stolen:
            rec = engine.records[1]
            node = rec.placement[0][2]
            stolen.append(node)
            engine.cluster.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "stranger", "namespace": "b"},
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"}}}],
                    },
                }
            )
            engine.cluster.settle()
            return
        real_pin()

    engine._pin = pin_after_a_stranger
    result = engine.run()
    rec = next(rec for rec in result.jobs if rec.job.id == 1)
    assert result.stats["replaced"] == 1 and result.stats["stranded_pods_deleted"] == 0
    assert rec.placement[0][2] != stolen[0] and rec.started_at is not None
    assert result.stats["timeouts"] == 0 and result.stats["off_plan"] == 0
