"""Jobs whose object is their pods (a plain Pod, a pod group: queueing/kinds/pod.py) in the
cycle: a queued group waits until its user has made all its pods (WaitingForPods), then for
its turn and nodes like any gang; its release lifts the gate the webhook put on every pod.

Their quota is not the planner's to give: ResourceQuota charged each pod at its creation,
gated or not (capabilities.waiting_demand)."""

import dataclasses
from collections.abc import Iterable

from jobdash.cluster import gateway as gw
from jobdash.cluster import kinds, pod_jobs
from queueing import PendingJob
from queueing.placement import GATE
from queueing.workload import adapter_key


def waiting_for_pods(gateway: gw.ClusterGateway, pending: Iterable[PendingJob]) -> dict[int, PendingJob]:
    """The queued jobs of pods that do not all exist yet, each as the planner must see it
    (`pods_created`: how many do). Only their pods are looked at, by their job label."""
    keys: dict[int, tuple[gw.ObjectKey, PendingJob]] = {}
    for job in pending:
        workload = job.workload
        kind_key = adapter_key(workload.api_version, workload.kind)
        if kinds.objects_are_pods(kind_key):
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


def released(gateway: gw.ClusterGateway, key: gw.ObjectKey, job_id: int, pinned: bool) -> gw.JobObject:
    """A job of pods let run: its pods exist, gated. Pinned, phase 9 sends each to its
    planned node; else their gate goes now and the scheduler places them."""
    made = gateway.job_object(key)
    if made is None or made.job_id != job_id:
        raise gw.Fatal(f"its pods are gone from {key[1]}")
    if not pinned:
        for pod in pod_jobs.pods_of(key, gateway.pods_of_jobs([key]).get(key, ()), job_id):
            if GATE in pod.gates:
                gateway.ungate_pod(pod, GATE, None)
    return made
