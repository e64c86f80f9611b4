"""UpdateJobStatus of the training-operator's PyTorchJob, PaddleJob, JAXJob and XGBoostJob
(release-1.9): which replica decides Running, Succeeded, Failed and Restarting.

Each walks the replica types in a fixed order (Go walks a map) over the replica statuses
already counted from the pods (``trainingop.replica_statuses``). TFJob's is in ``tfjob.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .clock import rfc3339
from .kubeflow import update_conditions

if TYPE_CHECKING:
    from .trainingop import TrainingKind


def _counts(status: dict, rtype: str) -> tuple[int, int, int]:
    rs = status["replicaStatuses"].get(rtype) or {}
    return rs.get("succeeded", 0), rs.get("active", 0), rs.get("failed", 0)


def _set(kind: TrainingKind, status: dict, ctype: str, what: str, message: str, now: float) -> None:
    if ctype in ("Succeeded", "Failed"):
        status.setdefault("completionTime", rfc3339(now))
    update_conditions(status, ctype, "True", kind.reason(what), message, now)


def _fail_or_restart(kind: TrainingKind, status: dict, spec: dict, rtype: str, failed: int, name: str, now) -> None:
    if spec["restartPolicy"] != "Never":
        message = f"{kind.kind} {name} is restarting because {failed} {rtype} replica(s) failed."
        _set(kind, status, "Restarting", "Restarting", message, now)
    else:
        _set(
            kind,
            status,
            "Failed",
            "Failed",
            f"{kind.kind} {name} is failed because {failed} {rtype} replica(s) failed.",
            now,
        )


def update_master_or_workers(
    kind: TrainingKind, job: dict, specs: dict, pods: list[dict], status: dict, now: float
) -> None:
    """PyTorchJob's and PaddleJob's UpdateJobStatus: the Master decides; without one the
    workers (all of them, or with a PyTorch elasticPolicy any one) do."""
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    elastic = kind.kind == "PyTorchJob" and (job.get("spec") or {}).get("elasticPolicy") is not None
    status.setdefault("startTime", rfc3339(now))
    for rtype in kind.replica_types:
        if rtype not in specs:
            continue
        succeeded, running, failed = _counts(status, rtype)
        replicas = int(specs[rtype]["replicas"])
        if "Master" in specs:
            if rtype == "Master":
                if running > 0:
                    _set(kind, status, "Running", "Running", f"{kind.kind} {name} is running.", now)
                if replicas - succeeded == 0:
                    _set(kind, status, "Succeeded", "Succeeded", f"{kind.kind} {name} is successfully completed.", now)
                    return
        elif rtype == "Worker":
            if replicas - succeeded == 0 or (elastic and succeeded > 0):
                _set(kind, status, "Succeeded", "Succeeded", f"{kind.kind} {ns}/{name} successfully completed.", now)
            elif running > 0:
                _set(kind, status, "Running", "Running", f"{kind.kind} {ns}/{name} is running.", now)
        if failed > 0 and replicas > succeeded + running:
            _fail_or_restart(kind, status, specs[rtype], rtype, failed, name, now)


def update_jax(kind: TrainingKind, job: dict, specs: dict, pods: list[dict], status: dict, now: float) -> None:
    """JAXJobReconciler.UpdateJobStatus: every worker must succeed."""
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    status.setdefault("startTime", rfc3339(now))
    for rtype in kind.replica_types:
        if rtype not in specs:
            continue
        succeeded, running, failed = _counts(status, rtype)
        replicas = int(specs[rtype]["replicas"])
        if replicas - succeeded == 0:
            _set(kind, status, "Succeeded", "Succeeded", f"{kind.kind} {ns}/{name} successfully completed.", now)
        elif running > 0:
            _set(kind, status, "Running", "Running", f"{kind.kind} {ns}/{name} is running.", now)
        if failed > 0 and replicas > succeeded + running:
            _fail_or_restart(kind, status, specs[rtype], rtype, failed, name, now)


def update_xgboost(kind: TrainingKind, job: dict, specs: dict, pods: list[dict], status: dict, now: float) -> None:
    """XGBoostJobReconciler.UpdateJobStatus: the Master decides; any failure fails the job."""
    name = job["metadata"]["name"]
    running_message = f"{kind.kind} {name} is running."
    status.setdefault("startTime", rfc3339(now))
    for rtype in kind.replica_types:
        if rtype not in specs:
            continue
        succeeded, running, failed = _counts(status, rtype)
        if rtype == "Master":
            if running > 0:
                _set(kind, status, "Running", "Running", running_message, now)
            if int(specs[rtype]["replicas"]) - succeeded == 0:
                _set(kind, status, "Running", "Running", running_message, now)
                _set(kind, status, "Succeeded", "Succeeded", f"{kind.kind} {name} is successfully completed.", now)
                return
        if failed > 0:
            _set(kind, status, "Running", "Running", running_message, now)
            if specs[rtype]["restartPolicy"] == "ExitCode":
                message = f"{kind.kind} {name} is restarting because {failed} {rtype} replica(s) failed."
                _set(kind, status, "Restarting", "Restarting", message, now)
            else:
                message = f"{kind.kind} {name} is failed because {failed} {rtype} replica(s) failed."
                _set(kind, status, "Failed", "Failed", message, now)
