"""batch/v1 Job: the API server's defaulting and validation, and the Job controller's pods.

Defaulting (SetDefaults_Job, plus the registry's generateSelector): parallelism 1 and,
when neither is set, completions 1; backoffLimit 6; completionMode NonIndexed; suspend
false; the pod template gets ``batch.kubernetes.io/controller-uid``,
``batch.kubernetes.io/job-name``, ``controller-uid`` and ``job-name`` labels and the Job a
selector on the controller uid; a Job without labels shows its template's.

Validation (ValidateJob / ValidateJobUpdate): restartPolicy OnFailure or Never,
non-negative parallelism/completions/backoffLimit, Indexed needs completions, the
selector must match the template; selector and completionMode are immutable, completions
too (except an Indexed Job scaled with parallelism), and the pod template as well --
except its scheduling directives, labels and annotations while the Job is suspended and
has not started.
"""

from __future__ import annotations

import copy

from .clock import rfc3339
from .jsoncodec import clone
from .ownerref import controller_reference
from .podvalidation import validate_scheduling
from .validation import (
    cause,
    default_pod_spec,
    immutable,
    labels_of,
    not_supported,
    optional_int,
    required,
    validate_pod_spec,
)

GROUP, VERSION, KIND = "batch", "v1", "Job"
API_VERSION = f"{GROUP}/{VERSION}"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # label and annotation
DEFAULT_BACKOFF_LIMIT = 6
# The pod-template fields a suspended, not yet started Job may change (JobMutableNodeSchedulingDirectives).
_MUTABLE_WHEN_SUSPENDED = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def default(job: dict) -> None:
    spec = job.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else DEFAULT_BACKOFF_LIMIT
    spec.setdefault("completionMode", "NonIndexed")
    if spec.get("suspend") is None:
        spec["suspend"] = False
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    if isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])
    meta = job["metadata"]
    if meta.get("uid") and not spec.get("manualSelector"):
        _generate_selector(job, template)
    if not meta.get("labels") and labels_of(template):
        meta["labels"] = dict(labels_of(template))


def _generate_selector(job: dict, template: dict) -> None:
    meta = job["metadata"]
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    if not isinstance(labels, dict):
        return
    name, uid = meta["name"], meta["uid"]
    if len(name) <= 63:  # only a valid label value
        labels.setdefault(LEGACY_JOB_NAME_LABEL, name)
        labels.setdefault(JOB_NAME_LABEL, name)
    labels.setdefault(LEGACY_CONTROLLER_UID_LABEL, uid)
    labels.setdefault(CONTROLLER_UID_LABEL, uid)
    if job["spec"].get("selector") is None:
        job["spec"]["selector"] = {"matchLabels": {CONTROLLER_UID_LABEL: uid}}


def validate(job: dict) -> list[dict]:
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[dict] = []
    for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        causes.extend(optional_int(spec, key, f"spec.{key}"))
    causes.extend(optional_int(spec, "activeDeadlineSeconds", "spec.activeDeadlineSeconds", minimum=1))
    mode = spec.get("completionMode")
    if mode not in ("NonIndexed", "Indexed"):
        causes.append(not_supported("spec.completionMode", mode, ("NonIndexed", "Indexed")))
    elif mode == "Indexed" and spec.get("completions") is None:
        causes.append(required("spec.completions", "Required value: when completion mode is Indexed"))
    if not isinstance(spec.get("suspend"), bool):
        causes.append(cause("spec.suspend", f"Invalid value: {spec.get('suspend')!r}: must be a boolean"))
    template = spec.get("template")
    if not isinstance(template, dict):
        return causes + [required("spec.template")]
    pod_spec = template.get("spec")
    causes.extend(validate_pod_spec("spec.template.spec", pod_spec))
    if isinstance(pod_spec, dict):
        causes.extend(validate_scheduling("spec.template.spec", pod_spec))
    if isinstance(pod_spec, dict) and pod_spec.get("restartPolicy") not in ("OnFailure", "Never"):
        causes.append(
            not_supported("spec.template.spec.restartPolicy", pod_spec.get("restartPolicy"), ("OnFailure", "Never"))
        )
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        causes.append(required("spec.selector"))
    else:
        template_labels = labels_of(template)
        if any(template_labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
            causes.append(
                cause(
                    "spec.template.metadata.labels",
                    f"Invalid value: {template_labels!r}: `selector` does not match template `labels`",
                )
            )
    return causes


def validate_update(old: dict, new: dict) -> list[dict]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes = immutable("spec.selector", old_spec.get("selector"), new_spec.get("selector"))
    causes += immutable("spec.completionMode", old_spec.get("completionMode"), new_spec.get("completionMode"))
    elastic = new_spec.get("completionMode") == "Indexed" and new_spec.get("completions") == new_spec.get("parallelism")
    if not elastic:
        causes += immutable("spec.completions", old_spec.get("completions"), new_spec.get("completions"))
    old_template = copy.deepcopy(old_spec.get("template"))
    new_template = new_spec.get("template")
    not_started = not (old.get("status") or {}).get("startTime")
    if old_spec.get("suspend") and not_started and isinstance(old_template, dict) and isinstance(new_template, dict):
        old_meta = old_template.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            old_meta.pop(key, None)
            if key in (new_template.get("metadata") or {}):
                old_meta[key] = new_template["metadata"][key]
        old_pod, new_pod = old_template.setdefault("spec", {}), new_template.get("spec") or {}
        for key in _MUTABLE_WHEN_SUSPENDED:
            old_pod.pop(key, None)
            if key in new_pod:
                old_pod[key] = new_pod[key]
    if old_template != new_template:
        causes.append(cause("spec.template", "Invalid value: field is immutable"))
    return causes


# --- what the Job controller reads and writes -------------------------------------------------


def condition(job: dict, ctype: str) -> dict | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), None)


def has_condition(job: dict, ctype: str) -> bool:
    found = condition(job, ctype)
    return found is not None and found.get("status") == "True"


def is_complete(job: dict) -> bool:
    return has_condition(job, "Complete")


def is_failed(job: dict) -> bool:
    return has_condition(job, "Failed")


def is_finished(job: dict) -> bool:
    return is_complete(job) or is_failed(job)


def is_suspended(job: dict) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def is_indexed(job: dict) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def wanted_active(spec: dict, succeeded: int, active: int = 0) -> int:
    """manageJob's wantActive for a running (not suspended) Job."""
    parallelism = int(spec.get("parallelism") or 0)
    completions = spec.get("completions")
    if completions is None:  # a work queue: done once any pod succeeded and the rest have finished
        return active if succeeded > 0 else parallelism
    return max(0, min(parallelism, int(completions) - succeeded))


def ensure_condition(status: dict, ctype: str, cstatus: str, reason: str, message: str, now: float) -> bool:
    """ensureJobConditionStatus: update a condition in place, or add it unless it would be False."""
    conditions = status.setdefault("conditions", [])
    stamp = rfc3339(now)
    fresh = {
        "type": ctype,
        "status": cstatus,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }
    for i, current in enumerate(conditions):
        if current.get("type") == ctype:
            if (current.get("status"), current.get("reason"), current.get("message")) == (cstatus, reason, message):
                return False
            conditions[i] = fresh
            return True
    if cstatus == "False":
        if not conditions:
            status.pop("conditions")
        return False
    conditions.append(fresh)
    return True


def completion_index(pod: dict) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def build_pod(job: dict, index: int | None) -> dict:
    """The pod the Job controller creates: the template, ``generateName`` ``<job>-`` (Indexed:
    ``<job>-<index>-``, hostname ``<job>-<index>``, the completion index label/annotation)."""
    meta = job["metadata"]
    template = clone(job["spec"]["template"])
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    annotations = dict(tmeta.get("annotations") or {})
    pod_spec = template.get("spec") or {}
    prefix = f"{meta['name']}-"
    if index is not None:
        prefix = f"{meta['name']}-{index}-"
        labels[COMPLETION_INDEX] = str(index)
        annotations[COMPLETION_INDEX] = str(index)
        pod_spec.setdefault("hostname", f"{meta['name']}-{index}")
    pod_meta: dict = {
        "generateName": prefix,
        "namespace": meta["namespace"],
        "labels": labels,
        "ownerReferences": [controller_reference(API_VERSION, KIND, job)],
    }
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def format_indexes(indexes: set[int]) -> str:
    """status.completedIndexes: "0-2,4"."""
    parts: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
