"""The simulated Kubeflow training-operator (release-1.9): TFJob, PyTorchJob, XGBoostJob,
PaddleJob and JAXJob controllers, one table-driven reconciler (``trainingop.KINDS``).

Reconciles every job whose object or pods changed (``ReconcileJobs``): creates the
missing pods (``<job>-<type>-<index>``), deletes them on suspend and per cleanPodPolicy
once the job finished, restarts failed pods whose restart policy asks for it, and writes
conditions and replicaStatuses by the kind's ``UpdateJobStatus``. Jobs whose
runPolicy.managedBy names another controller (MultiKueue) are left alone.

Pod creations of all jobs that need pods are interleaved round-robin and quota refusals
retried with backoff (``reconciler.Reconciler``), recorded as FailedCreatePod events.
"""

from __future__ import annotations

from . import trainingop as op
from .api import Api
from .clock import rfc3339
from .jsoncodec import clone
from .kubeflow import (
    JOB_ROLE_LABEL,
    REPLICA_TYPE_LABEL,
    is_finished,
    is_running,
    is_succeeded,
    is_suspended_status,
    update_conditions,
)
from .ownership import Owners
from .reconciler import Creation, Reconciler
from .resources import PODS, TRAINING_TYPES, ResourceType


class TrainingOperator(Reconciler):
    name = "training-operator"
    failed_create_reason = "FailedCreatePod"

    def __init__(self, api: Api, owners: Owners, backoff_seconds: float = 1.0, max_backoff_seconds: float = 30.0):
        super().__init__(api, owners, TRAINING_TYPES, (PODS,), backoff_seconds, max_backoff_seconds)

    def event_source(self, rt: ResourceType) -> str:
        return op.BY_PLURAL[rt.plural].controller

    # --- reconcile one job (ReconcileJobs) -------------------------------------------------

    def _delete_pods(self, kind: op.TrainingKind, job: dict, status: dict, pods: list[dict]) -> None:
        """DeletePodsAndServices: all pods, unless finished (then per cleanPodPolicy)."""
        finished = is_finished(status)
        policy = op.run_policy(kind, job)["cleanPodPolicy"]
        if finished and policy == "None":
            return
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            if finished and policy == "Running" and phase not in ("Running", "Pending"):
                continue
            self.delete(PODS, pod)

    def _restart_failed(self, kind: op.TrainingKind, job: dict, specs: dict, pods: list[dict], status: dict, now):
        """ReconcilePods: a failed pod is deleted (to be recreated) when its restart policy
        asks for it -- OnFailure/Always, or ExitCode with a retryable (>= 128) exit code --
        and fails the job under ExitCode with a permanent one."""
        name = job["metadata"]["name"]
        by_label = {t.lower(): t for t in specs}
        for pod in pods:
            if (pod.get("status") or {}).get("phase") != "Failed":
                continue
            rtype = by_label.get((pod["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL))
            if rtype is None:
                continue
            policy, code = specs[rtype]["restartPolicy"], op.exit_code(kind, pod)
            if policy in ("OnFailure", "Always") or (policy == "ExitCode" and code >= 128):
                self.delete(PODS, pod)
                message = f"job {name} is restarting because {rtype} replica(s) failed."
                update_conditions(status, "Restarting", "True", kind.reason("Restarting"), message, now)
            elif policy == "ExitCode":
                message = f'job "{name}" is failing because "{rtype}" replica(s) failed.'
                update_conditions(status, "Failed", "True", kind.reason("Failed"), message, now)

    def sync(self, rt: ResourceType, job: dict, now: float) -> list[Creation]:
        """Bring one job's pods and status up to date; return the pods still to be created."""
        kind = op.BY_PLURAL[rt.plural]
        if op.managed_elsewhere(kind, job):
            return []
        name = job["metadata"]["name"]
        status = clone(job.get("status") or {})
        pods = self.owners.children(job, PODS)
        missing: list[Creation] = []
        if not status.get("conditions"):
            update_conditions(status, "Created", "True", kind.reason("Created"), f"{kind.kind} {name} is created.", now)
        status.setdefault("replicaStatuses", {})
        if is_finished(status):
            self._delete_pods(kind, job, status, pods)
        elif op.is_suspended(kind, job):
            self._delete_pods(kind, job, status, pods)
            for entry in status["replicaStatuses"].values():
                entry.pop("active", None)
            message = f"{kind.kind} {name} is suspended."
            if is_running(status):
                update_conditions(status, "Running", "False", kind.reason("Suspended"), message, now)
            if not is_suspended_status(status):
                update_conditions(status, "Suspended", "True", kind.reason("Suspended"), message, now)
        else:
            if is_suspended_status(status):
                message = f"{kind.kind} {name} is resumed."
                update_conditions(status, "Suspended", "False", kind.reason("Resumed"), message, now)
                status["startTime"] = rfc3339(now)
            specs = op.replica_specs(kind, job)
            status["replicaStatuses"] = op.replica_statuses(kind, job, pods)
            if self._past_backoff_limit(kind, job, specs, pods):
                status.setdefault("completionTime", rfc3339(now))
                update_conditions(
                    status,
                    "Failed",
                    "True",
                    kind.reason("Failed"),
                    f"Job {name} has failed because it has reached the specified backoff limit",
                    now,
                )
            else:
                self._restart_failed(kind, job, specs, pods, status, now)
                kind.update_status(kind, job, specs, pods, status, now)
            if is_finished(status):
                if is_succeeded(status):
                    for entry in status["replicaStatuses"].values():
                        active = entry.pop("active", 0)
                        if active:
                            entry["succeeded"] = entry.get("succeeded", 0) + active
                self._delete_pods(kind, job, status, pods)
            else:
                wanted = {op.pod_name(name, rtype, i): (rtype, i) for rtype, i in op.expected_pods(kind, job)}
                existing = {p["metadata"]["name"] for p in pods}
                missing = [(PODS, op.build_pod(kind, job, *wanted[n])) for n in wanted if n not in existing]
                # Scaled down (or a replica type removed): the surplus pods go.
                self._delete_pods(kind, job, status, [p for p in pods if p["metadata"]["name"] not in wanted])
        self.write_status(rt, job, status)
        return missing

    @staticmethod
    def _past_backoff_limit(kind: op.TrainingKind, job: dict, specs: dict, pods: list[dict]) -> bool:
        limit = op.run_policy(kind, job).get("backoffLimit")
        if limit is None:
            return False
        restarting = {t.lower() for t, s in specs.items() if s["restartPolicy"] in ("OnFailure", "Always")}
        restarts = 0
        for pod in pods:
            status = pod.get("status") or {}
            if status.get("phase") != "Running":
                continue
            if (pod["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL) not in restarting:
                continue
            restarts += sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or [])
        return restarts > 0 if limit == 0 else restarts >= limit

    # --- the work clock's view ------------------------------------------------------------------

    def gang(self, rt: ResourceType, job: dict) -> tuple[int, list[dict]]:
        """(pods that must all run for the job to make progress, its live pods)."""
        kind = op.BY_PLURAL[rt.plural]
        if is_finished(job.get("status") or {}) or op.is_suspended(kind, job) or op.managed_elsewhere(kind, job):
            return 0, []
        return len(op.expected_pods(kind, job)), self.owners.children(job, PODS)

    def finish(self, rt: ResourceType, job: dict, pods: list[dict], fail: bool) -> list[tuple[dict, int]]:
        """The work is done: workers, chief and master exit 0 (PS keep running until
        cleanPodPolicy removes them) or, failing, the master (or worker 0) exits 1."""
        if fail:
            return [(_lead(pods), 1)]
        return [(p, 0) for p in pods if (p["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL) != "ps"]


def _lead(pods: list[dict]) -> dict:
    return next((p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_ROLE_LABEL) == "master"), pods[0])
