"""Publish what a cycle saw of the cluster (quotas with reservations, nodes, the pods of
jobdash's jobs) to the database, where the web processes read it."""

from collections import defaultdict
from collections.abc import Iterable, Mapping

from django.utils import timezone

from jobdash.cluster import kinds
from jobdash.cluster.gateway import ObjectKey, PodInfo
from jobdash.jobs.models import ClusterState
from queueing.snapshot import Snapshot

from .active import ActiveJob


def cluster_summary(snapshot: Snapshot) -> tuple[dict, list]:
    reserved: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for job in snapshot.in_flight:
        for key, amount in job.outstanding.items():
            reserved[job.namespace][key] += amount
    quotas = {
        name: {"hard": dict(q.hard), "used": dict(q.used), "reserved": dict(reserved.get(name, {}))}
        for name, q in snapshot.quotas.items()
    }
    nodes = [
        {
            "name": n.name,
            "allocatable": dict(n.allocatable),
            "allocated": dict(n.allocated),
            "labels": dict(n.labels),
            "unschedulable": n.unschedulable,
        }
        for n in snapshot.nodes
    ]
    return quotas, nodes


def pod_phases(active: Iterable[ActiveJob], pods: Mapping[ObjectKey, Iterable[PodInfo]]) -> dict:
    """{"namespace/name": {"job": job id, "replicas": {role: {phase: count}}}} for the pods
    of the active jobs (`pods`: the snapshot's, by object key: no extra call to the
    cluster; the watch cache keeps the pods of finished jobs until they are deleted, and a
    cycle must not cost more with every job that ever ran). Keyed by the job's name, not
    its id: a JSON key of digits reads as an array index in PostgreSQL's and SQLite's JSON
    paths, and the page looks up one job's key only. A pod being deleted counts as
    Terminating."""
    counts: dict[str, dict] = {}
    for job in active:
        for pod in pods.get(job.key, ()):
            phase = "Terminating" if pod.deleting else pod.phase
            entry = counts.setdefault(f"{job.namespace}/{job.name}", {"job": job.id, "replicas": {}})
            # a kind whose pods carry no role label (a batch Job) has one group: its pods
            phases = entry["replicas"].setdefault(kinds.pod_role(job.kind_key, pod) or "pods", {})
            phases[phase] = phases.get(phase, 0) + 1
    return counts


def publish(snapshot: Snapshot, pods: dict | None = None) -> None:
    quotas, nodes = cluster_summary(snapshot)
    fields = {"updated_at": timezone.now(), "quotas": quotas, "nodes": nodes, "pods": pods or {}}
    # Every cycle publishes: one UPDATE, not update_or_create's transaction, locking read and update.
    if not ClusterState.objects.filter(id=1).update(**fields):
        ClusterState.objects.update_or_create(id=1, defaults=fields)
