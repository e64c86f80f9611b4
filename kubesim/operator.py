"""The simulated Kubeflow training-operator (TFJob controller, release-1.9 semantics).

Reconciles every TFJob whose object or pods changed: creates the missing pods
(``<job>-<type>-<index>``), deletes them on suspend and per cleanPodPolicy once the job
finished, and writes conditions and replicaStatuses by ``tfjob.update_job_status``.

Pod creations of all jobs that need pods are interleaved round-robin, one pod per job
per turn, because the real operator reconciles jobs concurrently. A creation refused by
quota (403) stops that job's turn and retries it with exponential backoff, as the
operator's rate-limited work queue does. Together that is what produces the partial
gangs of the deadlock this project exists to prevent.
"""

from __future__ import annotations

import threading
from collections import deque

from . import tfjob
from .api import Api
from .clock import rfc3339
from .errors import ApiError
from .model import Event, Store, clone, evolve, key_of
from .resources import EVENTS, PODS, TFJOBS, ResourceType

Key = tuple[str, str]


class JobPods:
    """Index: (namespace, TFJob name) -> names of its pods, kept from store events."""

    def __init__(self, store: Store):
        self.store = store
        self._pods: dict[Key, set[str]] = {}
        store.hooks.append(self._on_event)

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if rt is not PODS:
            return
        job = (event.obj["metadata"].get("labels") or {}).get(tfjob.JOB_NAME_LABEL)
        if job is None:
            return
        key = (event.obj["metadata"]["namespace"], job)
        if event.type == "DELETED":
            names = self._pods.get(key)
            if names is not None:
                names.discard(event.obj["metadata"]["name"])
                if not names:
                    del self._pods[key]
        else:
            self._pods.setdefault(key, set()).add(event.obj["metadata"]["name"])

    def pods(self, key: Key) -> list[dict]:
        with self.store.lock:
            names = sorted(self._pods.get(key, ()))
            found = (self.store.find(PODS, key[0], n) for n in names)
            return [p for p in found if p is not None]


def job_key_of_event(rt: ResourceType, event: Event) -> Key | None:
    if rt is TFJOBS:
        return key_of(event.obj)
    if rt is PODS:
        job = (event.obj["metadata"].get("labels") or {}).get(tfjob.JOB_NAME_LABEL)
        if job is not None:
            return event.obj["metadata"]["namespace"], job
    return None


class TrainingOperator:
    name = "training-operator"

    def __init__(self, api: Api, index: JobPods, backoff_seconds: float = 1.0, max_backoff_seconds: float = 30.0):
        self.api, self.store, self.index = api, api.store, index
        self.backoff, self.max_backoff = backoff_seconds, max_backoff_seconds
        self._lock = threading.Lock()
        self._dirty: set[Key] = set()
        self._order: dict[Key, int] = {}  # first-seen resourceVersion: a stable, fair turn order
        self._retry: dict[Key, tuple[float, int]] = {}  # key -> (retry at, failed attempts)
        self.store.hooks.append(self._on_event)

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        key = job_key_of_event(rt, event)
        if key is None:
            return
        with self._lock:
            if rt is TFJOBS and event.type == "ADDED":
                self._order[key] = event.rv
            elif rt is TFJOBS and event.type == "DELETED":
                self._order.pop(key, None)
                self._retry.pop(key, None)
            self._dirty.add(key)

    def next_deadline(self) -> float | None:
        with self._lock:
            return min((at for at, _ in self._retry.values()), default=None)

    def step(self, now: float) -> bool:
        with self._lock:
            keys = set(self._dirty)
            self._dirty.clear()
            keys.update(k for k, (at, _) in self._retry.items() if at <= now)
            order = {k: self._order.get(k, 0) for k in keys}
        if not keys:
            return False
        turns: dict[Key, deque] = {}
        for key in sorted(keys, key=lambda k: (order.get(k, 0), k)):
            job = self.store.find(TFJOBS, *key)
            if job is None:
                with self._lock:
                    self._retry.pop(key, None)
                continue
            missing = self._sync(job, now)
            if missing:
                turns[key] = deque(missing)
            else:
                with self._lock:
                    self._retry.pop(key, None)
        self._create_round_robin(turns, now)
        return True

    def _create_round_robin(self, turns: dict[Key, deque], now: float) -> None:
        while turns:
            for key in list(turns):
                pod = turns[key].popleft()
                job = self.store.find(TFJOBS, *key)
                if job is None or job["metadata"]["uid"] != pod["metadata"]["ownerReferences"][0]["uid"]:
                    del turns[key]  # deleted (or replaced) since this round began
                    continue
                try:
                    self.api.create(PODS, key[0], pod, internal=True)
                except ApiError as exc:
                    if exc.code != 409:  # AlreadyExists: someone else made it; nothing to retry
                        self._failed_create(key, pod, exc, now)
                        del turns[key]
                        continue
                if not turns[key]:
                    del turns[key]
                    with self._lock:
                        self._retry.pop(key, None)

    def _failed_create(self, key: Key, pod: dict, exc: ApiError, now: float) -> None:
        with self._lock:
            _, attempts = self._retry.get(key, (0.0, 0))
            delay = min(self.backoff * (2 ** min(attempts, 32)), self.max_backoff)
            self._retry[key] = (now + delay, attempts + 1)
        self.record_event(key, "Warning", "FailedCreatePod", f"Error creating: {exc.message}", now)

    def record_event(self, key: Key, etype: str, reason: str, message: str, now: float) -> None:
        """A core/v1 Event on the TFJob, deduplicated by reason with a count, like the event recorder."""
        job = self.store.find(TFJOBS, *key)
        if job is None:
            return
        name = f"{key[1]}.{reason.lower()}"
        stamp = rfc3339(now)
        with self.store.lock:
            existing = self.store.find(EVENTS, key[0], name)
            if existing is not None:
                updated = evolve(existing, count=existing.get("count", 1) + 1, lastTimestamp=stamp, message=message)
                self.store.update(EVENTS, updated)
                return
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": key[0]},
                "involvedObject": {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "TFJob",
                    "name": key[1],
                    "namespace": key[0],
                    "uid": job["metadata"]["uid"],
                },
                "reason": reason,
                "message": message,
                "type": etype,
                "count": 1,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "source": {"component": "tfjob-controller"},
                "reportingComponent": "tfjob-controller",
            }
            self.store.create(EVENTS, event)

    # --- reconcile one job (ReconcileJobs) -------------------------------------------------

    def _delete_pods(self, job: dict, status: dict, pods: list[dict]) -> None:
        """DeletePodsAndServices: all pods, unless finished (then per cleanPodPolicy)."""
        finished = tfjob.is_finished(status)
        policy = tfjob.run_policy(job)["cleanPodPolicy"]
        if finished and policy == "None":
            return
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            if finished and policy == "Running" and phase not in ("Running", "Pending"):
                continue
            try:
                self.api.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
            except ApiError:
                pass

    def _sync(self, job: dict, now: float) -> list[dict]:
        """Bring one job's pods and status up to date; return the pods still to be created."""
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        key = (ns, name)
        status = clone(job.get("status") or {})
        pods = self.index.pods(key)
        missing: list[dict] = []
        if not status.get("conditions"):
            tfjob.update_conditions(status, "Created", "True", "TFJobCreated", f"TFJob {name} is created.", now)
        status.setdefault("replicaStatuses", {})
        if tfjob.is_finished(status):
            self._delete_pods(job, status, pods)
        elif tfjob.is_suspended(job):
            self._delete_pods(job, status, pods)
            for entry in status["replicaStatuses"].values():
                entry.pop("active", None)
            message = f"TFJob {name} is suspended."
            if tfjob.is_running(status):
                tfjob.update_conditions(status, "Running", "False", "TFJobSuspended", message, now)
            if not tfjob.is_suspended_status(status):
                tfjob.update_conditions(status, "Suspended", "True", "TFJobSuspended", message, now)
        else:
            if tfjob.is_suspended_status(status):
                tfjob.update_conditions(status, "Suspended", "False", "TFJobResumed", f"TFJob {name} is resumed.", now)
                status["startTime"] = rfc3339(now)
            status["replicaStatuses"] = tfjob.replica_statuses(job, pods)
            if self._past_backoff_limit(job, pods):
                status.setdefault("completionTime", rfc3339(now))
                tfjob.update_conditions(
                    status,
                    "Failed",
                    "True",
                    "TFJobFailed",
                    f"Job {name} has failed because it has reached the specified backoff limit",
                    now,
                )
            else:
                tfjob.update_job_status(job, pods, status, now)
            if tfjob.is_finished(status):
                if tfjob.is_succeeded(status):
                    for entry in status["replicaStatuses"].values():
                        active = entry.pop("active", 0)
                        if active:
                            entry["succeeded"] = entry.get("succeeded", 0) + active
                self._delete_pods(job, status, pods)
            else:
                wanted = {tfjob.pod_name(name, rtype, i): (rtype, i) for rtype, i in tfjob.expected_pods(job)}
                existing = {p["metadata"]["name"] for p in pods}
                missing = [tfjob.build_pod(job, *wanted[n]) for n in wanted if n not in existing]
                # Scaled down (or a replica type removed): the surplus pods go.
                self._delete_pods(job, status, [p for p in pods if p["metadata"]["name"] not in wanted])
        if status != (job.get("status") or {}):
            updated = evolve(job, status=status)
            try:
                self.store.update(TFJOBS, updated, expected_rv=job["metadata"]["resourceVersion"])
            except ApiError:
                with self._lock:
                    self._dirty.add(key)  # changed under us: reconcile again next step
        return missing

    @staticmethod
    def _past_backoff_limit(job: dict, pods: list[dict]) -> bool:
        limit = tfjob.run_policy(job).get("backoffLimit")
        if limit is None:
            return False
        restarting = {
            t.lower() for t, s in tfjob.replica_specs(job).items() if s["restartPolicy"] in ("OnFailure", "Always")
        }
        restarts = 0
        for pod in pods:
            status = pod.get("status") or {}
            if status.get("phase") != "Running":
                continue
            if (pod["metadata"].get("labels") or {}).get(tfjob.REPLICA_TYPE_LABEL) not in restarting:
                continue
            restarts += sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or [])
        return restarts > 0 if limit == 0 else restarts >= limit
