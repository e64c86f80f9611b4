"""Publish what a cycle saw of the cluster (quotas with reservations, nodes, the pods of
jobdash's TFJobs) to the database, where the web processes read it."""

from collections import defaultdict
from collections.abc import Iterable, Mapping

from django.utils import timezone

from jobdash.cluster.gateway import PodInfo, TFJobInfo
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


def pod_phases(pods: Iterable[PodInfo], tfjobs: Mapping[tuple[str, str], TFJobInfo]) -> dict[str, dict]:
    """{"namespace/name": {"job": job id, "replicas": {replica type: {phase: count}}}} for the
    pods of TFJobs that carry a jobdash job id, from the watch cache the cycle already
    holds (no extra call to the cluster). Keyed by the TFJob's name, not the job id: a JSON
    key of digits reads as an array index in PostgreSQL's and SQLite's JSON paths, and the
    page looks up one job's key only. A pod being deleted counts as Terminating."""
    counts: dict[str, dict] = {}
    for pod in pods:
        info = tfjobs.get((pod.namespace, pod.job_name)) if pod.job_name else None
        if info is None or info.job_id is None:
            continue
        phase = "Terminating" if pod.deleting else pod.phase
        entry = counts.setdefault(f"{pod.namespace}/{pod.job_name}", {"job": info.job_id, "replicas": {}})
        phases = entry["replicas"].setdefault(pod.replica_type or "(unknown)", {})
        phases[phase] = phases.get(phase, 0) + 1
    return counts


def active_pod_phases(gateway, pods_by_job: Mapping[tuple[str, str], list[PodInfo]]) -> dict[str, dict]:
    """pod_phases() of the active jobs' TFJobs only (the snapshot's `pods_by_job`): the
    watch cache keeps the pods and TFJobs of finished jobs until they are deleted, and a
    cycle must not cost more with every job that ever ran."""
    pods = [pod for group in pods_by_job.values() for pod in group]
    tfjobs = {key: info for key in pods_by_job if (info := gateway.tfjob(*key)) is not None}
    return pod_phases(pods, tfjobs)


def publish(snapshot: Snapshot, pods: dict | None = None) -> None:
    quotas, nodes = cluster_summary(snapshot)
    ClusterState.objects.update_or_create(
        id=1, defaults={"updated_at": timezone.now(), "quotas": quotas, "nodes": nodes, "pods": pods or {}}
    )
