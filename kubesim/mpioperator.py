"""The simulated MPI operator (mpi-operator v2beta1 ``MPIJobController.syncHandler``).

Per MPIJob: the worker pods ``<job>-worker-<i>`` (created round-robin with other jobs'
pods, like the training-operator's), the launcher as a batch Job ``<job>-launcher`` (its
pod comes from the Job controller), suspension mirrored onto the launcher Job and worker
pods deleted while suspended, and the status from the launcher Job and the workers:
Created, Running (launcher and every worker running), Succeeded/Failed (the launcher Job
Complete/Failed), Suspended. After the end, workers are deleted per cleanPodPolicy
(default None: they keep running, as with the real operator).
"""

from __future__ import annotations

from . import batchjob
from . import mpijob as mpi
from .api import Api
from .clock import rfc3339
from .errors import ApiError
from .jsoncodec import clone
from .kubeflow import JOB_ROLE_LABEL, REPLICA_INDEX_LABEL, is_finished, update_conditions
from .ownership import Owners, controller_ref
from .reconciler import Creation, Reconciler
from .resources import JOBS, MPIJOBS, PODS, ResourceType


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def _set(status: dict, ctype: str, cstatus: str, reason: str, message: str, now: float) -> bool:
    return update_conditions(status, ctype, cstatus, reason, message, now, mpi=True)


class MPIOperator(Reconciler):
    name = "mpi-job-controller"
    failed_create_reason = "MPIJobFailed"

    def __init__(self, api: Api, owners: Owners, backoff_seconds: float = 1.0, max_backoff_seconds: float = 30.0):
        super().__init__(api, owners, (MPIJOBS,), (PODS, JOBS), backoff_seconds, max_backoff_seconds)

    def failed_create_message(self, exc: ApiError, child_rt: ResourceType) -> str:
        return f"{'launcher' if child_rt is JOBS else 'worker'} pod created failed: {exc.message}"

    def _workers(self, job: dict) -> list[dict]:
        return [
            p
            for p in self.owners.children(job, PODS)
            if (p["metadata"].get("labels") or {}).get(JOB_ROLE_LABEL) == "worker"
        ]

    def _launcher(self, job: dict) -> dict | None:
        launcher = self.store.find(JOBS, job["metadata"]["namespace"], mpi.launcher_name(job))
        if launcher is None or (controller_ref(launcher) or {}).get("uid") != job["metadata"]["uid"]:
            return None
        return launcher

    def _delete_workers(self, job: dict, workers: list[dict]) -> None:
        """deleteWorkerPods: under cleanPodPolicy Running, finished workers are kept."""
        keep_finished = job["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
        for pod in workers:
            if keep_finished and _phase(pod) not in ("Running", "Pending"):
                continue
            self.delete(PODS, pod)

    def sync(self, rt: ResourceType, raw: dict, now: float) -> list[Creation]:
        if mpi.managed_elsewhere(raw):
            return []
        job = mpi.defaulted(raw)
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        key = (rt.plural, ns, name)
        errors = mpi.validate(job)
        if errors:
            message = "Found validation errors: " + ", ".join(f"{c['field']}: {c['message']}" for c in errors)
            self.record_event(key, "Warning", "ValidationError", message, now)
            return []
        status = clone(raw.get("status") or {})
        if not status.get("conditions"):
            _set(status, "Created", "True", "MPIJobCreated", f"MPIJob {ns}/{name} is created.", now)
        suspended = mpi.is_suspended(job)
        replicas = mpi.worker_replicas(job)
        workers = self._workers(job)
        statuses = status.setdefault("replicaStatuses", {})
        if is_finished(status) and status.get("completionTime"):
            if job["spec"]["runPolicy"]["cleanPodPolicy"] in ("All", "Running"):
                self._delete_workers(job, workers)
                statuses["Worker"] = {}
            self.write_status(rt, raw, status)
            return []
        if status.get("startTime") is None and not suspended:
            status["startTime"] = rfc3339(now)
        launcher = self._launcher(job)
        missing: list[Creation] = []
        current: list[dict] = []  # the workers getOrCreateWorker would return
        if launcher is None or not batchjob.is_finished(launcher):
            if not suspended:
                for pod in workers:
                    if int((pod["metadata"].get("labels") or {}).get(REPLICA_INDEX_LABEL, "0")) >= replicas:
                        self.delete(PODS, pod)  # scaled down
                existing = {p["metadata"]["name"]: p for p in workers}
                current = [
                    existing[mpi.worker_name(job, i)] for i in range(replicas) if mpi.worker_name(job, i) in existing
                ]
                missing = [
                    (PODS, mpi.build_worker(job, i)) for i in range(replicas) if mpi.worker_name(job, i) not in existing
                ]
            ready = not missing and all(_phase(p) == "Running" for p in current)
            if launcher is None and (job["spec"]["launcherCreationPolicy"] == "AtStartup" or (ready and not suspended)):
                missing.append((JOBS, mpi.build_launcher_job(job)))
        if launcher is not None:
            launcher = self._sync_launcher_suspension(job, launcher, suspended)
        if suspended:
            self._delete_workers(job, workers)
            current = []
        self._update_status(job, status, launcher, current, replicas, now)
        self.write_status(rt, raw, status)
        return missing

    def _sync_launcher_suspension(self, job: dict, launcher: dict, suspended: bool) -> dict:
        if not suspended and batchjob.is_suspended(launcher):
            # A Job's template is immutable once started: clear startTime first (as JobSet does).
            if (launcher.get("status") or {}).get("startTime"):
                status = {k: v for k, v in launcher["status"].items() if k != "startTime"}
                launcher = self.replace(JOBS, {**launcher, "status": status}, "status") or launcher
            spec = {**launcher["spec"], "suspend": False}
            spec["template"] = _scheduling(mpi.launcher_template(job), spec["template"])
            return self.replace(JOBS, {**launcher, "spec": spec}) or launcher
        if suspended and not batchjob.is_suspended(launcher):
            return self.replace(JOBS, {**launcher, "spec": {**launcher["spec"], "suspend": True}}) or launcher
        return launcher

    def _update_status(self, job, status, launcher, workers, replicas, now) -> None:
        """updateMPIJobStatus."""
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        suspended = mpi.is_suspended(job)
        statuses = status["replicaStatuses"]
        if suspended:
            _set(status, "Suspended", "True", "MPIJobSuspended", "MPIJob suspended", now)
        elif any(c.get("type") == "Suspended" for c in status.get("conditions") or []):
            if _set(status, "Suspended", "False", "MPIJobResumed", "MPIJob resumed", now):
                status["startTime"] = rfc3339(now)
        launcher_running = 0
        if launcher is not None:
            pods = self.owners.children(launcher, PODS)
            launcher_running = sum(1 for p in pods if _phase(p) == "Running")
            entry: dict = {}
            failed = (launcher.get("status") or {}).get("failed", 0)
            if failed:
                entry["failed"] = failed
            statuses["Launcher"] = entry
            if batchjob.is_complete(launcher):
                entry["succeeded"] = 1
                status.setdefault(
                    "completionTime", (launcher.get("status") or {}).get("completionTime") or rfc3339(now)
                )
                _set(status, "Succeeded", "True", "MPIJobSucceeded", f"MPIJob {ns}/{name} successfully completed.", now)
            elif batchjob.is_failed(launcher):
                self._failed(status, launcher, pods, now)
            elif launcher_running:
                entry["active"] = launcher_running
        counts = {"Failed": 0, "Succeeded": 0, "Running": 0}
        for pod in workers:
            if _phase(pod) in counts:
                counts[_phase(pod)] += 1
        statuses["Worker"] = {
            k: v
            for k, v in (
                ("failed", counts["Failed"]),
                ("succeeded", counts["Succeeded"]),
                ("active", counts["Running"]),
            )
            if v
        }
        if suspended:
            _set(status, "Running", "False", "MPIJobSuspended", f"MPIJob {ns}/{name} is suspended.", now)
        elif is_finished(status):
            if not any(c.get("type") == "Running" for c in status.get("conditions") or []):
                stamp = status.get("completionTime") or rfc3339(now)
                status["conditions"].append(
                    {
                        "type": "Running",
                        "status": "False",
                        "reason": "MPIJobRunning",
                        "message": f"MPIJob {ns}/{name} is finished but Running condition was never set.",
                        "lastUpdateTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                )
        elif launcher is not None and launcher_running >= 1 and counts["Running"] == replicas:
            _set(status, "Running", "True", "MPIJobRunning", f"MPIJob {ns}/{name} is running.", now)

    @staticmethod
    def _failed(status: dict, launcher: dict, pods: list[dict], now: float) -> None:
        """updateMPIJobFailedStatus: the launcher Job's reason and message."""
        cond = batchjob.condition(launcher, "Failed") or {}
        reason = cond.get("reason") or "MPIJobFailed"
        message = cond.get("message") or "MPIJob has failed"
        if reason == "BackoffLimitExceeded":
            failed = [p for p in pods if _phase(p) == "Failed"]
            if failed:
                last = max(failed, key=lambda p: p["metadata"].get("creationTimestamp", ""))
                reason += "/" + ((last.get("status") or {}).get("reason") or "")
                message += ": " + ((last.get("status") or {}).get("message") or "")
        status.setdefault("completionTime", rfc3339(now))
        _set(status, "Failed", "True", reason, message, now)

    # --- the work clock's view ------------------------------------------------------------------

    def gang(self, rt: ResourceType, raw: dict) -> tuple[int, list[dict]]:
        """The launcher and every worker must run (mpirun needs them all)."""
        if is_finished(raw.get("status") or {}) or mpi.is_suspended(raw) or mpi.managed_elsewhere(raw):
            return 0, []
        job = mpi.defaulted(raw)
        launcher = self._launcher(job)
        pods = self._workers(job) + (self.owners.children(launcher, PODS) if launcher is not None else [])
        return mpi.worker_replicas(job) + 1, pods

    def finish(self, rt: ResourceType, job: dict, pods: list[dict], fail: bool) -> list[tuple[dict, int]]:
        """mpirun returns: the launcher exits (1 when failing); workers (sshd) keep running."""
        launchers = [p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_ROLE_LABEL) == "launcher"]
        return [(p, 1 if fail else 0) for p in launchers]


def _scheduling(desired: dict, current: dict) -> dict:
    """syncLauncherSchedulingDirectives: labels, annotations, nodeSelector, tolerations, gates."""
    merged = {**current, "metadata": {**(current.get("metadata") or {})}, "spec": {**(current.get("spec") or {})}}
    for key in ("labels", "annotations"):
        values = {**(merged["metadata"].get(key) or {}), **((desired.get("metadata") or {}).get(key) or {})}
        if values:
            merged["metadata"][key] = values
    for key in ("nodeSelector", "tolerations", "schedulingGates"):
        if (desired.get("spec") or {}).get(key) is not None:
            merged["spec"][key] = desired["spec"][key]
    return merged
