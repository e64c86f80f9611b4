"""JobSet (``jobset.x-k8s.io/v1alpha2``) semantics of the JobSet controller, as pure functions.

Defaulting and validation mirror the JobSet webhook: successPolicy All, startupPolicy
AnyOrder, network.enableDNSHostnames and publishNotReadyAddresses true, child Jobs
Indexed with restartPolicy OnFailure; generated Job names must be DNS-1035 labels; on
update only ``suspend`` and (while suspended) the pod templates' scheduling fields,
labels and annotations may change.

Child Jobs are ``<jobset>-<replicatedJob>-<index>``; they and their pod templates carry
the ``jobset.sigs.k8s.io/*`` labels and annotations of ``labelAndAnnotateObject``.
"""

from __future__ import annotations

import copy
import hashlib

from .clock import rfc3339
from .jsoncodec import clone
from .ownerref import controller_reference
from .validation import DNS1035_MESSAGE, cause, dns1035_label, immutable, required

GROUP, VERSION, KIND = "jobset.x-k8s.io", "v1alpha2", "JobSet"
API_VERSION = f"{GROUP}/{VERSION}"
CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"
JOBSET_NAME_KEY = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_KEY = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB_NAME_KEY = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS_KEY = "jobset.sigs.k8s.io/replicatedjob-replicas"
GLOBAL_REPLICAS_KEY = "jobset.sigs.k8s.io/global-replicas"
JOB_INDEX_KEY = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX_KEY = "jobset.sigs.k8s.io/job-global-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
RESTARTS_KEY = "jobset.sigs.k8s.io/restart-attempt"
_MUTABLE_WHEN_SUSPENDED = ("nodeSelector", "tolerations", "schedulingGates")


def replicated_jobs(js: dict) -> list[dict]:
    jobs = (js.get("spec") or {}).get("replicatedJobs")
    return [r for r in jobs if isinstance(r, dict)] if isinstance(jobs, list) else []


def replicas(rjob: dict) -> int:
    value = rjob.get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def job_name(js_name: str, rjob_name: str, index: int) -> str:
    return f"{js_name}-{rjob_name}-{index}"


def is_suspended(js: dict) -> bool:
    return bool((js.get("spec") or {}).get("suspend"))


def managed_elsewhere(js: dict) -> bool:
    return (js.get("spec") or {}).get("managedBy") not in (None, CONTROLLER_NAME)


def default(js: dict) -> None:
    spec = js.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = {"operator": "All"}
    if spec.get("startupPolicy") is None:
        spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    for rjob in replicated_jobs(js):
        rjob.setdefault("replicas", 1)
        job_spec = (rjob.get("template") or {}).get("spec")
        if isinstance(job_spec, dict):
            job_spec.setdefault("completionMode", "Indexed")
            pod_spec = (job_spec.get("template") or {}).get("spec")
            if isinstance(pod_spec, dict):
                pod_spec.setdefault("restartPolicy", "OnFailure")
    network = spec.setdefault("network", {})
    if isinstance(network, dict):
        network.setdefault("enableDNSHostnames", True)
        network.setdefault("publishNotReadyAddresses", True)


def validate(js: dict) -> list[dict]:
    spec = js.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    rjobs = spec.get("replicatedJobs")
    if not isinstance(rjobs, list) or not rjobs:
        return [required("spec.replicatedJobs")]
    causes: list[dict] = []
    names: set[str] = set()
    for i, rjob in enumerate(rjobs):
        where = f"spec.replicatedJobs[{i}]"
        if not isinstance(rjob, dict) or not rjob.get("name"):
            causes.append(required(f"{where}.name"))
            continue
        if rjob["name"] in names:
            causes.append(cause(f"{where}.name", f"Duplicate value: {rjob['name']!r}", "FieldValueDuplicate"))
        names.add(rjob["name"])
        count = rjob.get("replicas")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            causes.append(cause(f"{where}.replicas", f"Invalid value: {count!r}: must be a non-negative integer"))
            continue
        longest = job_name(js["metadata"]["name"], rjob["name"], max(count - 1, 0))
        if not dns1035_label(longest):
            causes.append(cause(f"{where}.name", f"Invalid value: {longest!r}: {DNS1035_MESSAGE}"))
        job_spec = (rjob.get("template") or {}).get("spec")
        if not isinstance(job_spec, dict) or not isinstance(job_spec.get("template"), dict):
            causes.append(required(f"{where}.template.spec.template"))
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in names:
            causes.append(
                cause(
                    "spec.successPolicy.targetReplicatedJobs",
                    f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs",
                )
            )
    if (spec.get("successPolicy") or {}).get("operator") not in ("All", "Any"):
        causes.append(
            cause("spec.successPolicy.operator", "Unsupported value: must be All or Any", "FieldValueNotSupported")
        )
    if "suspend" in spec and spec["suspend"] is not None and not isinstance(spec["suspend"], bool):
        causes.append(cause("spec.suspend", f"Invalid value: {spec['suspend']!r}: must be a boolean"))
    return causes


def validate_update(old: dict, new: dict) -> list[dict]:
    """ValidateUpdate: replicatedJobs are immutable, but for the pod templates' labels,
    annotations, nodeSelector, tolerations and schedulingGates of a suspended JobSet."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    old_rjobs, new_rjobs = copy.deepcopy(old_spec.get("replicatedJobs")), copy.deepcopy(new_spec.get("replicatedJobs"))
    if old_spec.get("suspend") or new_spec.get("suspend"):
        for rjobs in (old_rjobs, new_rjobs):
            for rjob in rjobs if isinstance(rjobs, list) else []:
                _strip_mutable(rjob)
    causes = immutable("spec.replicatedJobs", old_rjobs, new_rjobs)
    causes += immutable("spec.managedBy", old_spec.get("managedBy"), new_spec.get("managedBy"))
    return causes


def _strip_mutable(rjob: object) -> None:
    """Drop what a suspended JobSet's pod templates may change, to compare the rest."""
    try:
        template = rjob["template"]["spec"]["template"]  # type: ignore[index]
    except (KeyError, TypeError):
        return
    if not isinstance(template, dict):
        return
    for part, keys in (("metadata", ("labels", "annotations")), ("spec", _MUTABLE_WHEN_SUSPENDED)):
        section = template.get(part)
        if isinstance(section, dict):
            for key in keys:
                section.pop(key, None)
            if not section:
                del template[part]


# --- what the JobSet controller creates --------------------------------------------------------


def _jobset_labels(js: dict, rjob: dict, index: int) -> dict[str, str]:
    meta = js["metadata"]
    name = job_name(meta["name"], rjob["name"], index)
    global_index, total = 0, 0
    for other in replicated_jobs(js):
        if other["name"] == rjob["name"]:
            global_index = total + index
        total += replicas(other)
    return {
        JOBSET_NAME_KEY: meta["name"],
        JOBSET_UID_KEY: meta["uid"],
        REPLICATED_JOB_NAME_KEY: rjob["name"],
        RESTARTS_KEY: str((js.get("status") or {}).get("restarts", 0)),
        REPLICATED_JOB_REPLICAS_KEY: str(replicas(rjob)),
        GLOBAL_REPLICAS_KEY: str(total),
        JOB_INDEX_KEY: str(index),
        JOB_KEY: hashlib.sha1(f"{meta['namespace']}/{name}".encode()).hexdigest(),
        JOB_GLOBAL_INDEX_KEY: str(global_index),
    }


def build_job(js: dict, rjob: dict, index: int) -> dict:
    """constructJob: the replicatedJob's template as a batch Job owned by the JobSet."""
    meta = js["metadata"]
    template = clone(rjob.get("template") or {})
    tmeta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    marks = _jobset_labels(js, rjob, index)
    pod_template = spec.setdefault("template", {})
    pod_meta = pod_template.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **marks}
    pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **marks}
    network = (js.get("spec") or {}).get("network") or {}
    if network.get("enableDNSHostnames"):
        pod_template.setdefault("spec", {})["subdomain"] = network.get("subdomain") or meta["name"]
    spec["suspend"] = is_suspended(js)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(meta["name"], rjob["name"], index),
            "namespace": meta["namespace"],
            "labels": {**(tmeta.get("labels") or {}), **marks},
            "annotations": {**(tmeta.get("annotations") or {}), **marks},
            "ownerReferences": [controller_reference(API_VERSION, KIND, js)],
        },
        "spec": spec,
    }


def expected_jobs(js: dict) -> int:
    """numJobsExpectedToSucceed under the success policy."""
    policy = (js.get("spec") or {}).get("successPolicy") or {}
    if policy.get("operator") == "Any":
        return 1
    targets = policy.get("targetReplicatedJobs") or []
    return sum(replicas(r) for r in replicated_jobs(js) if not targets or r["name"] in targets)


def counts_for_success(js: dict, job: dict) -> bool:
    targets = ((js.get("spec") or {}).get("successPolicy") or {}).get("targetReplicatedJobs") or []
    return not targets or (job["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME_KEY) in targets


def update_condition(status: dict, ctype: str, cstatus: str, reason: str, message: str, now: float) -> bool:
    """updateCondition: change a condition of the same type in place; add a new one only if True."""
    conditions = status.setdefault("conditions", [])
    fresh = {"type": ctype, "status": cstatus, "lastTransitionTime": rfc3339(now), "reason": reason, "message": message}
    for i, current in enumerate(conditions):
        if current.get("type") != ctype:
            continue
        if current.get("status") != cstatus:
            conditions[i] = fresh
            return True
        if current.get("reason") != reason or current.get("message") != message:
            conditions[i] = {**fresh, "lastTransitionTime": current.get("lastTransitionTime")}
            return True
        return False
    if cstatus == "True":
        conditions.append(fresh)
        return True
    if not conditions:
        status.pop("conditions")
    return False


def has_condition(obj: dict, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


def is_finished(js: dict) -> bool:
    return has_condition(js, "Completed") or has_condition(js, "Failed")
