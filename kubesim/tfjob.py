"""TFJob semantics of the Kubeflow training-operator (release-1.9), as pure functions.

The generic training-operator machinery (replica specs with defaults, pods, replica
statuses) is table-driven in ``trainingop.py``; here is what only TFJobs have:
validation mirroring the operator's webhook (ValidateV1TFJob: any-case replica types
Chief/Evaluator/Master/PS/Worker, a "tensorflow" container, successPolicy), and
``update_job_status``, a transcription of ``TFJobReconciler.UpdateJobStatus``.
"""

from __future__ import annotations

from .clock import rfc3339
from .kubeflow import (
    DURATION_ANNOTATION,
    FAIL_ANNOTATION,
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    MULTIKUEUE_MANAGER,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    TRAINING_OPERATOR_MANAGER,
    update_conditions,
    validate_managed_by,
)
from .validation import cause, dns1035_label, required, validate_pod_spec

__all__ = [
    "DURATION_ANNOTATION",
    "FAIL_ANNOTATION",
    "JOB_NAME_LABEL",
    "JOB_ROLE_LABEL",
    "OPERATOR_NAME_LABEL",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
]

GROUP, VERSION, KIND = "kubeflow.org", "v1", "TFJob"

# The order UpdateJobStatus walks replica types in: it decides which condition wins.
REPLICA_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")
_CANONICAL = {name.lower(): name for name in REPLICA_TYPES}
COORDINATORS = ("Chief", "Master")


def canonical_type(name: object) -> str | None:
    return _CANONICAL.get(name.lower()) if isinstance(name, str) else None


def success_policy(job: dict) -> str:
    return (job.get("spec") or {}).get("successPolicy") or ""


def is_master_role(specs: dict, rtype: str, index: int) -> bool:
    """A Chief/Master, else worker 0 (TFJob and PyTorchJob: IsMasterRole)."""
    if rtype in COORDINATORS:
        return True
    return rtype == "Worker" and index == 0 and not any(t in specs for t in COORDINATORS)


# --- validation (the operator's webhook, answered as 422 like a CRD schema would be) ---------


def validate(job: dict) -> list[dict]:
    causes: list[dict] = []
    name = (job.get("metadata") or {}).get("name")
    if name and not dns1035_label(name):
        causes.append(
            cause(
                "metadata.name",
                f"Invalid value: {name!r}: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            )
        )
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return causes + [required("spec")]
    replicas = spec.get("tfReplicaSpecs")
    if not isinstance(replicas, dict) or not replicas:
        return causes + [required("spec.tfReplicaSpecs")]
    seen: set[str] = set()
    for key, rspec in replicas.items():
        where = f"spec.tfReplicaSpecs[{key}]"
        rtype = canonical_type(key)
        if rtype is None:
            causes.append(
                cause(
                    where,
                    f"Unsupported value: {key!r}: supported values: {', '.join(REPLICA_TYPES)}",
                    "FieldValueNotSupported",
                )
            )
            continue
        if rtype in seen:
            causes.append(cause(where, f"Duplicate value: {key!r}", "FieldValueDuplicate"))
        seen.add(rtype)
        if not isinstance(rspec, dict):
            causes.append(cause(where, "must be an object"))
            continue
        count = rspec.get("replicas", 1)
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            causes.append(cause(f"{where}.replicas", f"Invalid value: {count!r}: must be a non-negative integer"))
        elif rtype in ("Chief", "Master", "Evaluator") and (count or 0) > 1:
            causes.append(cause(f"{where}.replicas", f"Invalid value: {count}: there must be only 1 {rtype} replica"))
        policy = rspec.get("restartPolicy")
        if policy is not None and policy not in ("Always", "OnFailure", "Never", "ExitCode"):
            causes.append(cause(f"{where}.restartPolicy", f"Unsupported value: {policy!r}", "FieldValueNotSupported"))
        pod_spec = (rspec.get("template") or {}).get("spec")
        pod_causes = validate_pod_spec(f"{where}.template.spec", pod_spec)
        causes.extend(pod_causes)
        # Without causes the spec is a dict of containers (the isinstance tells mypy so).
        if (
            not pod_causes
            and isinstance(pod_spec, dict)
            and not any(c.get("name") == "tensorflow" for c in pod_spec["containers"])
        ):
            causes.append(
                cause(f"{where}.template.spec.containers", f"There is no container named tensorflow in {rtype}")
            )
    if "Chief" in seen and "Master" in seen:
        causes.append(cause("spec.tfReplicaSpecs", "Chief and Master may not both be specified"))
    if spec.get("successPolicy") not in (None, "", "AllWorkers"):
        causes.append(
            cause("spec.successPolicy", f"Unsupported value: {spec['successPolicy']!r}", "FieldValueNotSupported")
        )
    policy = spec.get("runPolicy") or {}
    if not isinstance(policy, dict):
        causes.append(cause("spec.runPolicy", "must be an object"))
    else:
        if policy.get("cleanPodPolicy") not in (None, "All", "Running", "None"):
            causes.append(
                cause(
                    "spec.runPolicy.cleanPodPolicy",
                    f"Unsupported value: {policy['cleanPodPolicy']!r}",
                    "FieldValueNotSupported",
                )
            )
        if "suspend" in policy and not isinstance(policy["suspend"], bool):
            causes.append(cause("spec.runPolicy.suspend", f"Invalid value: {policy['suspend']!r}: must be a boolean"))
        causes.extend(validate_managed_by(policy, "spec.runPolicy", (TRAINING_OPERATOR_MANAGER, MULTIKUEUE_MANAGER)))
    return causes


# --- status (TFJobReconciler.UpdateJobStatus) ------------------------------------------------


def _worker0_completed(pods: list[dict]) -> bool:
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get(REPLICA_TYPE_LABEL) == "worker" and labels.get(REPLICA_INDEX_LABEL) == "0":
            return (pod.get("status") or {}).get("phase") == "Succeeded"
    return False


def update_job_status(job: dict, specs: dict[str, dict], pods: list[dict], status: dict, now: float) -> None:
    """TFJobReconciler.UpdateJobStatus, applied to ``status`` in place; ``specs`` are the
    replica specs with the operator's defaults (``trainingop.replica_specs``)."""
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    statuses = status["replicaStatuses"]
    worker0_completed = _worker0_completed(pods)
    if status.get("startTime") is None:
        status["startTime"] = rfc3339(now)
    coordinated = any(t in specs for t in COORDINATORS)
    for rtype in REPLICA_TYPES:
        if rtype not in specs:
            continue
        rs = statuses.get(rtype) or {}
        succeeded, running, failed = rs.get("succeeded", 0), rs.get("active", 0), rs.get("failed", 0)
        expected = int(specs[rtype]["replicas"]) - succeeded
        if coordinated:
            if rtype in COORDINATORS:
                if running > 0:
                    update_conditions(status, "Running", "True", "TFJobRunning", f"TFJob {ns}/{name} is running.", now)
                if expected == 0:
                    status.setdefault("completionTime", rfc3339(now))
                    update_conditions(
                        status, "Succeeded", "True", "TFJobSucceeded", f"TFJob {ns}/{name} successfully completed.", now
                    )
        elif rtype == "Worker":
            if expected == 0 or (worker0_completed and success_policy(job) != "AllWorkers"):
                status.setdefault("completionTime", rfc3339(now))
                update_conditions(
                    status, "Succeeded", "True", "TFJobSucceeded", f"TFJob {ns}/{name} successfully completed.", now
                )
            elif running > 0:
                update_conditions(status, "Running", "True", "TFJobRunning", f"TFJob {ns}/{name} is running.", now)
        if failed > 0:
            status.setdefault("completionTime", rfc3339(now))
            update_conditions(
                status,
                "Failed",
                "True",
                "TFJobFailed",
                f"TFJob {ns}/{name} has failed because {failed} {rtype} replica(s) failed.",
                now,
            )
