"""A job whose object is its pods (queueing.capabilities.JobOfPods: a plain Pod, a pod
group) as the gateway shows it: one JobObject made from its pods in the watch cache, so
that the tracker, reconcile and the sweep follow it like any job's object.

The pods carry the job's id (jobdash.io/job-id, set by the webhook at their creation):
pods of a finished group of the same name that are still there are not the new job's.
While its pods are gated the job is held in the cluster, as a suspended object is
(reconcile adopts no held object)."""

import dataclasses
from collections.abc import Iterable

from queueing import capabilities
from queueing.placement import GATE

from . import kinds
from .gateway import JOB_ID_LABEL, JobObject, ObjectKey, PodInfo


def job_id_of(pod: PodInfo) -> int | None:
    value = pod.labels.get(JOB_ID_LABEL, "")
    return int(value) if value.isdigit() else None


def group_object(key: ObjectKey, pods: Iterable[PodInfo], job_id: int | None = None) -> JobObject | None:
    """The job's object made of its pods (those of `job_id`, else of the newest job among
    them); None when it has no pod left that is not being deleted."""
    kind_key, namespace, name = key
    live = [pod for pod in pods if not pod.deleting and job_id_of(pod) is not None]
    if job_id is None and live:
        job_id = max(job_id_of(pod) or 0 for pod in live)
    mine = sorted((pod for pod in live if job_id_of(pod) == job_id), key=lambda pod: pod.name)
    if not mine:
        return None
    status = capabilities.status_of_pods(kinds.adapter(kind_key), [pod.phase for pod in mine], len(mine))
    return JobObject(
        kind=kind_key,
        namespace=namespace,
        name=name,
        uid=mine[0].name,  # (no object of its own: its first pod names it)
        job_id=job_id,
        suspended=all(GATE in pod.gates for pod in mine),
        phase=status.phase,
        message=status.message,
        labels={JOB_ID_LABEL: str(job_id)},
    )


def pods_of(key: ObjectKey, pods: Iterable[PodInfo], job_id: int | None) -> list[PodInfo]:
    """Its pods not being deleted (of `job_id`, when given)."""
    return [pod for pod in pods if not pod.deleting and (job_id is None or job_id_of(pod) == job_id)]


def with_total(made: JobObject, pods: Iterable[PodInfo], total: int) -> JobObject:
    """Its status read against the job's whole count: a pod deleted out of a running group
    leaves it unable to finish (the rest succeeding is not the group succeeding)."""
    mine = pods_of((made.kind, made.namespace, made.name), pods, made.job_id)
    status = capabilities.status_of_pods(kinds.adapter(made.kind), [pod.phase for pod in mine], total)
    return dataclasses.replace(made, phase=status.phase, message=status.message)
