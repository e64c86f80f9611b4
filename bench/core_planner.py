"""Benchmark of the admission core: one planning cycle over large synthetic snapshots.

    python -m bench.core_planner            # every scenario, then one JSON line
    python -m bench.core_planner --quick    # the 10k-job scenarios only
    python -m bench.core_planner --compare-shared 0.1   # per-card fit cost (issue 34)

Job shapes and durations are drawn from the Philly trace (../shared/traces,
mapped as its README says: g GPUs -> ceil(g/8) Workers of min(g, 8) GPUs,
12 CPUs and 96 GiB per GPU), plus 10% CPU-only PS/Worker jobs; the rest
(namespaces, quotas, node fill, priorities, submit times) is synthetic and
seeded.  Each scenario runs in a fresh subprocess so its peak RSS is its
own; snapshot construction is timed separately from the cycle.  Also
measures the packing heuristic: how many whole-node gangs still fit after a
stream of small jobs, under best, first and worst fit.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from bench.sharing_workload import CARD_MIB, CARDS, GPU_COUNT, GPU_MEM, MEMORY_GIB, NOTEBOOKS, memory_mib
from queueing import (
    InFlightJob,
    NamespaceQuota,
    Node,
    PendingJob,
    PodSet,
    RunningJob,
    Snapshot,
    Taint,
    Workload,
    node_views,
    plan,
)
from queueing.cards import CardPod, SharedCards
from queueing.fit import NodePool
from queueing.planner import DEFAULT_ETA_HORIZON_S
from queueing.snapshot import gang_of, node_totals

GI = 2**30
TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly_2017-10-01_11-30_11vc.csv"
NOW = 1_700_000_000.0
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SIZES = [
    (jobs, namespaces, nodes) for jobs in (10_000, 100_000) for namespaces in (100, 1_000) for nodes in (100, 1_000)
]


def trace_shapes(limit: int = 70_000) -> list[tuple[int, float]]:
    """(GPUs, duration s) per Philly job; a synthetic stand-in if the trace is absent."""
    if TRACE.exists():
        with TRACE.open() as handle:
            rows = [(int(row["num_gpus"]), float(row["duration"])) for row in csv.DictReader(handle)]
        return [row for row in rows if row[0] > 0 and row[1] > 0][:limit]
    rng = random.Random(7)
    return [(rng.choice([1] * 46 + [2, 4, 8]), rng.lognormvariate(7.3, 2.0)) for _ in range(limit)]


class Shapes:
    """One Workload per distinct shape, shared by every job of that shape (as a dispatcher
    interning parsed manifests would); jobs differ in namespace, priority, times."""

    def __init__(self, share: bool = True) -> None:
        self.cache: dict[tuple, Workload] = {}
        self.share = share  # False: a new Workload per job, as parsing each manifest gives

    def gpu_job(self, gpus: int) -> Workload:
        key = ("gpu", gpus)
        if key not in self.cache or not self.share:
            per_pod = min(gpus, 8)
            requests = {"cpu": 12_000 * per_pod, "memory": 96 * GI * per_pod, "nvidia.com/gpu": per_pod}
            limits = {"memory": 96 * GI * per_pod, "nvidia.com/gpu": per_pod}
            worker = PodSet("Worker", math.ceil(gpus / 8), requests, limits, tolerations=(GPU_TOLERATION,))
            self.cache[key] = Workload("TFJob", "kubeflow.org/v1", f"gpu{gpus}", None, (worker,))
        return self.cache[key]

    def cpu_job(self, workers: int) -> Workload:
        key = ("cpu", workers)
        if key not in self.cache or not self.share:
            ps = PodSet("PS", 1, {"cpu": 4_000, "memory": 16 * GI}, {"memory": 16 * GI}, {"pool": "cpu"})
            worker = PodSet("Worker", workers, {"cpu": 8_000, "memory": 32 * GI}, {"memory": 32 * GI}, {"pool": "cpu"})
            self.cache[key] = Workload("TFJob", "kubeflow.org/v1", f"cpu{workers}", None, (ps, worker))
        return self.cache[key]

    def shared_job(self, mebibytes: int) -> Workload:
        """One pod asking ``mebibytes`` of one GPU shared by memory (a notebook-sized job)."""
        key = ("shared", mebibytes)
        if key not in self.cache or not self.share:
            device = {GPU_MEM: mebibytes}
            requests = {"cpu": 2_000, "memory": 8 * GI, **device}
            pod = PodSet("Worker", 1, requests, device, tolerations=(GPU_TOLERATION,))
            self.cache[key] = Workload("TFJob", "kubeflow.org/v1", f"shared{mebibytes}", None, (pod,))
        return self.cache[key]


def build_world(
    jobs: int,
    namespaces: int,
    nodes: int,
    node_fit: bool,
    seed: int = 1,
    share_workloads: bool = True,
    shared_share: float = 0.0,
    opaque_cards: bool = False,
) -> Snapshot:
    rng = random.Random(seed)
    shapes = Shapes(share_workloads)
    trace = trace_shapes()
    names = [f"team-{i:04d}" for i in range(namespaces)]
    weights = [1 / (rank + 1) ** 0.8 for rank in range(namespaces)]  # a few big tenants, a long tail

    # Nodes: 80% GPU (8 GPUs, tainted), 20% CPU-only (label pool=cpu); ~75% of GPUs busy.
    node_list, running, used = [], [], {name: {} for name in names}
    running_id = 10_000_000
    for number in range(nodes):
        if number % 5 == 4:
            allocatable = {"cpu": 64_000, "memory": 256 * GI, "pods": 110}
            busy_workers = rng.choice([0, 2, 4, 6, 7])
            allocated = {"cpu": 8_000 * busy_workers, "memory": 32 * GI * busy_workers, "pods": busy_workers}
            labels, taints, per_job = {"pool": "cpu"}, (), [shapes.cpu_job(1)] * (busy_workers // 2)
        else:
            allocatable = {"cpu": 96_000, "memory": 768 * GI, "nvidia.com/gpu": 8, "pods": 110}
            busy = rng.choice([8, 8, 8, 7, 6, 6, 5, 4, 2, 0])
            allocated = {"cpu": 12_000 * busy, "memory": 96 * GI * busy, "nvidia.com/gpu": busy, "pods": busy}
            labels, taints, per_job = {"pool": "gpu"}, (GPU_TAINT,), [shapes.gpu_job(1)] * busy
        node_list.append(
            Node(f"node-{number:04d}", allocatable, allocated, labels, taints, unschedulable=number % 97 == 96)
        )
        for workload in per_job:
            namespace = rng.choices(names, weights)[0]
            running.append(RunningJob(running_id, namespace, workload, NOW - 600, NOW + rng.choice(trace)[1]))
            running_id += 1
            for key, amount in workload.quota_demand().items():
                used[namespace][key] = used[namespace].get(key, 0) + amount

    # Quotas: the cluster's GPUs oversubscribed 1.5x, shared by weight; cpu/memory/pods/count too.
    total_gpus = sum(node.allocatable.get("nvidia.com/gpu", 0) for node in node_list)
    quotas = {}
    for name, weight in zip(names, weights, strict=False):
        gpus = max(8, round(1.5 * total_gpus * weight / sum(weights)))
        hard = {
            "requests.nvidia.com/gpu": gpus,
            "requests.cpu": gpus * 12_000 + 64_000,
            "requests.memory": (gpus * 96 + 256) * GI,
            "limits.memory": (gpus * 96 + 512) * GI,
            "pods": 4 * gpus + 50,
            "count/tfjobs.kubeflow.org": 200,
        }
        quotas[name] = NamespaceQuota(name, hard, used[name], weight=1 + (len(name) % 3 == 0))

    # In-flight: one job in ~2% of namespaces, planned on a GPU node.
    gpu_nodes = [node.name for node in node_list if "nvidia.com/gpu" in node.allocatable and not node.unschedulable]
    in_flight = []
    for index, name in enumerate(names[::50]):
        workload = shapes.gpu_job(1)
        in_flight.append(
            InFlightJob(
                20_000_000 + index,
                name,
                workload,
                (("Worker", 0, rng.choice(gpu_nodes)),),
                workload.quota_demand(),
                NOW - 5,
            )
        )

    pending = []
    for job_id in range(1, jobs + 1):
        gpus, duration = rng.choice(trace)
        workload = shapes.cpu_job(rng.choice([2, 4, 8])) if rng.random() < 0.1 else shapes.gpu_job(gpus)
        backoff = NOW + 120 if rng.random() < 0.01 else None
        pending.append(
            PendingJob(
                job_id,
                rng.choices(names, weights)[0],
                rng.choice([0, 0, 0, 0, 1, 2, 3]),
                NOW - rng.uniform(0, 2 * 86400),
                workload,
                attempts=1 if backoff else 0,
                backoff_until=backoff,
                expected_duration=duration,
            )
        )
    if shared_share:
        node_list, pending = share_gpus(node_list, pending, shapes, shared_share, seed, opaque_cards)
    return Snapshot(NOW, tuple(pending), tuple(in_flight), tuple(running), quotas, tuple(node_list), node_fit)


def share_gpus(
    nodes: list[Node], pending: list[PendingJob], shapes: Shapes, share: float, seed: int, opaque: bool = False
) -> tuple[list[Node], list[PendingJob]]:
    """A ``share`` of the GPU nodes made gpushare nodes (8 cards of 16,276 MiB, each busy
    GPU a card holding one pod's share) and a ``share`` of the pending jobs made one pod
    asking a share of a card (memory as bench/sharing_workload.py's notebooks).  Its own
    random stream, so the rest of the world is the unchanged scenario's.  ``opaque``: the
    nodes carry no cards, so the memory is one number per node, as before per-card fit
    (what the per-card check itself costs is the difference)."""
    rng = random.Random(seed + 1_000_003)
    shared_nodes = []
    for node in nodes:
        if "nvidia.com/gpu" not in node.allocatable or rng.random() >= share:
            shared_nodes.append(node)
            continue
        busy = node.allocated.get("nvidia.com/gpu", 0)
        pods = [CardPod(memory_mib(rng.choices(MEMORY_GIB, NOTEBOOKS.weights)[0]), card) for card in range(busy)]
        allocatable = {k: v for k, v in node.allocatable.items() if k != "nvidia.com/gpu"}
        allocatable.update({GPU_MEM: CARDS * CARD_MIB, GPU_COUNT: CARDS})
        allocated = {k: v for k, v in node.allocated.items() if k != "nvidia.com/gpu"}
        allocated[GPU_MEM] = sum(pod.memory for pod in pods)
        cards = None if opaque else SharedCards.even(CARDS, CARD_MIB, pods)
        shared_nodes.append(
            Node(node.name, allocatable, allocated, node.labels, node.taints, node.unschedulable, cards=cards)
        )
    shared_pending = []
    for job in pending:
        if rng.random() < share:
            workload = shapes.shared_job(memory_mib(rng.choices(MEMORY_GIB, NOTEBOOKS.weights)[0]))
            job = PendingJob(
                job.id,
                job.namespace,
                job.priority,
                job.submitted_at,
                workload,
                attempts=job.attempts,
                backoff_until=job.backoff_until,
                expected_duration=job.expected_duration,
            )
        shared_pending.append(job)
    return shared_nodes, shared_pending


def run_scenario(
    jobs: int,
    namespaces: int,
    nodes: int,
    node_fit: bool,
    policy: str = "priority",
    horizon: float | None = DEFAULT_ETA_HORIZON_S,
    repeats: int = 5,
    share: bool = True,
    shared_share: float = 0.0,
    opaque_cards: bool = False,
) -> dict:
    started = time.perf_counter()
    snapshot = build_world(
        jobs, namespaces, nodes, node_fit, share_workloads=share, shared_share=shared_share, opaque_cards=opaque_cards
    )
    build_s = time.perf_counter() - started
    gc.collect()
    times, cpu_times, result = [], [], None
    for _ in range(repeats):
        # A dispatcher builds its Node objects anew each cycle: the pool's base starts cold.
        node_views._LAST.clear()
        started, cpu_started = time.perf_counter(), time.process_time()
        result = plan(snapshot, policy, eta_horizon_s=horizon)
        times.append(time.perf_counter() - started)
        cpu_times.append(time.process_time() - cpu_started)
    tracemalloc.start()
    plan(snapshot, policy, eta_horizon_s=horizon)
    _, cycle_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    cycle_s = statistics.median(times)
    estimated = sum(1 for status in result.pending.values() if status.eta is not None)
    return {
        "jobs": jobs,
        "namespaces": namespaces,
        "nodes": nodes,
        "node_fit": node_fit,
        "cycle_s": round(cycle_s, 4),
        "jobs_per_s": round(jobs / cycle_s),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cycle_min_s": round(min(times), 4),
        "cycle_max_s": round(max(times), 4),
        # CPU time of this process: less inflated than wall time when other processes compete for the cores.
        "cycle_cpu_s": round(statistics.median(cpu_times), 4),
        "cycle_peak_mb": round(cycle_peak / 2**20, 1),
        "build_s": round(build_s, 2),
        "admitted": len(result.admissions),
        "with_eta": estimated,
        "eta_horizon_s": horizon,
        "policy": policy,
        "node_reservations": result.stats.get("node_reservations", 0),
        "shared_workloads": share,
        "shared_share": shared_share,
        "opaque_cards": opaque_cards,
        "shared_nodes": sum(1 for node in snapshot.nodes if node.cards is not None),
        "shared_jobs": sum(1 for job in snapshot.pending if any(name == GPU_MEM for name, _ in job.gang[0].requests)),
        "admitted_on_cards": len(result.cards),
        "load_avg_1m": round(os.getloadavg()[0], 2),  # other processes on this shared machine
    }


def packing(
    strategy: str, seed: int, nodes: int = 64, steps: int = 600, lifetime: int = 25, utilisation: float = 0.8
) -> float:
    """Whole free nodes (room for an 8-GPU pod) left by a churning stream of 1/2/4-GPU
    jobs kept at 80% of the GPUs: each step every job ends with probability 1/25 and
    new jobs are placed with ``strategy`` until the target is met; sampled every 10
    steps after a warm-up.  The ideal is 20% of the nodes."""
    rng = random.Random(seed)
    shapes = Shapes()
    running: list[tuple[int, int]] = []  # (node number, GPUs)
    samples = []
    for step in range(steps):
        running = [job for job in running if rng.random() > 1 / lifetime]
        used = [0] * nodes
        for number, gpus in running:
            used[number] += gpus
        pool = NodePool(
            [
                Node(
                    f"n{i:02d}",
                    {"cpu": 96_000, "memory": 768 * GI, "nvidia.com/gpu": 8, "pods": 110},
                    {"nvidia.com/gpu": g, "cpu": 12_000 * g, "memory": 96 * GI * g, "pods": g},
                )
                for i, g in enumerate(used)
            ],
            strategy=strategy,
        )
        total = sum(used)
        while total < utilisation * 8 * nodes:
            gpus = rng.choice([1, 1, 1, 1, 2, 2, 4])
            gang = gang_of(shapes.gpu_job(gpus))
            placed = pool.place(gang, node_totals(gang))
            if not isinstance(placed, list):
                break
            running.append((placed[0][1], gpus))
            total += gpus
        if step >= 100 and step % 10 == 0:
            samples.append(sum(1 for free in pool.free if free["nvidia.com/gpu"] == 8))
    return statistics.mean(samples)


def packing_summary(seeds: int = 10) -> dict:
    summary = {}
    for strategy in ("best", "first", "worst"):
        values = [packing(strategy, seed) for seed in range(seeds)]
        summary[strategy] = {
            "whole_free_nodes_mean": round(statistics.mean(values), 2),
            "min": round(min(values), 2),
            "max": round(max(values), 2),
            "ideal": 64 * 0.2,
        }
    return summary


def _subprocess(jobs: int, namespaces: int, nodes: int, node_fit: bool, policy: str, horizon: str, *extra: str) -> dict:
    command = [
        sys.executable,
        "-m",
        "bench.core_planner",
        "--policy",
        policy,
        "--horizon",
        horizon,
        *extra,
        "--one",
        str(jobs),
        str(namespaces),
        str(nodes),
        "1" if node_fit else "0",
    ]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    scenario = json.loads(output.strip().splitlines()[-1])
    print(f"# {scenario}", file=sys.stderr)
    return scenario


def compare_shared(share: float, policy: str, horizon: str, rounds: int = 3) -> dict:
    """The per-card fit cost: the target scenario as it is and with ``share`` of its GPU
    nodes and jobs on shared cards, each in a fresh subprocess, alternating so both meet
    the same load; the median over the subprocesses of each one's median cycle.  A third
    arm, the shared world without cards, tells the per-card check from the extra work of
    the jobs the shared world admits."""
    shared = ("--shared-share", str(share))
    arms = {"unchanged": (), "shared": shared, "shared_without_cards": (*shared, "--opaque-cards")}
    runs: dict[str, list[dict]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, extra in arms.items():
            runs[name].append(_subprocess(100_000, 1_000, 1_000, True, policy, horizon, *extra))
    summary: dict = {"share": share, "runs": runs}
    for name, scenarios in runs.items():
        summary[name] = {
            key: statistics.median(scenario[key] for scenario in scenarios) for key in ("cycle_s", "cycle_cpu_s")
        }
    summary["slowdown"] = {
        key: round(summary["shared"][key] / summary["unchanged"][key] - 1, 3) for key in ("cycle_s", "cycle_cpu_s")
    }
    summary["card_check_cost"] = {
        key: round(summary["shared"][key] / summary["shared_without_cards"][key] - 1, 3)
        for key in ("cycle_s", "cycle_cpu_s")
    }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10k-job scenarios only, no packing study")
    parser.add_argument("--one", nargs=4, metavar=("JOBS", "NAMESPACES", "NODES", "NODE_FIT"), help=argparse.SUPPRESS)
    parser.add_argument("--policy", default="priority")
    parser.add_argument("--horizon", default=str(DEFAULT_ETA_HORIZON_S), help="ETA horizon in s, or 'none'")
    parser.add_argument("--unique-workloads", action="store_true", help="one Workload object per job")
    parser.add_argument("--shared-share", type=float, default=0.0, help="share of GPU nodes and jobs on shared cards")
    parser.add_argument(
        "--compare-shared",
        type=float,
        metavar="SHARE",
        help="the target scenario unchanged and with SHARE on shared cards, --rounds subprocesses each, alternating",
    )
    parser.add_argument("--opaque-cards", action="store_true", help="shared nodes without cards (memory as one number)")
    parser.add_argument("--rounds", type=int, default=3, help="subprocesses of each scenario for --compare-shared")
    args = parser.parse_args()
    horizon = None if args.horizon == "none" else float(args.horizon)
    if args.one:
        jobs, namespaces, nodes, node_fit = args.one
        print(
            json.dumps(
                run_scenario(
                    int(jobs),
                    int(namespaces),
                    int(nodes),
                    node_fit == "1",
                    args.policy,
                    horizon,
                    share=not args.unique_workloads,
                    shared_share=args.shared_share,
                    opaque_cards=args.opaque_cards,
                )
            )
        )
        return
    if args.compare_shared is not None:
        print(json.dumps(compare_shared(args.compare_shared, args.policy, args.horizon, args.rounds)))
        return
    scenarios = [
        _subprocess(jobs, namespaces, nodes, node_fit, args.policy, args.horizon)
        for jobs, namespaces, nodes in SIZES
        if not (args.quick and jobs > 10_000)
        for node_fit in (True, False)
    ]
    report: dict = {"scenarios": scenarios}
    if not args.quick:
        # The largest scenario again: without estimates (horizon 0) and with no horizon at all.
        report["eta_horizons"] = [
            _subprocess(100_000, 1_000, 1_000, True, args.policy, value) for value in ("0", "none")
        ]
        report["policies"] = [
            _subprocess(100_000, 1_000, 1_000, True, name, args.horizon) for name in ("seed", "fifo", "fair")
        ]
        # Memory when every job carries its own parsed Workload (nothing shared by the caller).
        report["unique_workloads"] = _subprocess(
            100_000, 1_000, 1_000, True, args.policy, args.horizon, "--unique-workloads"
        )
        report["packing"] = packing_summary()
    report["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
