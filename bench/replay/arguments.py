"""The command line of bench/trace_replay.py (its flags and their help), apart from what it runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.replay.records import (
    DEFAULT_CHECKPOINT_S,
    DISPATCH_MODES,
    ESTIMATORS,
    NEW_ESTIMATOR,
    PLAN,
    QUOTA_MODES,
    TAIL_COVERAGE,
)
from bench.replay.trace import DEFAULT_TRACE, DEFAULT_VC_NODES

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "var" / "trace_replay"
POLICIES = ("none", "seed", "fifo", "fifo-besteffort", "priority", "fair", "shortest", "sjf-oracle")


def parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.trace_replay", description=description)
    parser.add_argument("--trace", default=str(DEFAULT_TRACE))
    parser.add_argument("--vc-nodes", default=str(DEFAULT_VC_NODES))
    parser.add_argument("--policy", action="append", help=f"one of {', '.join(POLICIES)} or all; repeatable")
    parser.add_argument("--from", dest="start", help="first submission day (UTC), e.g. 2017-10-01")
    parser.add_argument("--to", dest="end", help="end of the submission window (exclusive), e.g. 2017-12-01")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="policy option, e.g. promote_after_s=7200 (applies to every policy given)",
    )
    parser.add_argument(
        "--quota",
        action="append",
        help=f"quota mode, one of {', '.join(QUOTA_MODES)} (default fixed); repeatable, comma-separated",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=60.0,
        help="elastic: seconds a victim runs on before it is suspended (JOBDASH_PREEMPTION_GRACE_SECONDS)",
    )
    parser.add_argument(
        "--preemption-limit", type=int, default=3, help="elastic: a job preempted this often is no longer a victim"
    )
    parser.add_argument(
        "--compress", type=float, default=1, help="arrivals K times as dense: submission t -> start + (t - start) / K"
    )
    parser.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default=NEW_ESTIMATOR,
        help="duration estimator: new (queueing.predictor, likely ends of running jobs) or old "
        "(median of the VC's last runs of the GPU count)",
    )
    parser.add_argument(
        "--lent",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="issue 35: this share of the nodes (per VC, rounded) is lent each night 22:00-08:00 UTC besides "
        "the cluster, notice 30 min (bench/replay/lending.py); fixed quotas only",
    )
    parser.add_argument(
        "--tide-blind",
        action="store_true",
        help="with --lent: the planner is not told the night nodes are lent (the baseline)",
    )
    parser.add_argument(
        "--lend-nodes",
        type=float,
        metavar="PCT",
        help="the same as --lent, in per cent of the nodes (--lend-nodes 30 = --lent 0.3)",
    )
    parser.add_argument(
        "--lent-coverage",
        type=float,
        default=TAIL_COVERAGE,
        help="with --lent: the coverage of the run-time bound lent nodes are admitted by "
        "(JOBDASH_LENT_COVERAGE; 0.99: a job goes there if it ends by the reclaim in 99%% of such runs)",
    )
    parser.add_argument(
        "--bound-factor",
        type=float,
        default=1.0,
        help="with --lent: the bound each queued job carries is its --lent-bound times this (a margin to tune)",
    )
    parser.add_argument(
        "--elastic",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="issue 35: this share of the multi-GPU jobs (by a hash of the job id) are elastic PyTorchJobs: "
        "1-GPU Workers, minimum half, maximum all (bench/replay/elastic_jobs.py)",
    )
    parser.add_argument(
        "--declare-checkpoints",
        action="store_true",
        help="issue 48: every job declares kubesim's checkpoint interval (jobdash.io/checkpoint-every), so "
        "victims are chosen by the work since their last checkpoint; without it the planner is checkpoint-blind "
        "(not with --checkpointing)",
    )
    parser.add_argument(
        "--checkpointing",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="issue 48: this share of the jobs (by a hash of the job id, as --elastic picks) checkpoints every "
        "--checkpoint-every seconds (kubesim.io/checkpoint-seconds set: kubesim keeps their work and annotates "
        "jobdash.io/checkpointed-at), the others never (a stop loses the whole run); they declare it to the "
        "planner (victims, lent nodes) and leave a notice at their next checkpoint; label +ckpt<SHARE> "
        "(bench/replay/checkpoints.py). Without it every job keeps its work at kubesim's default, as before",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=float,
        default=DEFAULT_CHECKPOINT_S,
        metavar="SECONDS",
        help="with --checkpointing: the checkpointing jobs' interval (default 1800)",
    )
    parser.add_argument(
        "--checkpoint-blind",
        action="store_true",
        help="with --checkpointing: the same jobs checkpoint, the planner is told nothing (victims by the run "
        "alone, lent nodes by the bound alone, notices last their whole time); label +ckpt<SHARE>-blind",
    )
    parser.add_argument(
        "--defrag",
        type=float,
        metavar="GPU_HOURS",
        help="issue 48: moves (queueing/defrag.py, JOBDASH_DEFRAG): a gang waiting on scattered GPUs may move "
        "running jobs that checkpoint, at most GPU_HOURS lost by the movers of one gang (JOBDASH_DEFRAG_MAX_LOST_"
        "GPU_HOURS), a job at most once an hour; label +defrag<GPU_HOURS>",
    )
    parser.add_argument(
        "--defrag-movers",
        type=int,
        default=8,
        metavar="N",
        help="with --defrag: the most jobs moved for one gang (JOBDASH_DEFRAG_MAX_MOVERS, default 8)",
    )
    parser.add_argument(
        "--clusters",
        type=int,
        default=0,
        metavar="N",
        help="issue 49: the nodes split into N clusters of whole racks, contiguous, about equal GPUs (each node "
        "labelled jobdash.io/cluster: c0..c<N-1>; bench/replay/multi_cluster.py); every gang inside one; quotas "
        "stay jobdash-wide; label +c<N>. Pinned placement only, without --lent or --elastic",
    )
    parser.add_argument(
        "--dispatch",
        choices=DISPATCH_MODES,
        default=PLAN,
        help="with --clusters: plan (one plan over every cluster, the default) or first-admits (the MultiKueue "
        "yardstick: a planner per cluster, the clusters in turn each cycle, the first to admit a job wins it; "
        "label +c<N>-first-admits)",
    )
    parser.add_argument(
        "--lose-cluster",
        metavar="NAME",
        help="issue 49: with --clusters, this cluster (c0..c<N-1>) falls silent for --lose-for seconds from "
        "--lose-at: Lost after 60 s (nothing new there), its released jobs planned again after 300 s more, its "
        "running jobs that checkpoint after 1800 s more, their copies deleted when it answers again "
        "(bench/replay/lost_cluster.py); label +lose-<NAME>[at=..,for=..]",
    )
    parser.add_argument(
        "--lose-at",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="with --lose-cluster: simulated seconds after the replay's start (--from; after --compress, so "
        "5 days in is 432000 whatever K) when the cluster falls silent",
    )
    parser.add_argument(
        "--lose-for",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="with --lose-cluster: how long it stays silent (default 3600)",
    )
    parser.add_argument("--label", help="name for these results (default: the policy name)")
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="for comparison: released pods are not held and the cluster's scheduler alone places them "
        "(default: pinned, as the dispatcher: gated pods sent to their planned nodes)",
    )
    parser.add_argument("--tick", type=float, help="cycle tick in seconds (default: 10 for seed, 2 otherwise)")
    parser.add_argument(
        "--eta-oracle",
        action="store_true",
        help="issue 38: each forecasting cycle also forecasts knowing every run time (bench/replay/true_forecast.py), "
        "the yardstick of the likely start's error (costs a second forecast per hour)",
    )
    parser.add_argument(
        "--forecasts-out",
        action="store_true",
        help="issue 47: also write every forecast given (jobs/<label>.forecasts.json.gz), for calibration_log",
    )
    parser.add_argument(
        "--calibration-bootstrap",
        metavar="LOG",
        help="issue 47: the calibrator starts from what a new leader reads of that replay's starts (its last 2000 "
        "jobs started, first forecasts), as on another month; label +boot",
    )
    parser.add_argument("--parallel", type=int, default=1, help="replays at once (one process each)")
    parser.add_argument("--progress", action="store_true", help="a line on stderr per simulated day")
    parser.add_argument("--report", action="store_true", help="write bench/results/trace_replay.md and plots")
    parser.add_argument("--report-only", action="store_true", help="only the report, from var/trace_replay/")
    parser.add_argument(
        "--report-tide",
        action="store_true",
        help="only the report's section on lent nodes (issue 35), from the summaries of every window",
    )
    parser.add_argument(
        "--report-calibration",
        action="store_true",
        help="only the report's blocks on start-range calibration: per window and load (issue 38, the "
        "runs with --eta-oracle), months replayed from a bootstrap, and per month with its episodes "
        "(issue 47, every run); from the summaries under --cache-dir's <window>/<label>.json",
    )
    parser.add_argument(
        "--cache-dir", default=str(CACHE), help="where the full summaries go (default var/trace_replay)"
    )
    parser.add_argument("--results-dir", default=str(ROOT / "bench" / "results"), help="where the report goes")
    return parser
