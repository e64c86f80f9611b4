"""Publish what a cycle saw of the cluster (quotas with reservations, nodes, the pods of
jobdash's jobs) to the database, where the web processes read it."""

from collections import defaultdict
from collections.abc import Iterable, Mapping

from django.utils import timezone

from jobdash.cluster import kinds
from jobdash.cluster.gateway import JobObject, ObjectKey, PodInfo
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


def pod_phases(pods_by_job: Mapping[ObjectKey, Iterable[PodInfo]], objects: Mapping[ObjectKey, JobObject]) -> dict:
    """{"namespace/name": {"job": job id, "replicas": {role: {phase: count}}}} for the pods
    of the objects that carry a jobdash job id, from the watch cache the cycle already
    holds (no extra call to the cluster). Keyed by the job's name, not its id: a JSON key
    of digits reads as an array index in PostgreSQL's and SQLite's JSON paths, and the
    page looks up one job's key only. A pod being deleted counts as Terminating."""
    counts: dict[str, dict] = {}
    for key, pods in pods_by_job.items():
        info = objects.get(key)
        if info is None or info.job_id is None:
            continue
        kind_key, namespace, name = key
        for pod in pods:
            phase = "Terminating" if pod.deleting else pod.phase
            entry = counts.setdefault(f"{namespace}/{name}", {"job": info.job_id, "replicas": {}})
            # a kind whose pods carry no role label (a batch Job) has one group: its pods
            phases = entry["replicas"].setdefault(kinds.pod_role(kind_key, pod) or "pods", {})
            phases[phase] = phases.get(phase, 0) + 1
    return counts


def active_pod_phases(gateway, pods_by_job: Mapping[ObjectKey, list[PodInfo]]) -> dict[str, dict]:
    """pod_phases() of the active jobs' objects only (the snapshot's `pods_by_job`): the
    watch cache keeps the pods and objects of finished jobs until they are deleted, and a
    cycle must not cost more with every job that ever ran."""
    objects = {key: info for key in pods_by_job if (info := gateway.job_object(key)) is not None}
    return pod_phases(pods_by_job, objects)


def publish(snapshot: Snapshot, pods: dict | None = None) -> None:
    quotas, nodes = cluster_summary(snapshot)
    fields = {"updated_at": timezone.now(), "quotas": quotas, "nodes": nodes, "pods": pods or {}}
    # Every cycle publishes: one UPDATE, not update_or_create's transaction, locking read and update.
    if not ClusterState.objects.filter(id=1).update(**fields):
        ClusterState.objects.update_or_create(id=1, defaults=fields)
