"""The simulated built-in Job controller (kube-controller-manager's ``job`` controller, syncJob).

Per Job: min(parallelism, remaining completions) active pods (``<job>-<5 chars>``; Indexed:
``<job>-<index>-<5 chars>``, one per index not yet completed), created round-robin with
other jobs' and backed off when refused; succeeded and failed pods counted once each
toward ``status.succeeded``/``failed`` (completed indexes for Indexed Jobs); a failed
pod replaced after the pod-failure backoff (10 s doubling, at most 10 min); the Job Failed
(BackoffLimitExceeded) once failures exceed ``backoffLimit`` -- or, under
OnFailure, container restarts reach it -- deleting its active pods; Complete once the
completions succeeded (a work queue without completions: once one succeeded and the
rest ended). ``suspend`` deletes the active pods (condition Suspended) and resuming
recreates them and resets ``startTime``. SuccessCriteriaMet/FailureTarget precede
Complete/Failed as in Kubernetes 1.31+. Not modelled: podFailurePolicy, successPolicy,
backoffLimitPerIndex, activeDeadlineSeconds, TTL; pod tracking finalizers only as far as
an unfinished pod that someone else deleted (evicted) counts as failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import batchjob as bj
from .api import Api
from .clock import rfc3339
from .jsoncodec import clone
from .ownership import Owners
from .reconciler import Creation, Reconciler
from .resources import JOBS, PODS, ResourceType

FAILURE_BACKOFF, MAX_FAILURE_BACKOFF = 10.0, 600.0
CONTROLLER_NAME = "kubernetes.io/job-controller"  # spec.managedBy of Jobs this controller syncs


@dataclass
class _Tracking:
    """What the real controller records through pod finalizers: which pods it counted."""

    succeeded: dict[str, int | None] = field(default_factory=dict)  # pod uid -> completion index
    failed: set[str] = field(default_factory=set)
    failures_since_success: int = 0
    last_failure: float = 0.0
    alive: set[str] = field(default_factory=set)  # unfinished pods seen at the last sync
    deleting: set[str] = field(default_factory=set)  # pods this controller deleted itself


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def _ready(pod: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


class JobController(Reconciler):
    name = "job-controller"
    failed_create_reason = "FailedCreate"

    def __init__(self, api: Api, owners: Owners, backoff_seconds: float = 1.0, max_backoff_seconds: float = 30.0):
        super().__init__(api, owners, (JOBS,), (PODS,), backoff_seconds, max_backoff_seconds)
        self._tracking: dict[str, _Tracking] = {}

    def forget(self, obj: dict) -> None:
        self._tracking.pop(obj["metadata"]["uid"], None)

    def sync(self, rt: ResourceType, job: dict, now: float) -> list[Creation]:
        if (job.get("spec") or {}).get("managedBy") not in (None, CONTROLLER_NAME) or bj.is_finished(job):
            return []
        spec = job["spec"]
        status = clone(job.get("status") or {})
        pods = self.owners.children(job, PODS)
        track = self._tracking.setdefault(job["metadata"]["uid"], _Tracking())
        # Tracking finalizers: an unfinished pod deleted by someone else (an eviction, the taint
        # manager, PodGC) was terminating and not succeeded, so it counts as failed (isPodFailed).
        present = {p["metadata"]["uid"] for p in pods}
        for uid in track.alive - present:
            if uid not in track.deleting and uid not in track.succeeded and uid not in track.failed:
                track.failed.add(uid)
                track.failures_since_success += 1
                track.last_failure = now
        track.deleting &= present
        for pod in pods:
            uid, phase = pod["metadata"]["uid"], _phase(pod)
            if phase == "Succeeded" and uid not in track.succeeded:
                track.succeeded[uid] = bj.completion_index(pod)
                track.failures_since_success = 0
            elif phase == "Failed" and uid not in track.failed:
                track.failed.add(uid)
                track.failures_since_success += 1
                track.last_failure = now
        active = [p for p in pods if _phase(p) not in ("Succeeded", "Failed")]
        completions = spec.get("completions")
        done_indexes = {i for i in track.succeeded.values() if i is not None and i < (completions or 0)}
        succeeded = len(done_indexes) if bj.is_indexed(job) else len(track.succeeded)
        suspended = bj.is_suspended(job)
        if status.get("startTime") is None and not suspended:
            status["startTime"] = rfc3339(now)
        missing: list[Creation] = []
        if len(track.failed) > int(spec.get("backoffLimit", bj.DEFAULT_BACKOFF_LIMIT)) or self._restarts_past_limit(
            job, active
        ):
            for pod in active:  # a finished Job's remaining pods count as failed
                track.failed.add(pod["metadata"]["uid"])
                track.deleting.add(pod["metadata"]["uid"])
                self.delete(PODS, pod)
            active = []
            bj.ensure_condition(
                status,
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            )
            bj.ensure_condition(
                status, "Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", now
            )
        else:
            active, missing = self._manage(job, active, succeeded, done_indexes, track, now)
            complete = len(active) == 0 and (succeeded > 0 if completions is None else succeeded >= int(completions))
            if complete:
                message = "Reached expected number of succeeded pods"
                bj.ensure_condition(status, "SuccessCriteriaMet", "True", "CompletionsReached", message, now)
                bj.ensure_condition(status, "Complete", "True", "CompletionsReached", message, now)
                status["completionTime"] = rfc3339(now)
                missing = []
            elif suspended:
                bj.ensure_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now)
            elif bj.ensure_condition(status, "Suspended", "False", "JobResumed", "Job resumed", now):
                status["startTime"] = rfc3339(now)
        track.alive = {p["metadata"]["uid"] for p in active} - track.deleting
        self._counters(status, job, active, succeeded, len(track.failed), done_indexes)
        self.write_status(rt, job, status)
        return missing

    def _manage(self, job, active, succeeded, done_indexes, track, now) -> tuple[list[dict], list[Creation]]:
        """manageJob: delete surplus active pods, or list the pods to create."""
        spec = job["spec"]
        want = 0 if bj.is_suspended(job) else bj.wanted_active(spec, succeeded, len(active))
        if len(active) > want:
            # Pending before running, newest first (controller.ActivePods' order, simplified).
            doomed = sorted(
                active,
                key=lambda p: (
                    _phase(p) == "Running",
                    p["metadata"].get("creationTimestamp", ""),
                    p["metadata"]["name"],
                ),
            )
            doomed = doomed[: len(active) - want]
            for pod in doomed:
                track.deleting.add(pod["metadata"]["uid"])
                self.delete(PODS, pod)
            gone = {p["metadata"]["uid"] for p in doomed}
            return [p for p in active if p["metadata"]["uid"] not in gone], []
        diff = want - len(active)
        if diff <= 0:
            return active, []
        if track.failures_since_success:
            delay = min(FAILURE_BACKOFF * 2 ** (track.failures_since_success - 1), MAX_FAILURE_BACKOFF)
            if track.last_failure + delay > now:
                self.wake_at(
                    (JOBS.plural, job["metadata"]["namespace"], job["metadata"]["name"]), track.last_failure + delay
                )
                return active, []
        if not bj.is_indexed(job):
            return active, [(PODS, bj.build_pod(job, None)) for _ in range(diff)]
        held = {bj.completion_index(p) for p in active}
        free = [i for i in range(int(spec["completions"])) if i not in done_indexes and i not in held]
        return active, [(PODS, bj.build_pod(job, i)) for i in free[:diff]]

    @staticmethod
    def _restarts_past_limit(job: dict, active: list[dict]) -> bool:
        """pastBackoffLimitOnFailure: container restarts of active pods under OnFailure."""
        if ((job["spec"].get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
            return False
        restarts = 0
        for pod in active:
            status = pod.get("status") or {}
            for key in ("initContainerStatuses", "containerStatuses"):
                restarts += sum(c.get("restartCount", 0) for c in status.get(key) or [])
        limit = int(job["spec"].get("backoffLimit", bj.DEFAULT_BACKOFF_LIMIT))
        return restarts > 0 if limit == 0 else restarts >= limit

    @staticmethod
    def _counters(status: dict, job: dict, active: list[dict], succeeded: int, failed: int, done: set[int]) -> None:
        for key, value in (("active", len(active)), ("succeeded", succeeded), ("failed", failed)):
            if value:
                status[key] = value
            else:
                status.pop(key, None)
        status["ready"] = sum(1 for p in active if _ready(p))
        status["terminating"] = 0
        status["uncountedTerminatedPods"] = {}
        if bj.is_indexed(job) and done:
            status["completedIndexes"] = bj.format_indexes(done)

    # --- the work clock's view ------------------------------------------------------------------

    def job_gang(self, job: dict) -> tuple[int, list[dict]]:
        """(pods the Job wants running at once, its live pods): its pods need each other."""
        spec = job.get("spec") or {}
        if bj.is_finished(job) or bj.is_suspended(job) or spec.get("managedBy") not in (None, CONTROLLER_NAME):
            return 0, []
        pods = [p for p in self.owners.children(job, PODS) if _phase(p) not in ("Succeeded", "Failed")]
        return bj.wanted_active(spec, int((job.get("status") or {}).get("succeeded", 0)), len(pods)), pods

    def gang(self, rt: ResourceType, job: dict) -> tuple[int, list[dict]]:
        return self.job_gang(job)

    def finish(self, rt: ResourceType, job: dict, pods: list[dict], fail: bool) -> list[tuple[dict, int]]:
        return finish_pods(pods, fail)


def finish_pods(pods: list[dict], fail: bool) -> list[tuple[dict, int]]:
    """Work done: every pod exits 0 or, failing, the first one (lowest completion index) exits 1."""
    if fail:
        lead = min(
            pods, key=lambda p: (bj.completion_index(p) is None, bj.completion_index(p) or 0, p["metadata"]["name"])
        )
        return [(lead, 1)]
    return [(p, 0) for p in pods]
