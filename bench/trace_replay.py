"""Replay two months of Microsoft's Philly GPU cluster through jobdash, in virtual time.

    python -m bench.trace_replay --trace ../shared/traces/philly_2017-10-01_11-30_11vc.csv \\
        --policy priority [--policy fifo ...] [--quota fixed|borrow|elastic] [--compress 3] \\
        [--from 2017-10-01 --to 2017-10-08] [--parallel 2] [--report]

``--policy`` takes a queueing policy (seed, fifo, fifo-besteffort, priority, fair,
shortest), ``sjf-oracle`` (shortest job first knowing the true durations: a
reference bound, not a product feature) or ``none`` (no queue: every TFJob is
created at submission, to count the deadlocks jobdash prevents); ``all`` (the
default) runs every one of them.  Each policy is one discrete-event replay
(bench/replay/engine.py): queueing.plan() decides, kubesim's cluster model
(training-operator, not-gang-aware scheduler, kubelet, work clock) runs the
jobs on its ManualClock; no wall-clock sleeps.  The cluster and the job mapping
follow ../shared/traces/README.md: namespaces = the 11 VCs, GPU quota = VC nodes x
8, 352 nodes of 8 GPUs / 96 CPUs / 768 GiB.

``--quota`` (issue #15; repeatable, like ``--policy``): ``fixed`` (the default) is the
above; ``elastic`` makes each VC's share its guaranteed share and its ResourceQuota the
whole cluster (352 x 8 GPUs), all VCs in one cohort: a VC borrows what others leave idle
and a VC within its share reclaims it by preemption (``--grace`` seconds, then the
victim's TFJob is suspended and requeued; a job is a victim at most
``--preemption-limit`` times); ``borrow`` borrows the same way but never preempts.
``--compress K`` divides the time between submissions by K (durations unchanged), for
a busier cluster.  Labels say both: ``priority+elastic``, ``fifo@x3``.

Placement (issue #31): by default the replay releases jobs as the dispatcher does, pinned:
each TFJob is created with its pod templates held by the placement gate, and every gated
pod is sent to its planned node by a pod patch (bench/replay/pinning.py); ``--no-pin``
leaves the pods to kubesim's scheduler alone (LeastAllocated), for comparison (label
``priority+no-pin``).  The nodes are in racks of 8 and blocks of 4 racks, and the
snapshot has the dispatcher's topology levels (jobs carry no topology request).

``--estimator`` (issue #16): ``new`` (the default) estimates durations with queueing's
DurationPredictor and gives running jobs likely ends for the start-time forecast;
``old`` with the median of the VC's last runs of the same GPU count, as before (label
``priority+old-est``).  Either way the forecasts go through a StartCalibrator (a likely
start and a 90% late bound), and the summary says how they fared.

``--lent SHARE`` (issue 35, bench/replay/lending.py): besides the cluster, round(VC nodes x
SHARE) nodes per VC are lent every night 22:00-08:00 UTC (kubesim's ``lent_pools``: they
register at 22:00, are cordoned at 07:30 and drained and deleted at 08:00), and each VC's
quota grows by its part of them while they are lent.  The planner is told (``Snapshot.lent``
and each job's 90 % bound from the new estimator; the old one gives none, so nothing goes
there); at the reclaim what still runs there is preempted and queued again in its place.
``--tide-blind``: the same nodes, the planner not told (label ``priority+lent0.3-blind``).
``--report-tide`` writes only the report's section on them, from every window's summaries.

``--eta-oracle`` (issue 38): each forecasting cycle also forecasts knowing every job's run
time, and knowing the queued jobs' only (bench/replay/true_forecast.py), the yardsticks of
the likely start's error (``eta.true_durations``, ``eta.queued_true_durations``);
``--report-calibration`` writes only the report's block on start-range calibration per
window and load, from the summaries of every window run with it.

``--checkpointing SHARE`` (issue 48, bench/replay/checkpoints.py): this share of the jobs (by
the hash ``--elastic`` picks by) checkpoints every ``--checkpoint-every`` seconds (1800), set
on their objects for kubesim, which keeps their work and annotates each checkpoint
(``jobdash.io/checkpointed-at``); the others never do (a stop loses the whole run).  They
declare it to the planner (victims by the work since their last checkpoint; lent nodes
whatever their bound) and a victim or a job told of a reclaim leaves at its next checkpoint
in the notice; ``--checkpoint-blind``: the planner is told nothing (label
``priority+elastic+ckpt0.5-blind``).  ``--declare-checkpoints``: every job declares kubesim's
default interval instead (label ``+ckpt``).

``--clusters N`` (issue 49, bench/replay/multi_cluster.py): the nodes split into N clusters of
whole racks (``jobdash.io/cluster: c0..``), every gang planned inside one, quotas jobdash-wide;
``--dispatch first-admits``: instead of one plan, a planner per cluster each cycle, the clusters
in turn, the first to admit a job winning it (MultiKueue's yardstick).  Label ``+c2``,
``+c2-first-admits``.  ``--lose-cluster c1 --lose-at SECONDS --lose-for SECONDS`` (issue 49,
bench/replay/lost_cluster.py): that cluster silent a while, the lost-cluster rules replayed;
``--lose-at`` is simulated seconds after the replay's start; the JSON line gains
``lost_cluster`` (label ``+lose-c1[at=..,for=..]``).

Prints one JSON line per replay (label, policy, quota, compress, jobs, avg_jct_s,
avg_queue_s, p99_queue_s, max_queue_s, gpu_util_pct, deadlocked_gangs, max_wait_1gpu_s,
max_wait_8gpu_s, preemptions, preempted_gpu_hours, gpu_hours, preempted_pct, lost_gpu_hours
(= preempted_gpu_hours), lost_gpu_hours_by_cause ({preemption, reclaim}), runtime_s, clusters,
dispatch, gpu_hours_by_cluster (null unless --clusters), estimator, eta_median_rel_error, eta_late_pct, interval_coverage_pct; with lent nodes also
reclaim_killed_pct, lent_gpu_hours and lent_lost_pct) as each replay ends; the full summaries go to var/trace_replay/.  ``--report`` then writes
bench/results/trace_replay.md (its generated sections) and the PNG plots from the
summaries of every policy on record for that window; ``--report-only`` does so
without replaying.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from bench.replay import arguments
from bench.replay.arguments import POLICIES, ROOT
from bench.replay.records import (
    DEFAULT_CHECKPOINT_S,
    FIXED,
    NEW_ESTIMATOR,
    PLAN,
    QUOTA_MODES,
    TAIL_COVERAGE,
    run_label,
)
from bench.replay.trace import (
    compress,
    finished_before,
    iso,
    load_trace,
    load_vc_nodes,
    parse_time,
)


def _value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


LEARNED = 2000  # finished jobs a new leader learns from (jobdash/dispatch/predictions.py BOOTSTRAP)


def run_one(task: dict[str, Any]) -> dict[str, Any]:
    """One policy's replay, in its own process when run in parallel."""
    from bench.replay.calibration_log import bootstrap_pairs, described, read_log, write_log
    from bench.replay.dumps import dump_jobs
    from bench.replay.engine import Replay, ReplayConfig
    from bench.replay.metrics import summarize

    code = code_version()  # (before the replay: the code it runs is the code imported now)
    jobs = load_trace(task["trace"], task["start"], task["end"])
    vc_nodes = load_vc_nodes(task["vc_nodes"])
    config = ReplayConfig(
        policy=task["policy"],
        policy_options=task["options"],
        pin=task["pin"],
        quota=task.get("quota", FIXED),
        grace_s=task.get("grace", 60.0),
        preemption_limit=task.get("preemption_limit", 3),
        estimator=task.get("estimator", NEW_ESTIMATOR),
        lent=task.get("lent", 0.0),
        tide_blind=task.get("tide_blind", False),
        lent_coverage=task.get("lent_coverage", TAIL_COVERAGE),
        lent_bound_factor=task.get("bound_factor", 1.0),
        elastic=task.get("elastic", 0.0),
        checkpoints_declared=task.get("declared", False),
        checkpointing=task.get("checkpointing", 0.0),
        checkpoint_every_s=task.get("checkpoint_every", DEFAULT_CHECKPOINT_S),
        checkpoint_blind=task.get("checkpoint_blind", False),
        defrag_gpu_h=task.get("defrag"),
        defrag_movers=task.get("defrag_movers", 8),
        clusters=task.get("clusters", 0),
        dispatch=task.get("dispatch", PLAN),
        lose_cluster=task.get("lose_cluster") or "",
        lose_at_s=task.get("lose_at", 0.0),
        lose_for_s=task.get("lose_for", 3600.0),
    )
    if task.get("tick") is not None:
        config.tick_s = task["tick"]
    config.eta_oracle = task.get("eta_oracle", False)
    start = task["start"] if task["start"] is not None else (jobs[0].submit if jobs else 0.0)
    factor = task.get("compress", 1)
    jobs = compress(jobs, start, factor)
    end = start + (task["end"] - start) / factor if task["end"] is not None else (jobs[-1].submit if jobs else start)
    # A dispatcher started at the window's start has learned run times from the jobs that
    # finished before it (its first cycle reads the last 2000: dispatch/predictions.BOOTSTRAP).
    learned = finished_before(load_trace(task["trace"], None, start), start, LEARNED) if task["start"] else []
    replay = Replay(jobs, vc_nodes, config, start=start, window_end=end, learned=learned)
    bootstrap = task.get("calibration_bootstrap")
    if bootstrap:  # issue 47: what a new leader reads of another month's starts, nothing else
        for pair in bootstrap_pairs(read_log(Path(bootstrap))):
            replay.calibrator.observe(*pair)
    if task.get("forecasts_out"):
        replay.forecast_log = []
    result = replay.run(progress=task.get("progress", False))
    summary = summarize(result)
    if task.get("jobs_out"):
        dump_jobs(result, Path(task["jobs_out"]))
    if replay.forecast_log is not None:
        write_log(Path(task["forecasts_out"]), replay.forecast_log, result.jobs)
    summary["trace"] = Path(task["trace"]).name
    summary["calibration_bootstrap"] = described(Path(bootstrap)) if bootstrap else None
    summary["label"] = task["label"]
    summary["options"] = task["options"]
    summary["pin"] = task["pin"]
    # Issue #31: how released pods find their nodes.  gated: the dispatcher's pinned
    # placement (templates held, each pod sent to its planned node); scheduler: kubesim's
    # scheduler alone (LeastAllocated), as every run before #31 but the node-affinity --pin.
    summary["release"] = "gated" if task["pin"] and task["policy"] != "none" else "scheduler"
    summary["topology"] = True
    summary["compress"] = factor
    summary["eta_oracle"] = config.eta_oracle
    summary["learned_before"] = len(learned)
    summary["grace_s"] = config.grace_s
    summary["preemption_limit"] = config.preemption_limit
    summary["window"] = [iso(start), iso(end)]
    summary["code"] = code
    summary["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    return summary


def code_version() -> dict[str, Any]:
    """The commit replayed, and the files of the code the replay runs (queueing, kubesim,
    the replay) with changes not committed yet."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = git("status", "--porcelain", "--", "queueing", "kubesim", "bench/replay", "bench/trace_replay.py")
    changed = changed.splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD").strip(), "uncommitted": sorted(line[3:] for line in changed)}


def main(argv: list[str] | None = None) -> None:
    from bench.replay.metrics import json_line

    parser = arguments.parser(__doc__.split("\n\n")[0])
    args = parser.parse_args(argv)

    start = parse_time(args.start) if args.start else None
    end = parse_time(args.end) if args.end else None
    window_key = f"{args.start or 'all'}_{args.end or 'all'}"
    cache = Path(args.cache_dir) / window_key
    if args.lend_nodes is not None:
        args.lent = args.lend_nodes / 100
    if not (args.report_only or args.report_tide or args.report_calibration):
        names = []
        for entry in args.policy or ["all"]:
            for name in entry.split(","):
                names.extend(POLICIES if name == "all" else [name])
        unknown = [name for name in names if name not in POLICIES]
        if unknown:
            parser.error(f"unknown policy {unknown[0]!r}; expected one of {', '.join(POLICIES)} or all")
        quotas = [mode for entry in args.quota or [FIXED] for mode in entry.split(",")]
        wrong = [mode for mode in quotas if mode not in QUOTA_MODES]
        if wrong:
            parser.error(f"unknown quota mode {wrong[0]!r}; expected one of {', '.join(QUOTA_MODES)}")
        if args.compress <= 0:
            parser.error("--compress must be positive")
        if not 0 <= args.lent <= 1:
            parser.error("--lent must be a share of the nodes, 0..1 (e.g. 0.3)")
        if not 0 < args.lent_coverage < 1:
            parser.error("--lent-coverage must lie strictly between 0 and 1 (e.g. 0.99)")
        if args.bound_factor <= 0:
            parser.error("--bound-factor must be positive")
        if not 0 <= args.elastic <= 1:
            parser.error("--elastic must be a share of the multi-GPU jobs, 0..1 (e.g. 0.3)")
        if args.elastic and ("none" in names or "elastic" in quotas):
            parser.error("--elastic needs a policy other than none, and quotas other than elastic")
        if args.tide_blind and not args.lent:
            parser.error("--tide-blind needs --lent")
        if not 0 <= args.checkpointing <= 1:
            parser.error("--checkpointing must be a share of the jobs, 0..1 (e.g. 0.5)")
        if args.checkpoint_every <= 0:
            parser.error("--checkpoint-every must be positive")
        if args.checkpoint_blind and not args.checkpointing:
            parser.error("--checkpoint-blind needs --checkpointing")
        if args.checkpointing and args.declare_checkpoints:
            parser.error("--declare-checkpoints (every job, kubesim's interval) or --checkpointing, not both")
        if args.lent and (quotas != [FIXED] or "none" in names):
            parser.error("--lent needs fixed quotas and a policy other than none")
        if args.clusters < 0 or (args.dispatch != PLAN and not args.clusters):
            parser.error("--clusters must be 1 or more, and --dispatch needs it")
        if args.clusters and (not args.pin or "none" in names or args.lent or args.elastic):
            parser.error("--clusters needs pinned placement and a policy other than none, without --lent or --elastic")
        if args.lose_cluster and args.lose_cluster not in {f"c{i}" for i in range(args.clusters)}:
            parser.error("--lose-cluster must name one of the clusters --clusters makes (c0..c<N-1>)")
        if args.lose_cluster and (args.lose_at < 0 or not args.lose_for > 0):
            parser.error("--lose-at must be 0 or more and --lose-for more than 0 (seconds)")
        factor = int(args.compress) if float(args.compress).is_integer() else args.compress
        options = dict(item.split("=", 1) for item in args.option)
        options = {key: _value(value) for key, value in options.items()}
        runs = [(name, quota) for name in names for quota in quotas]
        tasks = [
            {
                "trace": args.trace,
                "vc_nodes": args.vc_nodes,
                "policy": name,
                "start": start,
                "end": end,
                "options": options,
                "pin": args.pin,
                "tick": args.tick,
                "eta_oracle": args.eta_oracle,
                "progress": args.progress,
                "jobs_out": None,
                "quota": quota,
                "grace": args.grace,
                "preemption_limit": args.preemption_limit,
                "compress": factor,
                "estimator": args.estimator,
                "lent": args.lent,
                "tide_blind": args.tide_blind,
                "bound_factor": args.bound_factor,
                "lent_coverage": args.lent_coverage,
                "elastic": args.elastic,
                "declared": args.declare_checkpoints,
                "checkpointing": args.checkpointing,
                "checkpoint_every": args.checkpoint_every,
                "checkpoint_blind": args.checkpoint_blind,
                "defrag": args.defrag,
                "defrag_movers": args.defrag_movers,
                "clusters": args.clusters,
                "dispatch": args.dispatch,
                "lose_cluster": args.lose_cluster,
                "lose_at": args.lose_at,
                "lose_for": args.lose_for,
                "label": args.label
                if args.label and len(runs) == 1
                else run_label(
                    name,
                    args.pin,
                    args.option,
                    quota,
                    args.grace,
                    args.preemption_limit,
                    factor,
                    args.estimator,
                    args.lent,
                    args.tide_blind,
                    args.bound_factor,
                    args.lent_coverage,
                    args.elastic,
                    args.declare_checkpoints,
                    args.checkpointing,
                    args.checkpoint_every,
                    args.checkpoint_blind,
                    args.defrag,
                    args.defrag_movers,
                    args.clusters,
                    args.dispatch,
                ),
            }
            for name, quota in runs
        ]
        cache.mkdir(parents=True, exist_ok=True)
        for task in tasks:
            if args.lose_cluster and not (args.label and len(runs) == 1):  # (issue 49) a cluster lost a while
                task["label"] += f"+lose-{args.lose_cluster}[at={args.lose_at:g},for={args.lose_for:g}]"
            if args.calibration_bootstrap:
                task["label"] += "+boot"
            task["calibration_bootstrap"] = args.calibration_bootstrap
            task["jobs_out"] = str(cache / "jobs" / f"{task['label']}.json.gz")
            if args.forecasts_out:
                task["forecasts_out"] = str(cache / "jobs" / f"{task['label']}.forecasts.json.gz")
        began = time.perf_counter()

        def emit(summary: dict[str, Any]) -> None:
            (cache / f"{summary['label']}.json").write_text(json.dumps(summary))
            print(
                f"# {summary['label']}: replay {summary['runtime_s']:.0f} s wall, {summary['stats']['cycles']} cycles",
                file=sys.stderr,
                flush=True,
            )
            print(json.dumps(json_line(summary)), flush=True)

        if args.parallel > 1 and len(tasks) > 1:
            context = multiprocessing.get_context("fork")
            with context.Pool(min(args.parallel, len(tasks)), maxtasksperchild=1) as pool:
                for summary in pool.imap_unordered(run_one, tasks):
                    emit(summary)
        else:
            for task in tasks:
                emit(run_one(task))
        print(f"# all replays: {time.perf_counter() - began:.0f} s wall", file=sys.stderr)
    if args.report or args.report_only:
        from bench.replay.report import write_report

        summaries = [json.loads(path.read_text()) for path in sorted(cache.glob("*.json"))]
        written = write_report(summaries, Path(args.results_dir))
        for path in written:
            print(f"# wrote {path}", file=sys.stderr)
    if args.report or args.report_only or args.report_calibration:
        from bench.replay.report_ranges import write_calibration

        every = [json.loads(path.read_text()) for path in sorted(Path(args.cache_dir).glob("*/*.json"))]
        calibrated = write_calibration(every, Path(args.results_dir))
        if calibrated is not None:
            print(f"# wrote {calibrated} (calibration per window and load)", file=sys.stderr)
    if args.report or args.report_only or args.report_tide:
        from bench.replay.report import write_tide

        every = [json.loads(path.read_text()) for path in sorted(Path(args.cache_dir).glob("*/*.json"))]
        tide = write_tide(every, Path(args.results_dir))
        if tide is not None:
            print(f"# wrote {tide} (lent nodes)", file=sys.stderr)


if __name__ == "__main__":
    main()
