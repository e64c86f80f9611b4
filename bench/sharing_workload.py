"""The GPU-sharing benchmark's input: a day of Philly training gangs, a seeded day of
notebook and evaluation pods, and the cluster they share (bench/gpu_sharing.py runs it).

- Training: every Philly row submitted on the chosen day, mapped as bench/core_planner.py
  and ../shared/traces/README.md map it: g GPUs -> ceil(g/8) Workers of min(g, 8) whole
  GPUs, 12 CPUs and 96 GiB per GPU, in the namespace of its VC.
- Notebooks and evaluations: Poisson arrivals over the same day, each one pod asking
  ``memory`` MiB of one card (1, 2, 4, 8 or 16 GiB; 16 GiB is the whole 16,276 MiB card,
  since a "16 GB" card reports less than 16 GiB), 2 CPUs and 8 GiB of RAM, and running a
  lognormal duration.  In the sharing run the pod asks ``aliyun.com/gpu-mem`` MiB, in the
  whole-card run ``nvidia.com/gpu: 1``.
- Cluster: ``whole`` nodes of 8 whole GPUs and ``shared`` nodes of 8 cards that share by
  memory in the sharing run and allocate whole cards in the whole-card run; every card has
  16,276 MiB (a 16 GB V100), every node 96 CPUs and 768 GiB as in the Philly mapping.
  Training gangs never use a node that shares (they ask whole GPUs), so in the sharing run
  they have the whole nodes only, while in the whole-card run any pod may use any node.
  With ``dedicated`` the shared nodes are the pods' pool in both runs (labelled and
  tainted, the pods select and tolerate them): the runs then differ in sharing alone.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from functools import cache

from bench.replay.trace import DEFAULT_TRACE, load_trace, parse_time
from queueing import Node, PendingJob, PodSet, Taint, Workload
from queueing.cards import CardPod, SharedCards

GI = 2**30
CARD_MIB = 16_276
CARDS = 8
GPU = "nvidia.com/gpu"
GPU_MEM = "aliyun.com/gpu-mem"
GPU_COUNT = "aliyun.com/gpu-count"
DAY = 86_400.0
MEMORY_GIB = (1, 2, 4, 8, 16)
POD_CPU = 2_000
POD_RAM = 8 * GI
NODE_ALLOCATABLE = {"cpu": 96_000, "memory": 768 * GI, "pods": 110}
# Sizing: the day's training alone keeps TRAINING_LOAD of the whole nodes' GPUs busy on
# average (were each job started at its submission), and the pods alone, one whole card
# each, ask POD_LOAD of the shared nodes' cards on average.
TRAINING_LOAD = 0.9
POD_LOAD = 1.2
POOL = "jobdash.io/pool"
POOL_TAINT = Taint(POOL, "interactive", "NoSchedule")


@dataclass(frozen=True)
class PodMix:
    """One kind of single-pod job: Poisson arrivals at ``rate_per_h``, durations lognormal
    with median ``median_s`` and shape ``sigma``, capped at ``cap_s``, GPU memory drawn from
    MEMORY_GIB with ``weights``."""

    kind: str
    rate_per_h: float
    median_s: float
    sigma: float
    cap_s: float
    weights: tuple[float, ...]


NOTEBOOKS = PodMix("notebook", 30.0, 5_400.0, 0.8, 12 * 3_600.0, (0.15, 0.25, 0.30, 0.20, 0.10))
EVALS = PodMix("eval", 60.0, 600.0, 1.0, 2 * 3_600.0, (0.25, 0.30, 0.25, 0.15, 0.05))


@dataclass(frozen=True, slots=True)
class SimJob:
    """A job of the benchmark: ``kind`` training (``gpus`` whole GPUs) or notebook/eval
    (one pod of ``memory`` MiB on one card)."""

    id: int
    kind: str
    namespace: str
    submit: float
    duration: float
    gpus: int = 0
    memory: int = 0


@dataclass(frozen=True)
class Cluster:
    whole: int
    shared: int
    cards: int = CARDS
    card_mib: int = CARD_MIB
    dedicated: bool = False  # the shared nodes run the pods only, in both runs

    def names(self) -> list[tuple[str, bool]]:
        """(node name, shares by memory in the sharing run) for every node."""
        return [(f"whole-{i:03d}", False) for i in range(self.whole)] + [
            (f"shared-{i:03d}", True) for i in range(self.shared)
        ]


def busiest_day(month: str) -> float:
    """The start (epoch s, UTC) of the day of ``month`` ("2017-10") with the most jobs
    submitted (the earlier of equals)."""
    year, number = (int(part) for part in month.split("-"))
    start = parse_time(f"{month}-01")
    end = parse_time(f"{year + number // 12}-{number % 12 + 1:02d}-01")
    counts = Counter(int((job.submit - start) // DAY) for job in load_trace(DEFAULT_TRACE, start, end))
    return start + min(counts, key=lambda day: (-counts[day], day)) * DAY


def training_jobs(day_start: float) -> list[SimJob]:
    return [
        SimJob(job.id, "training", job.vc, job.submit, job.duration, gpus=job.gpus)
        for job in load_trace(DEFAULT_TRACE, day_start, day_start + DAY)
    ]


def memory_mib(gib: int, card_mib: int = CARD_MIB) -> int:
    return min(gib * 1024, card_mib)


def pod_jobs(
    day_start: float, seed: int, first_id: int, mixes: tuple[PodMix, ...] = (NOTEBOOKS, EVALS)
) -> list[SimJob]:
    rng = random.Random(seed)
    jobs = []
    for mix in mixes:
        at = day_start
        while True:
            at += rng.expovariate(mix.rate_per_h / 3_600.0)
            if at >= day_start + DAY:
                break
            duration = min(mix.median_s * math.exp(rng.gauss(0.0, mix.sigma)), mix.cap_s)
            gib = rng.choices(MEMORY_GIB, mix.weights)[0]
            jobs.append(SimJob(0, mix.kind, f"{mix.kind}s", at, round(duration, 1), memory=memory_mib(gib)))
    jobs.sort(key=lambda job: job.submit)
    return [
        SimJob(first_id + n, j.kind, j.namespace, j.submit, j.duration, memory=j.memory) for n, j in enumerate(jobs)
    ]


def busy_gpus(jobs: list[SimJob], day_start: float) -> float:
    """Average GPUs the jobs would hold over the day if each started at its submission
    (a notebook or eval pod counted as one whole card)."""
    held = sum((job.gpus or 1) * (min(job.submit + job.duration, day_start + DAY) - job.submit) for job in jobs)
    return held / DAY


def size_cluster(training: list[SimJob], pods: list[SimJob], day_start: float, dedicated: bool = False) -> Cluster:
    whole = math.ceil(busy_gpus(training, day_start) / CARDS / TRAINING_LOAD)
    shared = max(1, round(busy_gpus(pods, day_start) / CARDS / POD_LOAD))
    return Cluster(whole, shared, dedicated=dedicated)


# -- what the planner sees ------------------------------------------------------------------


@cache
def workload(kind: str, gpus: int, memory: int, sharing: bool, dedicated: bool) -> Workload:
    """One Workload per shape, shared by every job of that shape."""
    if kind == "training":
        per_pod = min(gpus, CARDS)
        requests = {"cpu": 12_000 * per_pod, "memory": 96 * GI * per_pod, GPU: per_pod}
        pod_set = PodSet("Worker", math.ceil(gpus / CARDS), requests, {GPU: per_pod})
        return Workload("TFJob", "kubeflow.org/v1", f"train{gpus}", None, (pod_set,))
    device = {GPU_MEM: memory} if sharing else {GPU: 1}
    # With a dedicated pool the pods select and tolerate the shared nodes.
    selector = {POOL: "interactive"} if dedicated else {}
    tolerations = ({"key": POOL, "operator": "Exists"},) if dedicated else ()
    pod_set = PodSet("Worker", 1, {"cpu": POD_CPU, "memory": POD_RAM, **device}, device, selector, tolerations)
    return Workload("Job", "batch/v1", f"{kind}{memory}", None, (pod_set,))


def pending_job(job: SimJob, sharing: bool, dedicated: bool = False) -> PendingJob:
    shape = workload(job.kind, job.gpus, job.memory, sharing, dedicated)
    return PendingJob(job.id, job.namespace, 0, job.submit, shape, expected_duration=job.duration)


def node(
    cluster: Cluster,
    name: str,
    shared: bool,
    sharing: bool,
    allocated: dict[str, int],
    card_pods: list[tuple[int, int]],
) -> Node:
    """A node as the planner sees it: ``shared``, one of the cluster's shared nodes, shares
    its cards by memory in the ``sharing`` run; ``card_pods``: (MiB, card) of its pods then."""
    allocatable = dict(NODE_ALLOCATABLE)
    pooled = shared and cluster.dedicated
    labels = {POOL: "interactive"} if pooled else {}
    taints = (POOL_TAINT,) if pooled else ()
    if shared and sharing:
        allocatable[GPU_MEM] = cluster.cards * cluster.card_mib
        allocatable[GPU_COUNT] = cluster.cards
        cards = SharedCards.even(cluster.cards, cluster.card_mib, [CardPod(mib, card) for mib, card in card_pods])
        return Node(name, allocatable, allocated, labels, taints, cards=cards)
    allocatable[GPU] = cluster.cards
    return Node(name, allocatable, allocated, labels, taints)
