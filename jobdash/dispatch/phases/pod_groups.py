"""Jobs whose object is their pods (a plain Pod, a pod group: queueing/kinds/pod.py) in the
cycle: a queued group waits until its user has made all its pods (WaitingForPods), then for
its turn and nodes like any gang; its release lifts the gate the webhook put on every pod.

Their quota is not the planner's to give: ResourceQuota charged each pod at its creation,
gated or not (capabilities.waiting_demand)."""

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime

from jobdash.cluster import gateway as gw
from jobdash.cluster import kinds, pod_jobs
from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import State
from queueing import PendingJob
from queueing.placement import GATE
from queueing.workload import adapter_key


def waiting_for_pods(gateway: gw.ClusterGateway, pending: Iterable[PendingJob]) -> dict[int, PendingJob]:
    """The queued jobs of pods that do not all exist yet, each as the planner must see it
    (`pods_created`: how many do). Only their pods are looked at, by their job label."""
    keys: dict[int, tuple[gw.ObjectKey, PendingJob]] = {}
    of_pods: dict[tuple[str, str], str | None] = {}  # (apiVersion, kind): its key if its objects are pods
    for job in pending:
        workload = job.workload
        kind = (workload.api_version, workload.kind)
        if kind not in of_pods:  # (asked once a kind: this runs over the whole queue each cycle)
            named = adapter_key(*kind)
            of_pods[kind] = named if kinds.objects_are_pods(named) else None
        kind_key = of_pods[kind]
        if kind_key is not None:
            keys[job.id] = ((kind_key, job.namespace, workload.name), job)
    if not keys:
        return {}
    found = gateway.pods_of_jobs(key for key, _ in keys.values())
    held = {}
    for job_id, (key, job) in keys.items():
        created = sum(1 for pod in pod_jobs.pods_of(key, found.get(key, ()), job_id) if not pod.terminated)
        if created < job.workload.pods:
            held[job_id] = dataclasses.replace(job, pods_created=created)
    return held


# A pod job none of whose pods exists this long after the webhook queued it never will: the
# API server refused its pods after the webhook had said yes (ResourceQuota admission runs
# after mutating webhooks), or the create was abandoned.
NEVER_CREATED_S = 60.0


def never_created(held: Mapping[int, PendingJob], now: float) -> tuple[int, ...]:
    """Of the jobs waiting for their pods, those that have none NEVER_CREATED_S after being queued."""
    return tuple(
        job_id for job_id, job in held.items() if job.pods_created == 0 and now - job.submitted_at >= NEVER_CREATED_S
    )


def fail_never_created(job_ids: Iterable[int], term: int | None, now: datetime) -> int:
    """End them, saying why (a job waiting for pods that will not come is no job)."""
    note = (
        f"none of its pods exists {NEVER_CREATED_S:.0f}s after jobdash queued it: the API server refused "
        "their creation after jobdash's webhook (e.g. the namespace's ResourceQuota), or it was abandoned"
    )
    return sum(transitions.fail(job_id, note, from_states=(State.QUEUED,), term=term, now=now) for job_id in job_ids)


def released(gateway: gw.ClusterGateway, key: gw.ObjectKey, job_id: int, pinned: bool) -> gw.JobObject:
    """A job of pods let run: its pods exist, gated. Pinned, phase 12 sends each to its
    planned node; else their gate goes now and the scheduler places them."""
    made = gateway.job_object(key)
    if made is None or made.job_id != job_id:
        raise gw.Fatal(f"its pods are gone from {key[1]}")
    if not pinned:
        for pod in pod_jobs.pods_of(key, gateway.pods_of_jobs([key]).get(key, ()), job_id):
            if GATE in pod.gates:
                gateway.ungate_pod(pod, GATE, None)
    return made
