"""The families read from the database at each scrape (JobsCollector: jobdash_jobs and
jobdash_queue_length; CardsCollector: the shared GPU cards' memory; UsageCollector:
jobdash_gpu_seconds_total; LostWorkCollector: jobdash_lost_gpu_seconds_total; DispatcherCollector: failed cycles and the last completed
one; ClustersCollector: several clusters' health), and the registries a
scrape is answered from: this process's, every process's of PROMETHEUS_MULTIPROC_DIR
(prometheus_client's multiprocess mode), and the web's, which adds the database families
to them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

# The database families (JobsCollector); queued jobs no cycle has looked at yet have no reason.
NO_REASON_YET = "New"


class JobsCollector(Collector):
    """`jobdash_jobs` and `jobdash_queue_length`, one GROUP BY each per scrape. A (namespace,
    kind, cluster) that has jobs shows every state, zeros included, so a series does not
    vanish when its last job moves on. `cluster` is the cluster a job was released to (issue
    49), "" with one cluster and for a job not released (queued, or finished before)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db.models import Count

        from jobdash.jobs.models import Job, State

        jobs = GaugeMetricFamily(
            "jobdash_jobs",
            "Jobs in the database by namespace, kind, state and the cluster they were released to.",
            labels=["namespace", "kind", "state", "cluster"],
        )
        counts: dict[tuple[str, str, str], dict[str, int]] = {}
        rows = Job.objects.values_list("namespace__name", "kind", "cluster", "state").annotate(n=Count("id")).order_by()
        for namespace, kind, cluster, state, n in rows:
            counts.setdefault((namespace, kind, cluster), dict.fromkeys(State.values, 0))[state] = n
        for (namespace, kind, cluster), by_state in sorted(counts.items()):
            for state, n in by_state.items():
                jobs.add_metric([namespace, kind, state, cluster], n)
        yield jobs
        queue = GaugeMetricFamily(
            "jobdash_queue_length",
            f"Queued jobs by namespace and the reason they wait (reason={NO_REASON_YET}: no cycle has planned them yet).",
            labels=["namespace", "reason"],
        )
        queued = (
            Job.objects.filter(state=State.QUEUED)
            .values_list("namespace__name", "reason")
            .annotate(n=Count("id"))
            .order_by()
        )
        merged: dict[tuple[str, str], int] = {}
        for namespace, reason, n in queued:
            key = (namespace, reason or NO_REASON_YET)
            merged[key] = merged.get(key, 0) + n
        for (namespace, reason), n in sorted(merged.items()):
            queue.add_metric([namespace, reason], n)
        yield queue


MIB = 2**20


class CardsCollector(Collector):
    """`jobdash_gpu_card_memory_bytes` and `jobdash_gpu_card_memory_used_bytes`: each shared
    GPU card's memory and what is taken of it (pods on their way included), as the last
    cycle published them (ClusterState.nodes' cards), one row read per scrape."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from jobdash.jobs.card_selectors import cards_of
        from jobdash.jobs.models import ClusterState

        labels = ["node", "card", "model"]
        total = GaugeMetricFamily(
            "jobdash_gpu_card_memory_bytes", "Memory of each GPU card shared by memory (gpushare, HAMi).", labels=labels
        )
        used = GaugeMetricFamily(
            "jobdash_gpu_card_memory_used_bytes",
            "Memory taken on each shared GPU card, pods on their way included.",
            labels=labels,
        )
        nodes = ClusterState.objects.filter(id=1).values_list("nodes", flat=True).first() or []
        for node in nodes if isinstance(nodes, list) else []:
            if not isinstance(node, dict):
                continue
            for card in cards_of(node):
                key = [str(node.get("name", "")), str(card["index"]), card["model"]]
                total.add_metric(key, card["memory"] * MIB)
                used.add_metric(key, card["used"] * MIB)
        yield total
        yield used


class UsageCollector(Collector):
    """`jobdash_gpu_seconds_total` by namespace: every GPU-second run, from the usage rows plus
    what the fold has not reached (open runs up to now). Only grows, as a counter must: runs
    are never taken back (retention keeps the usage rows)."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        from jobdash.usage.selectors import usage

        family = CounterMetricFamily(
            "jobdash_gpu_seconds", "GPU-seconds run by the jobs of each namespace.", labels=["namespace"]
        )
        for row in usage(None, None, ["namespace"], lost=False):
            family.add_metric([row["namespace"]], row["gpu_hours"] * 3600)
        yield family


class LostWorkCollector(Collector):
    """`jobdash_lost_gpu_seconds_total` by namespace and cause (preemption, reclaim, move):
    the GPU-seconds redone by jobs stopped to make room (usage.LostWork, kept by retention),
    one GROUP BY per scrape."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        from jobdash.usage.selectors import lost_by

        family = CounterMetricFamily(
            "jobdash_lost_gpu_seconds",
            "GPU-seconds redone by the jobs of each namespace: run since their last checkpoint when stopped to make room.",
            labels=["namespace", "cause"],
        )
        for (namespace,), by_cause in sorted(lost_by(None, None, ["namespace"]).items()):
            for cause, gpu_s in sorted(by_cause.items()):
                family.add_metric([namespace, cause], gpu_s)
        yield family


class DispatcherCollector(Collector):
    """`jobdash_cycle_failures_total` and `jobdash_last_cycle_success_timestamp_seconds`, as
    the dispatcher recorded them (CycleFailures, the last Cycle row): read from the database,
    the web's /metrics tells them whichever process runs the cycles, and they survive its
    restarts. Two one-row reads per scrape."""

    def collect(self) -> Iterator[Any]:
        from jobdash.jobs.models import Cycle, CycleFailures

        failures = CounterMetricFamily(
            "jobdash_cycle_failures",
            "Admission cycles that failed (raised instead of completing), by any dispatcher process, in all time.",
        )
        failures.add_metric([], CycleFailures.objects.filter(id=1).values_list("total", flat=True).first() or 0)
        yield failures
        last = GaugeMetricFamily(
            "jobdash_last_cycle_success_timestamp_seconds",
            "When the last admission cycle completed, in seconds since the epoch (no sample before the first).",
        )
        cycle = Cycle.objects.order_by("-started_at").only("started_at", "duration_ms").first()
        if cycle is not None:
            last.add_metric([], cycle.started_at.timestamp() + cycle.duration_ms / 1000.0)
        yield last


class ClustersCollector(Collector):
    """Several clusters (issue 49): `jobdash_cluster_up` (1 while its API server answers and it
    takes jobs again, 0 lost or returning) and `jobdash_cluster_lost_seconds` (how long since
    it was marked lost; 0 when it is not), per cluster, as the dispatcher recorded them (the
    Cluster rows): one query per scrape, no sample with one cluster."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.utils import timezone

        from jobdash.clusters.models import Cluster, ClusterHealth

        up = GaugeMetricFamily(
            "jobdash_cluster_up",
            "1 while the cluster's API server answers (Answering), 0 while it is lost or returning.",
            labels=["cluster"],
        )
        lost = GaugeMetricFamily(
            "jobdash_cluster_lost_seconds",
            "Seconds since the cluster was marked lost (until it takes jobs again); 0 when it is not.",
            labels=["cluster"],
        )
        now = timezone.now()
        for name, health, lost_at in Cluster.objects.order_by("name").values_list("name", "health", "lost_at"):
            up.add_metric([name], 1.0 if health == ClusterHealth.ANSWERING else 0.0)
            lost.add_metric([name], max(0.0, (now - lost_at).total_seconds()) if lost_at else 0.0)
        yield up
        yield lost


class _Union(Collector):
    def __init__(self, *collectors: Any):
        self.collectors = collectors

    def collect(self) -> Iterator[Any]:
        for collector in self.collectors:
            yield from collector.collect()


def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def process_registry() -> CollectorRegistry:
    """This process's metrics, or under PROMETHEUS_MULTIPROC_DIR every process's of the
    directory (a registry made per scrape, as prometheus_client's multiprocess mode asks)."""
    if not multiprocess():
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def web_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        _Union(
            process_registry(),
            JobsCollector(),
            CardsCollector(),
            UsageCollector(),
            LostWorkCollector(),
            DispatcherCollector(),
            ClustersCollector(),
        )
    )
    return registry
