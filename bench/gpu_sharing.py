"""Benchmark: GPU sharing by memory vs whole-card allocation on the same nodes (issue 34).

    python -m bench.gpu_sharing                       # October's busiest day, then November's
    python -m bench.gpu_sharing --months 2017-10      # one day only

For each month: the day with the most Philly jobs submitted, its training gangs on whole
GPUs plus a seeded day of notebook and evaluation pods (bench/sharing_workload.py), on a
cluster sized by the rule there; played twice in virtual time (bench/sharing_sim.py),
once with the shared nodes sharing their cards by memory (the pods ask
``aliyun.com/gpu-mem``) and once allocating whole cards (the pods ask ``nvidia.com/gpu: 1``).
A table per day on stderr, then one JSON line.  bench/results/gpu_sharing.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import replace

from bench.replay.trace import iso
from bench.sharing_sim import Simulation
from bench.sharing_workload import DAY, EVALS, NOTEBOOKS, busiest_day, pod_jobs, size_cluster, training_jobs

FIRST_POD_ID = 1_000_000  # above every Philly row number


def run_day(month: str, seed: int, tick: float, drain_days: float, dedicated: bool, pod_scale: float = 1.0) -> dict:
    """Both runs of one day.  ``pod_scale``: the pods arrive that many times as often, on
    the cluster sized for the stated rates (to find what the shared nodes hold at most)."""
    day = busiest_day(month)
    training = training_jobs(day)
    cluster = size_cluster(training, pod_jobs(day, seed, FIRST_POD_ID), day, dedicated)
    mixes = tuple(replace(mix, rate_per_h=mix.rate_per_h * pod_scale) for mix in (NOTEBOOKS, EVALS))
    pods = pod_jobs(day, seed, FIRST_POD_ID, mixes)
    jobs = training + pods
    runs = {}
    for sharing in (False, True):
        simulation = Simulation(jobs, cluster, sharing, tick)
        runs["sharing" if sharing else "whole_card"] = simulation.run((day, day + DAY), day + (1 + drain_days) * DAY)
        print(f"# {month} dedicated={dedicated} sharing={sharing}: {runs}", file=sys.stderr)
    return {
        "month": month,
        "shared_nodes_dedicated_to_pods": dedicated,
        "pod_scale": pod_scale,
        "day": iso(day)[:10],
        "training_jobs": len(training),
        "notebooks": sum(1 for job in pods if job.kind == "notebook"),
        "evals": sum(1 for job in pods if job.kind == "eval"),
        "cluster": {"whole_nodes": cluster.whole, "shared_nodes": cluster.shared, "cards_per_node": cluster.cards},
        "cluster_card_mib": cluster.card_mib,
        **runs,
    }


def table(result: dict) -> str:
    whole, shared = result["whole_card"], result["sharing"]
    rows = [
        ("running at once, avg: notebook+eval pods", whole["running_avg"]["pods"], shared["running_avg"]["pods"]),
        ("  peak notebook+eval pods", whole["running_peak"]["pods"], shared["running_peak"]["pods"]),
        ("running at once, avg: training jobs", whole["running_avg"]["training"], shared["running_avg"]["training"]),
        ("  peak training jobs", whole["running_peak"]["training"], shared["running_peak"]["training"]),
        (
            "GPU memory idle on allocated cards, avg GiB",
            *(r["idle_gib_on_allocated_cards_avg"] for r in (whole, shared)),
        ),
        ("empty cards, avg (all nodes)", whole["empty_cards_avg"], shared["empty_cards_avg"]),
        ("empty cards, avg (shared nodes)", *(r["empty_cards_on_shared_nodes_avg"] for r in (whole, shared))),
    ]
    for kind in ("notebook", "eval", "training"):
        for stat in ("avg", "p95"):
            rows.append((f"queueing {kind}, {stat} s", whole["queue_s"][kind][stat], shared["queue_s"][kind][stat]))
        rows.append((f"  {kind} never started", *(r["queue_s"][kind]["never_started"] for r in (whole, shared))))
    rows += [
        ("pods released that could not start on their card", whole["card_violations"], shared["card_violations"]),
        ("plan() cycles", whole["cycles"], shared["cycles"]),
        (
            "wall s (of which plan s)",
            f"{whole['wall_s']} ({whole['plan_s']})",
            f"{shared['wall_s']} ({shared['plan_s']})",
        ),
        ("CPU s", whole["cpu_s"], shared["cpu_s"]),
    ]
    lines = ["| | whole-card | sharing |", "|---|---:|---:|"]
    lines += [f"| {name} | {a} | {b} |" for name, a, b in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--months", nargs="+", default=["2017-10", "2017-11"], help="tune on the first, check on the rest"
    )
    parser.add_argument("--seed", type=int, default=1, help="the notebook and eval pods' seed")
    parser.add_argument("--tick", type=float, default=10.0, help="virtual seconds between cycles")
    parser.add_argument("--drain-days", type=float, default=2.0, help="play on after the day until all started")
    parser.add_argument(
        "--pools",
        choices=("open", "dedicated", "both"),
        default="both",
        help="may training use the shared nodes' cards",
    )
    parser.add_argument("--pod-scale", type=float, default=1.0, help="pods arrive this many times as often")
    args = parser.parse_args()
    pools = {"open": [False], "dedicated": [True], "both": [False, True]}[args.pools]
    days = [
        run_day(month, args.seed, args.tick, args.drain_days, dedicated, args.pod_scale)
        for month in args.months
        for dedicated in pools
    ]
    for result in days:
        pool = "shared nodes dedicated to the pods" if result["shared_nodes_dedicated_to_pods"] else "open nodes"
        scale = f", pods x{result['pod_scale']:g}" if result["pod_scale"] != 1 else ""
        print(f"\n{result['day']}, {pool}{scale}: {result['cluster']}\n{table(result)}", file=sys.stderr)
    violations = sum(result[run]["card_violations"] for result in days for run in ("whole_card", "sharing"))
    report = {
        "days": days,
        "pods": {mix.kind: mix.__dict__ for mix in (NOTEBOOKS, EVALS)},
        "card_violations": violations,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0]},
    }
    print(json.dumps(report))
    if violations:
        sys.exit(f"{violations} pods released that could not start on their card")


if __name__ == "__main__":
    main()
