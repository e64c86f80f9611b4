"""What the Kubeflow job operators share: pod labels, job conditions, runPolicy.

The training-operator (release-1.9) and the MPI operator (v2beta1) label their pods
with the same ``training.kubeflow.org/*`` keys and keep the same kind of conditions
(Created, Running, Restarting, Suspended, Succeeded, Failed), updated by
``commonutil.UpdateJobConditions`` / the MPI operator's ``updateMPIJobConditions``.
"""

from __future__ import annotations

from .clock import rfc3339
from .validation import cause, immutable, not_supported

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"

# The work clock's knobs, read from a job (or its pod templates).
DURATION_ANNOTATION = "kubesim.io/duration-seconds"
CHECKPOINT_ANNOTATION = "kubesim.io/checkpoint-seconds"  # work kept when the gang breaks
FAIL_ANNOTATION = "kubesim.io/fail"  # "true": the lead pod exits 1
EXIT_CODE_ANNOTATION = "kubesim.io/exit-code"  # "1".."255": the lead pod exits with it
OOM_ANNOTATION = "kubesim.io/oom"  # "true": the lead pod's main container is OOMKilled (137)
# What a training job that checkpoints writes on its own object at each checkpoint (jobdash
# reads it): the checkpoint's time, RFC 3339. The work clock writes it for jobs that set
# CHECKPOINT_ANNOTATION themselves.
CHECKPOINTED_AT_ANNOTATION = "jobdash.io/checkpointed-at"

# runPolicy.managedBy values the training-operator's webhook accepts (ValidateRunPolicy).
TRAINING_OPERATOR_MANAGER = "kubeflow.org/training-operator"
MULTIKUEUE_MANAGER = "kueue.x-k8s.io/multikueue"


def has_condition(status: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in status.get("conditions") or [])


def is_finished(status: dict) -> bool:
    return has_condition(status, "Succeeded") or has_condition(status, "Failed")


def is_succeeded(status: dict) -> bool:
    return has_condition(status, "Succeeded")


def is_running(status: dict) -> bool:
    return has_condition(status, "Running")


def is_suspended_status(status: dict) -> bool:
    return has_condition(status, "Suspended")


def update_conditions(
    status: dict, ctype: str, cstatus: str, reason: str, message: str, now: float, mpi: bool = False
) -> bool:
    """commonutil.UpdateJobConditions (setCondition + filterOutCondition); ``mpi`` for the MPI
    operator's variant, which also turns a Failed condition False when the job succeeds.
    Returns whether anything changed."""
    conditions = status.get("conditions") or []
    current = next((c for c in conditions if c.get("type") == ctype), None)
    if current is not None and current.get("status") == cstatus and current.get("reason") == reason:
        return False
    stamp = rfc3339(now)
    transition = current["lastTransitionTime"] if current is not None and current.get("status") == cstatus else stamp
    falsified = ("Running", "Failed") if mpi else ("Running",)
    kept = []
    for c in conditions:
        if c.get("type") == ctype:
            continue
        if {ctype, c.get("type")} == {"Running", "Restarting"}:
            continue
        if ctype in ("Failed", "Succeeded") and c.get("type") in falsified:
            c = {**c, "status": "False"}
        kept.append(c)
    kept.append(
        {
            "type": ctype,
            "status": cstatus,
            "reason": reason,
            "message": message,
            "lastUpdateTime": stamp,
            "lastTransitionTime": transition,
        }
    )
    status["conditions"] = kept
    return True


def validate_managed_by(policy: dict, path: str, allowed: tuple[str, ...]) -> list[dict]:
    manager = policy.get("managedBy")
    if manager is None or manager in allowed:
        return []
    return [not_supported(f"{path}.managedBy", manager, allowed)]


def validate_managed_by_update(old_policy: dict, new_policy: dict, path: str) -> list[dict]:
    return immutable(f"{path}.managedBy", old_policy.get("managedBy"), new_policy.get("managedBy"))


def validate_suspend(policy: dict, path: str) -> list[dict]:
    if "suspend" in policy and policy["suspend"] is not None and not isinstance(policy["suspend"], bool):
        return [cause(f"{path}.suspend", f"Invalid value: {policy['suspend']!r}: must be a boolean")]
    return []
