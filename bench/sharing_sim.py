"""The GPU-sharing benchmark's event loop in virtual time, over ``queueing.plan``.

Every ``tick`` seconds at which something arrived or finished, one ``plan`` over the
waiting jobs and the nodes as the running pods leave them; each admitted pod starts at
once on its planned node and card and holds them until it finishes.  What runs where is
kept by ``CardLedger``, written here apart from ``queueing.cards``: it is the device
plugin's view, so a pod the planner releases onto a card that cannot hold it is caught
(a violation, and the job waits for the next cycle) rather than believed.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from bench.sharing_workload import GPU, GPU_MEM, NODE_ALLOCATABLE, Cluster, SimJob, node, pending_job
from queueing import Node, PendingJob, Snapshot, plan

POD_KINDS = ("notebook", "eval")


class CardLedger:
    """The pods on every card, and the GPU memory they leave idle."""

    def __init__(self, cluster: Cluster, sharing: bool):
        self.card_mib = cluster.card_mib
        self.shares = {name: sharing and shares for name, shares in cluster.names()}
        self.on_shared_node = {name: shares for name, shares in cluster.names()}
        # node -> card -> [(job id, MiB asked)]; a whole-card pod asks the card's memory or less
        self.pods: dict[str, list[list[tuple[int, int]]]] = {
            name: [[] for _ in range(cluster.cards)] for name in self.shares
        }
        self.whole: dict[str, list[bool]] = {name: [False] * cluster.cards for name in self.shares}
        self.idle_mib = 0  # on cards with at least one pod: card memory minus what their pods asked
        self.empty = cluster.cards * len(self.shares)
        self.empty_on_shared_nodes = cluster.cards * cluster.shared

    def _account(self, node: str, card: int, sign: int) -> None:
        pods = self.pods[node][card]
        if pods:
            self.idle_mib += sign * (self.card_mib - sum(mib for _, mib in pods))
        else:
            self.empty += sign
            self.empty_on_shared_nodes += sign * self.on_shared_node[node]

    def _put(self, node: str, card: int, job_id: int, mib: int, whole: bool) -> None:
        self._account(node, card, -1)
        self.pods[node][card].append((job_id, mib))
        self.whole[node][card] = whole
        self._account(node, card, 1)

    def start_shared(self, node: str, card: int, job_id: int, mib: int) -> bool:
        """Put a pod of ``mib`` MiB on ``card``; False (and nothing done) if it cannot go there."""
        cards = self.pods.get(node)
        if cards is None or not self.shares[node] or not 0 <= card < len(cards) or self.whole[node][card]:
            return False
        if sum(asked for _, asked in cards[card]) + mib > self.card_mib:
            return False
        self._put(node, card, job_id, mib, False)
        return True

    def start_whole(self, node: str, job_id: int, count: int, mib: int) -> tuple[int, ...] | None:
        """Give a pod ``count`` empty cards (the lowest numbered, as the device plugin
        does); None (and nothing done) if the node shares by memory or has too few."""
        cards = self.pods.get(node)
        if cards is None or self.shares[node]:
            return None
        empty = [card for card, pods in enumerate(cards) if not pods][:count]
        if len(empty) < count:
            return None
        for card in empty:
            self._put(node, card, job_id, mib, True)
        return tuple(empty)

    def release(self, node: str, cards: tuple[int, ...], job_id: int) -> None:
        """Take one pod of ``job_id`` off each of ``cards``."""
        for card in cards:
            self._account(node, card, -1)
            pods = self.pods[node][card]
            pods.pop(next(n for n, pod in enumerate(pods) if pod[0] == job_id))
            self.whole[node][card] = False
            self._account(node, card, 1)

    def card_pods(self, node: str) -> list[tuple[int, int]]:
        return [(mib, card) for card, pods in enumerate(self.pods[node]) for _, mib in pods]


@dataclass
class _Gauges:
    """Time integrals (and peaks) over the measured window of what runs and what idles."""

    start: float
    end: float
    integrals: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    peaks: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    def hold(self, values: dict[str, float], since: float, until: float) -> None:
        span = min(until, self.end) - max(since, self.start)
        if span > 0:
            for name, value in values.items():
                self.integrals[name] += value * span
                self.peaks[name] = max(self.peaks[name], value)

    def averages(self) -> dict[str, float]:
        return {name: total / (self.end - self.start) for name, total in self.integrals.items()}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(max(1, math.ceil(q / 100 * len(ordered))), len(ordered)) - 1]


class Simulation:
    """One run: ``jobs`` on ``cluster``, sharing by memory on its shared nodes or not."""

    def __init__(
        self, jobs: list[SimJob], cluster: Cluster, sharing: bool, tick: float = 10.0, policy: str = "priority"
    ):
        self.jobs = {job.id: job for job in jobs}
        self.arrivals = sorted(jobs, key=lambda job: (job.submit, job.id))
        self.cluster, self.sharing, self.tick, self.policy = cluster, sharing, tick, policy
        self.ledger = CardLedger(cluster, sharing)
        self.shares = dict(cluster.names())
        self.used: dict[str, Counter] = {name: Counter() for name in self.shares}
        self.nodes: dict[str, Node] = {}
        self.dirty = set(self.shares)
        self.pending: dict[int, PendingJob] = {}
        self.running: dict[int, list[tuple[str, tuple[int, ...], dict[str, int]]]] = {}
        self.finishes: list[tuple[float, int]] = []
        self.started: dict[int, float] = {}
        self.counts: Counter = Counter()  # running jobs by kind
        self.stats: defaultdict[str, float] = defaultdict(float)
        # What a node can hold of each resource, either kind of node (for the over-commit check).
        self.capacity = {**NODE_ALLOCATABLE, GPU: cluster.cards, GPU_MEM: cluster.cards * cluster.card_mib}

    def _node(self, name: str) -> Node:
        if name in self.dirty:
            shared = self.shares[name]
            card_pods = self.ledger.card_pods(name) if shared and self.sharing else []
            self.nodes[name] = node(self.cluster, name, shared, self.sharing, dict(self.used[name]), card_pods)
            self.dirty.discard(name)
        return self.nodes[name]

    def _gauges(self) -> dict[str, float]:
        values = {kind: float(self.counts[kind]) for kind in ("training", *POD_KINDS)}
        values["pods"] = values["notebook"] + values["eval"]
        values["idle_gib"] = self.ledger.idle_mib / 1024
        values["empty_cards"] = self.ledger.empty
        values["empty_cards_shared_nodes"] = self.ledger.empty_on_shared_nodes
        return values

    def _start(
        self,
        job_id: int,
        now: float,
        placement: tuple[tuple[str, int, str], ...],
        cards: tuple[tuple[str, int, tuple[int, ...]], ...] | None,
    ) -> bool:
        """Start every pod of an admitted job on its node and card, or none of them."""
        job = self.jobs[job_id]
        requests = dict(self.pending[job_id].gang[0].requests)
        pods: list[tuple[str, tuple[int, ...], dict[str, int]]] = []
        chosen = {(role, index): on for role, index, on in cards or ()}
        for role, index, name in placement:
            if GPU_MEM in requests:
                on = chosen.get((role, index), ())
                ok = len(on) == 1 and self.ledger.start_shared(name, on[0], job_id, requests[GPU_MEM])
                taken = on if ok else None
            else:
                taken = self.ledger.start_whole(name, job_id, requests[GPU], job.memory or self.cluster.card_mib)
            if taken is None:
                for undo_name, undo_cards, _ in pods:
                    self.ledger.release(undo_name, undo_cards, job_id)
                self.stats["card_violations"] += 1
                return False
            pods.append((name, taken, requests))
        for name, _, pod_requests in pods:
            self.used[name].update(pod_requests)
            self.dirty.add(name)
            if any(self.used[name][key] > self.capacity.get(key, 0) for key in pod_requests):
                self.stats["node_overcommits"] += 1
        self.running[job_id] = pods
        self.started[job_id] = now
        self.counts[job.kind] += 1
        heapq.heappush(self.finishes, (now + job.duration, job_id))
        del self.pending[job_id]
        return True

    def _finish(self, job_id: int) -> None:
        for name, cards, requests in self.running.pop(job_id):
            self.ledger.release(name, cards, job_id)
            self.used[name].subtract(requests)
            self.dirty.add(name)
        self.counts[self.jobs[job_id].kind] -= 1

    def run(self, window: tuple[float, float], until: float) -> dict:
        """Plays the jobs until every one has started or ``until``; gauges over ``window``."""
        wall, cpu = time.perf_counter(), time.process_time()
        gauges = _Gauges(*window)
        origin, next_arrival, last = window[0], 0, window[0]
        while next_arrival < len(self.arrivals) or self.pending or (self.finishes and self.finishes[0][0] <= window[1]):
            upcoming = [self.arrivals[next_arrival].submit] if next_arrival < len(self.arrivals) else []
            upcoming += [self.finishes[0][0]] if self.finishes else []
            if not upcoming:
                break  # waiting jobs that nothing will ever make room for
            now = origin + math.ceil((min(upcoming) - origin) / self.tick) * self.tick
            if now > until:
                break
            gauges.hold(self._gauges(), last, now)
            last = now
            while self.finishes and self.finishes[0][0] <= now:
                self._finish(heapq.heappop(self.finishes)[1])
            while next_arrival < len(self.arrivals) and self.arrivals[next_arrival].submit <= now:
                job = self.arrivals[next_arrival]
                self.pending[job.id] = pending_job(job, self.sharing, self.cluster.dedicated)
                next_arrival += 1
            if self.pending:
                self._cycle(now)
        gauges.hold(self._gauges(), last, window[1])
        return self._report(gauges, time.perf_counter() - wall, time.process_time() - cpu)

    def _cycle(self, now: float) -> None:
        snapshot = Snapshot(now, tuple(self.pending.values()), nodes=tuple(self._node(name) for name in self.shares))
        started = time.perf_counter()
        result = plan(snapshot, self.policy, eta_horizon_s=0, forecasts=False)
        self.stats["plan_s"] += time.perf_counter() - started
        self.stats["cycles"] += 1
        for admission in result.admissions:
            assert admission.placement is not None  # node fit is on
            self._start(admission.job_id, now, admission.placement, result.cards.get(admission.job_id))

    def _report(self, gauges: _Gauges, wall: float, cpu: float) -> dict:
        averages = gauges.averages()
        report: dict = {
            "sharing": self.sharing,
            "running_avg": {name: round(averages.get(name, 0.0), 1) for name in ("pods", *POD_KINDS, "training")},
            "running_peak": {name: int(gauges.peaks[name]) for name in ("pods", *POD_KINDS, "training")},
            "idle_gib_on_allocated_cards_avg": round(averages.get("idle_gib", 0.0), 1),
            "empty_cards_avg": round(averages.get("empty_cards", 0.0), 1),
            "empty_cards_on_shared_nodes_avg": round(averages.get("empty_cards_shared_nodes", 0.0), 1),
            "queue_s": {},
            "card_violations": int(self.stats["card_violations"]),
            "node_overcommits": int(self.stats["node_overcommits"]),
            "cycles": int(self.stats["cycles"]),
            "plan_s": round(self.stats["plan_s"], 2),
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
        }
        for kind in ("training", *POD_KINDS):
            waits = [
                self.started[j.id] - j.submit for j in self.jobs.values() if j.kind == kind and j.id in self.started
            ]
            never = sum(1 for j in self.jobs.values() if j.kind == kind and j.id not in self.started)
            report["queue_s"][kind] = {
                "jobs": len(waits) + never,
                "avg": round(sum(waits) / len(waits), 1) if waits else 0.0,
                "p95": round(percentile(waits, 95), 1),
                "max": round(max(waits, default=0.0), 1),
                "never_started": never,
            }
        return report
