"""Publish what a cycle saw of the cluster (quotas with reservations, nodes) to the
database, where the web processes read it."""

from collections import defaultdict

from django.utils import timezone

from jobdash.jobs.models import ClusterState
from queueing.snapshot import Snapshot


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
        {"name": n.name, "allocatable": dict(n.allocatable), "allocated": dict(n.allocated),
         "labels": dict(n.labels), "unschedulable": n.unschedulable}
        for n in snapshot.nodes
    ]
    return quotas, nodes


def publish(snapshot: Snapshot) -> None:
    quotas, nodes = cluster_summary(snapshot)
    ClusterState.objects.update_or_create(id=1, defaults={"updated_at": timezone.now(), "quotas": quotas, "nodes": nodes})
