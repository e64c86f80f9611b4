"""Kubernetes JSON objects -> the gateway's types. Pure functions, no client."""

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import orjson

from queueing import failures
from queueing.checkpoint_options import CHECKPOINTED_AT
from queueing.podspec import pod_shape
from queueing.quantity import canonical
from queueing.topology import HOSTNAME
from queueing.validation import Problems

from . import devices, kinds
from .gateway import (
    JOB_ID_LABEL,
    MANAGED_LABEL,
    TERM_ANNOTATION,
    JobObject,
    Lent,
    NodeInfo,
    PodInfo,
    QueuedObject,
    Quota,
)

log = logging.getLogger(__name__)
_POD_LABELS = kinds.pod_labels()


def amount(key: str, value: Any) -> int:
    """A ResourceQuota or node quantity in canonical units: `requests.cpu: "2"` -> 2000."""
    resource = key.split(".", 1)[1] if key.startswith(("requests.", "limits.")) else key
    return canonical(resource, value)


def amounts(values: Mapping[str, Any] | None) -> dict[str, int]:
    return {key: amount(key, value) for key, value in (values or {}).items()}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def quota(obj: Mapping[str, Any]) -> Quota:
    status = obj.get("status") or {}
    hard = status.get("hard") or (obj.get("spec") or {}).get("hard")
    return Quota(
        namespace=_meta(obj).get("namespace", ""),
        name=_meta(obj).get("name", ""),
        hard=amounts(hard),
        used=amounts(status.get("used")),
    )


def node(obj: Mapping[str, Any]) -> NodeInfo:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = amounts(status.get("allocatable") or status.get("capacity"))
    annotations = devices.annotations_of(obj)
    # HAMi's memory and cores are in no allocatable: its cards' totals stand in for them.
    allocatable.update(devices.hami_totals(annotations))
    return NodeInfo(
        name=_meta(obj)["name"],
        allocatable=allocatable,
        labels=dict(_meta(obj).get("labels") or {}),
        taints=tuple(spec.get("taints") or ()),
        unschedulable=bool(spec.get("unschedulable")),
        cards=devices.node_cards(allocatable, annotations),
        lent=lent(_meta(obj)["name"], annotations),
    )


LENT_UNTIL = "jobdash.io/lent-until"
LENT_POOL = "jobdash.io/lent-pool"
LENT_NOTICE = "jobdash.io/lent-notice-seconds"


def lent(name: str, annotations: Mapping[str, str]) -> Lent | None:
    """The node's lending, from the annotations the lender's controller writes; a time that
    does not parse lends nothing (the node is then treated as jobdash's own: logged, not guessed)."""
    until = annotations.get(LENT_UNTIL)
    if not until:
        return None
    try:
        moment = datetime.fromisoformat(until.replace("Z", "+00:00"))
    except ValueError:
        log.warning("node %s: %s=%r is no RFC 3339 time; not treated as lent", name, LENT_UNTIL, until)
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    notice: float | None = None
    try:
        notice = max(0.0, float(annotations[LENT_NOTICE])) if LENT_NOTICE in annotations else None
    except ValueError:
        log.warning("node %s: %s=%r is no number of seconds", name, LENT_NOTICE, annotations[LENT_NOTICE])
    return Lent(annotations.get(LENT_POOL) or name, moment.timestamp(), notice)


_REQUESTS: dict[bytes, Mapping[str, int]] = {}
_REQUESTS_MAX = 4096


def pod_requests(spec: Mapping[str, Any]) -> Mapping[str, int]:
    """A pod's effective requests (what the scheduler and ResourceQuota charge). Memoized
    on the parts of the spec they derive from: every status change of a pod arrives as a
    whole object, and parsing its quantities again was most of a watch event's cost."""
    try:
        key = orjson.dumps(
            [spec.get("containers"), spec.get("initContainers"), spec.get("overhead")], option=orjson.OPT_SORT_KEYS
        )
    except (TypeError, ValueError):
        key = None
    requests = _REQUESTS.get(key) if key is not None else None
    if requests is None:
        # Pods in a cluster were valid when created; tolerate what the validator would flag.
        requests = MappingProxyType(pod_shape(spec, "spec", Problems()).requests)
        if key is not None:
            if len(_REQUESTS) >= _REQUESTS_MAX:
                _REQUESTS.clear()
            _REQUESTS[key] = requests
    return requests


def pod(obj: Mapping[str, Any]) -> PodInfo:
    meta = _meta(obj)
    labels = meta.get("labels") or {}
    spec = obj.get("spec") or {}
    gates = spec.get("schedulingGates")
    status = obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    return PodInfo(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        phase=phase,
        node_name=spec.get("nodeName"),
        labels={k: v for k, v in labels.items() if k in _POD_LABELS},
        requests=pod_requests(spec),
        deleting=bool(meta.get("deletionTimestamp")),
        gates=tuple(gate.get("name", "") for gate in gates) if gates else (),
        selected_node=(spec.get("nodeSelector") or {}).get(HOSTNAME),
        cards=devices.pod_cards(meta.get("annotations") or {}),
        failure=_failure(obj, phase, status),
        uid=meta.get("uid", ""),
    )


def _failure(obj: Mapping[str, Any], phase: str, status: Mapping[str, Any]) -> failures.Failure | None:
    """Read only for a pod that shows trouble: every pod change of the watch comes through here."""
    if (
        phase == "Failed"
        or (phase == "Pending" and failures.image_pull_reason(status) is not None)
        or failures.disruption_reason(status) is not None
    ):
        return failures.pod_failure(obj)
    return None


def job_object(kind_key: str, obj: Mapping[str, Any]) -> JobObject:
    meta = _meta(obj)
    labels = dict(meta.get("labels") or {})
    job_id = labels.get(JOB_ID_LABEL, "")
    status = kinds.adapter(kind_key).status(obj)
    return JobObject(
        kind=kind_key,
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta.get("uid", ""),
        job_id=int(job_id) if job_id.isdigit() else None,
        suspended=kinds.is_suspended(kind_key, obj),
        phase=status.phase,
        message=status.message,
        labels=labels,
        deleting=bool(meta.get("deletionTimestamp")),
        checkpointed_at=_text((meta.get("annotations") or {}).get(CHECKPOINTED_AT)),
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def queued_object(obj: Mapping[str, Any]) -> QueuedObject:
    meta = _meta(obj)
    job_id = (meta.get("labels") or {}).get(JOB_ID_LABEL, "")
    return QueuedObject(
        namespace=meta.get("namespace", ""),
        name=meta["name"],
        uid=meta.get("uid", ""),
        job_id=int(job_id) if job_id.isdigit() else None,
        status=MappingProxyType(dict(obj.get("status") or {})),
        resource_version=meta.get("resourceVersion", ""),
        deleting=bool(meta.get("deletionTimestamp")),
    )


SERVER_SET_METADATA = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink")


def release_body(job_id: int, manifest: Mapping[str, Any], term: int | None = None) -> dict[str, Any]:
    """The object to create for a released job: the stored manifest, labelled as ours, and
    annotated with the leader term it is created under. Only its metadata is copied: that
    is all this changes (a release's manifest is its own copy already)."""
    body = dict(manifest)
    metadata = body["metadata"] = dict(body.get("metadata") or {})
    for key in SERVER_SET_METADATA:
        metadata.pop(key, None)
    metadata["labels"] = {**(metadata.get("labels") or {}), JOB_ID_LABEL: str(job_id), MANAGED_LABEL: "true"}
    if term is not None:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), TERM_ANNOTATION: str(term)}
    return body


def term_patch(term: int | None) -> dict[str, Any]:
    """The merge-patch part that stamps a write with its leader term (nothing without one)."""
    return {} if term is None else {"metadata": {"annotations": {TERM_ANNOTATION: str(term)}}}
