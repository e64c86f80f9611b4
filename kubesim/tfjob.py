"""TFJob semantics of the Kubeflow training-operator (release-1.9), as pure functions.

Validation mirrors the operator's webhook (ValidateV1TFJob), defaults mirror
SetDefaults_TFJob (replicas 1, restartPolicy Never, cleanPodPolicy Running, type
names camel-cased), and ``update_job_status`` is a transcription of the
operator's ``TFJobReconciler.UpdateJobStatus`` plus ``UpdateJobConditions``.
"""

from __future__ import annotations

import copy

from .clock import rfc3339

GROUP, VERSION, KIND = "kubeflow.org", "v1", "TFJob"

# The order UpdateJobStatus walks replica types in: it decides which condition wins.
REPLICA_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")
_CANONICAL = {name.lower(): name for name in REPLICA_TYPES}
COORDINATORS = ("Chief", "Master")

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"

DURATION_ANNOTATION = "kubesim.io/duration-seconds"
FAIL_ANNOTATION = "kubesim.io/fail"


def canonical_type(name: object) -> str | None:
    return _CANONICAL.get(name.lower()) if isinstance(name, str) else None


def replica_specs(job: dict) -> dict[str, dict]:
    """Replica specs keyed by camel-cased type, with the operator's defaults filled in."""
    specs: dict[str, dict] = {}
    for name, spec in ((job.get("spec") or {}).get("tfReplicaSpecs") or {}).items():
        rtype = canonical_type(name)
        if rtype is None or not isinstance(spec, dict):
            continue
        spec = dict(spec)
        spec.setdefault("replicas", 1)
        if spec["replicas"] is None:
            spec["replicas"] = 1
        spec.setdefault("restartPolicy", "Never")
        specs[rtype] = spec
    return specs


def run_policy(job: dict) -> dict:
    policy = dict((job.get("spec") or {}).get("runPolicy") or {})
    policy.setdefault("cleanPodPolicy", "Running")
    return policy


def is_suspended(job: dict) -> bool:
    return bool(run_policy(job).get("suspend"))


def success_policy(job: dict) -> str:
    return (job.get("spec") or {}).get("successPolicy") or ""


def _has_condition(status: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in status.get("conditions") or [])


def is_finished(status: dict) -> bool:
    return _has_condition(status, "Succeeded") or _has_condition(status, "Failed")


def is_succeeded(status: dict) -> bool:
    return _has_condition(status, "Succeeded")


def is_running(status: dict) -> bool:
    return _has_condition(status, "Running")


def is_suspended_status(status: dict) -> bool:
    return _has_condition(status, "Suspended")


def expected_pods(job: dict) -> list[tuple[str, int]]:
    return [(rtype, i) for rtype, spec in replica_specs(job).items() for i in range(int(spec["replicas"]))]


def pod_name(job_name: str, rtype: str, index: int) -> str:
    return f"{job_name}-{rtype.lower()}-{index}"


def _is_master_role(specs: dict, rtype: str, index: int) -> bool:
    if rtype in COORDINATORS:
        return True
    return rtype == "Worker" and index == 0 and not any(t in specs for t in COORDINATORS)


def build_pod(job: dict, rtype: str, index: int) -> dict:
    """The pod the operator creates for one replica: template + the operator's labels and owner."""
    specs = replica_specs(job)
    spec = specs[rtype]
    meta = job["metadata"]
    template = copy.deepcopy(spec.get("template") or {})
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {})
    labels.update(
        {
            JOB_NAME_LABEL: meta["name"],
            OPERATOR_NAME_LABEL: "tfjob-controller",
            REPLICA_TYPE_LABEL: rtype.lower(),
            REPLICA_INDEX_LABEL: str(index),
        }
    )
    if _is_master_role(specs, rtype, index):
        labels[JOB_ROLE_LABEL] = "master"
    pod_spec = template.get("spec") or {}
    # The operator maps its ExitCode policy onto the pod's Never and restarts pods itself.
    restart = spec.get("restartPolicy", "Never")
    pod_spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
    pod_meta = {
        "name": pod_name(meta["name"], rtype, index),
        "namespace": meta["namespace"],
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": KIND,
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if template_meta.get("annotations"):
        pod_meta["annotations"] = dict(template_meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def _annotation(job: dict, key: str) -> str | None:
    """A kubesim.io annotation from the TFJob, else from any replica's pod template."""
    value = (job["metadata"].get("annotations") or {}).get(key)
    if value is not None:
        return value
    for spec in replica_specs(job).values():
        value = (((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}).get(key)
        if value is not None:
            return value
    return None


def work_duration(job: dict, default: float) -> float:
    value = _annotation(job, DURATION_ANNOTATION)
    try:
        return max(0.0, float(value)) if value is not None else default
    except ValueError:
        return default


def should_fail(job: dict) -> bool:
    return str(_annotation(job, FAIL_ANNOTATION) or "").lower() == "true"


# --- validation (the operator's webhook, answered as 422 like a CRD schema would be) ---------


def validate(job: dict) -> list[dict]:
    from .resources import cause, dns1035_label, required, validate_pod_spec

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
    return causes


# --- status (UpdateJobConditions / UpdateJobStatus) ----------------------------------------


def update_conditions(status: dict, ctype: str, cstatus: str, reason: str, message: str, now: float) -> None:
    """commonutil.UpdateJobConditions: setCondition + filterOutCondition."""
    conditions = status.get("conditions") or []
    current = next((c for c in conditions if c.get("type") == ctype), None)
    if current is not None and current.get("status") == cstatus and current.get("reason") == reason:
        return
    stamp = rfc3339(now)
    transition = current["lastTransitionTime"] if current is not None and current.get("status") == cstatus else stamp
    kept = []
    for c in conditions:
        if c.get("type") == ctype:
            continue
        if {ctype, c.get("type")} == {"Running", "Restarting"}:
            continue
        if ctype in ("Failed", "Succeeded") and c.get("type") == "Running":
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


def replica_statuses(job: dict, pods: list[dict]) -> dict[str, dict]:
    """Active/succeeded/failed per replica type, counted from the job's pods (zeros omitted, as in Go)."""
    name = job["metadata"]["name"]
    counts = {rtype: {"active": 0, "succeeded": 0, "failed": 0} for rtype in replica_specs(job)}
    for pod in pods:
        rtype = canonical_type((pod["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL))
        if rtype not in counts:
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            counts[rtype]["active"] += 1
        elif phase == "Succeeded":
            counts[rtype]["succeeded"] += 1
        elif phase == "Failed":
            counts[rtype]["failed"] += 1
    result = {}
    for rtype, c in counts.items():
        entry: dict[str, object] = {k: v for k, v in c.items() if v}
        entry["labelSelector"] = {
            "matchLabels": {
                JOB_NAME_LABEL: name,
                OPERATOR_NAME_LABEL: "tfjob-controller",
                REPLICA_TYPE_LABEL: rtype.lower(),
            }
        }
        result[rtype] = entry
    return result


def _worker0_completed(pods: list[dict]) -> bool:
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get(REPLICA_TYPE_LABEL) == "worker" and labels.get(REPLICA_INDEX_LABEL) == "0":
            return (pod.get("status") or {}).get("phase") == "Succeeded"
    return False


def update_job_status(job: dict, pods: list[dict], status: dict, now: float) -> None:
    """TFJobReconciler.UpdateJobStatus, applied to ``status`` in place."""
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    specs = replica_specs(job)
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
