"""Follow released jobs in the cluster until they finish, from the gateway's watch cache.

- Released -> Running once every pod of the gang runs (the operator's Running condition
  alone is not enough: it is set as soon as one Worker runs);
- -> Succeeded / Failed from the TFJob's conditions;
- a TFJob deleted behind our back -> Failed, after a direct read confirms it (the cache
  may lag a create);
- start timeout: Released but not Running for too long -> taken back (deleted, or
  re-suspended in unsuspend mode), requeued with exponential backoff, Failed after the
  attempt limit. This breaks a node-level deadlock the planner did not foresee;
- cancelled jobs: their TFJob is deleted.
"""

import logging
from collections import defaultdict
from dataclasses import dataclass

from django.utils import timezone

from jobdash.cluster import gateway as gw
from jobdash.jobs.models import Job, State

from . import transitions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackerSettings:
    release_mode: str
    start_timeout_s: float
    max_attempts: int
    backoff_s: float


def _take_back(gateway: gw.ClusterGateway, namespace: str, name: str, mode: str) -> None:
    if mode == "unsuspend":
        gateway.set_suspended(namespace, name, True)
    else:
        gateway.delete_tfjob(namespace, name)


def _gone(gateway: gw.ClusterGateway, namespace: str, name: str, job_id: int) -> bool:
    try:
        return gateway.read_tfjob(namespace, name).job_id != job_id
    except gw.NotFound:
        return True


def track(gateway: gw.ClusterGateway, config: TrackerSettings) -> dict[str, int]:
    now = timezone.now()
    counts: dict[str, int] = defaultdict(int)
    tfjobs = {(t.namespace, t.name): t for t in gateway.tfjobs()}
    running_pods: dict[tuple[str, str], int] = defaultdict(int)
    for pod in gateway.pods():
        if pod.job_name and pod.phase == "Running" and not pod.deleting:
            running_pods[(pod.namespace, pod.job_name)] += 1

    jobs = Job.objects.filter(state__in=(State.RELEASED, State.RUNNING)).values(
        "id", "namespace__name", "name", "state", "workload", "released_at", "tfjob_uid", "attempts"
    )
    for job in jobs:
        key = (job["namespace__name"], job["name"])
        info = tfjobs.get(key)
        try:
            counts[_follow(gateway, config, job, key, info, running_pods[key], now)] += 1
        except gw.GatewayError as error:  # the cluster is unwell: try again next time
            log.warning("tracking job %s: %s", job["id"], error)
            counts["errors"] += 1
    counts["cleaned"] = _delete_cancelled(gateway, tfjobs.values())
    return dict(counts)


def _follow(gateway, config: TrackerSettings, job: dict, key, info, pods_running: int, now) -> str:
    job_id, state = job["id"], job["state"]
    if info is None or info.job_id != job_id:
        if not job["tfjob_uid"]:
            return "creating"  # release in progress, or interrupted: reconcile finishes it
        if not _gone(gateway, key[0], key[1], job_id):
            return "cache-lag"
        transitions.fail(job_id, "the TFJob was deleted outside jobdash", from_states=(State.RELEASED, State.RUNNING))
        return "deleted"
    if info.condition == "Succeeded":
        transitions.finish(job_id, State.SUCCEEDED, "the TFJob succeeded", started=state == State.RELEASED)
        return "succeeded"
    if info.condition == "Failed":
        transitions.finish(job_id, State.FAILED, f"the TFJob failed: {info.message}".rstrip(": "), started=state == State.RELEASED)
        return "failed"
    if state == State.RUNNING:
        return "running"
    gang = job["workload"].get("pods", 0)
    if gang and pods_running >= gang:
        transitions.running(job_id, f"all {gang} pods are running")
        return "started"
    waited = (now - job["released_at"]).total_seconds() if job["released_at"] else 0.0
    if waited < config.start_timeout_s:
        return "starting"
    _take_back(gateway, key[0], key[1], config.release_mode)
    attempts = job["attempts"] + 1
    note = f"only {pods_running} of {gang} pods running after {waited:.0f}s (attempt {attempts} of {config.max_attempts})"
    if attempts >= config.max_attempts:
        transitions.fail(job_id, f"gave up: {note}", from_states=(State.RELEASED,))
        return "gave-up"
    transitions.requeue(job_id, note=f"taken back: {note}", backoff_until=transitions.backoff(config.backoff_s, attempts - 1),
                        count_attempt=True)
    return "timed-out"


def _delete_cancelled(gateway: gw.ClusterGateway, tfjobs) -> int:
    ours = {t.job_id: t for t in tfjobs if t.job_id is not None and not t.deleting}
    if not ours:
        return 0
    cancelled = Job.objects.filter(pk__in=ours, state=State.CANCELLED).values_list("id", flat=True)
    for job_id in cancelled:
        gateway.delete_tfjob(ours[job_id].namespace, ours[job_id].name)
    return len(cancelled)
