"""The webhook's decision for plain Pods and pod groups (queueing/kinds/pod.py), after Kueue's
pod integration. decide.py hands it every review of a kind whose jobs are their pods.

- CREATE by anyone but jobdash, in a namespace jobdash manages, of a Pod that no controller
  owns (an ownerReference with controller: true: a ReplicaSet's, a StatefulSet's, a Job's
  pods pass untouched) and that asks for a device (an extended resource such as
  nvidia.com/gpu), or carries the pod-group label or count annotation, or is created where
  Namespace.queue_all_pods is set: it is queued. The pod is created (it exists while it
  waits, as kubectl shows, SchedulingGated) with the placement gate added, labelled with its
  group and its job's id. A single pod is a group of one, named by the pod. The first member
  of a group stores the job; later members join it, each checked against it (the same count,
  the same shape) and counted (never more than the count).
- UPDATE by anyone but jobdash that lifts jobdash's gate from a pod: refused, only jobdash's
  release lifts it (the API server already refuses adding gates after creation).
- DELETE by anyone but jobdash of a pod of a Queued job: the job is cancelled (its other pods
  are then deleted by the dispatcher's sweep, as objects of a cancelled job are).
- Whatever the mode (deny, suspend): the pod must exist to be scheduled at all, and a gate is
  how a pod waits in the cluster.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from jobdash.cluster.gateway import JOB_ID_LABEL
from jobdash.jobs import selectors, services
from jobdash.jobs.exceptions import InvalidInput, NotMember
from jobdash.jobs.models import Job, Source
from queueing.errors import ManifestError
from queueing.kinds.pod import COUNT_ANNOTATION, COUNT_PATH, GROUP_LABEL, asks_devices
from queueing.names import assign_generated_name
from queueing.placement import GATE
from queueing.workload import JobAdapter, Workload, resource_key

from .decision import ALLOW, Decision, refused
from .objects import manifest_text, stored_object
from .review import AdmissionRequest
from .submit import submit

log = logging.getLogger(__name__)


def decide(request: AdmissionRequest, adapter: JobAdapter) -> Decision:
    if request.is_job_create:
        return _create(request, adapter)
    if request.is_job_update:
        return _update(request)
    if request.is_job_delete:
        return _delete(request)
    return ALLOW


def _create(request: AdmissionRequest, adapter: JobAdapter) -> Decision:
    """Someone other than jobdash creates a pod jobdash queues: the pod is created gated; the
    first member of its group stores the job, each later one is checked against it and
    counted."""
    obj = request.object or {}
    found = obj.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    namespace = request.namespace or metadata.get("namespace") or ""
    if not _queues(obj, namespace):
        return ALLOW
    generated = ""
    if not (metadata.get("name") or request.name) and metadata.get("generateName"):
        try:
            generated = assign_generated_name({"apiVersion": "v1", "kind": "Pod", "metadata": {**metadata, "name": ""}})
        except ManifestError as error:
            subject = f"Pod {namespace}/{metadata['generateName']}"
            return refused(422, f"jobdash cannot queue {subject}: " + "; ".join(str(e) for e in error.errors))
        request = _renamed(request, generated)
    stored = stored_object(request)
    name = stored["metadata"].get("name") or ""
    subject = f"Pod {namespace}/{name}"
    try:
        workload = adapter.validate_and_build(stored)
    except ManifestError as error:
        return refused(422, f"jobdash cannot queue {subject}: " + "; ".join(str(e) for e in error.errors))
    group = workload.name
    submitted = submit(request, namespace, group, lambda: manifest_text(stored), subject)
    if isinstance(submitted, Decision):
        return submitted
    job, created = submitted
    if job is not None and not created:
        mismatch = _mismatch(job, workload, adapter)
        if mismatch is not None:
            code, message = mismatch
            return refused(code, f"jobdash cannot queue {subject} in pod group {group!r}: {message}", job_id=job.pk)
    if job is None or request.dry_run:
        return Decision(
            allowed=True,
            patch=_patch(obj, group, None, generated),
            warnings=[f"jobdash would queue {subject} (pod group {group!r}); dry run: nothing stored"],
        )
    return _joined(request, obj, name, subject, job, workload, generated)


def _update(request: AdmissionRequest) -> Decision:
    old, new = request.old_object or {}, request.object or {}
    gated = any(isinstance(g, dict) and g.get("name") == GATE for g in _gates(old))
    if not gated or any(isinstance(g, dict) and g.get("name") == GATE for g in _gates(new)):
        return ALLOW
    job_id = _meta(old, "labels").get(JOB_ID_LABEL, "")
    return refused(
        403,
        f"Pod {request.namespace}/{request.name} waits in jobdash's queue (job #{job_id or '?'}): only jobdash "
        f"lifts its scheduling gate {GATE}, when the whole group can start",
        "Forbidden",
    )


def _delete(request: AdmissionRequest) -> Decision:
    old = request.old_object
    if not old:
        return ALLOW
    labels = _meta(old, "labels")
    group, job_id = labels.get(GROUP_LABEL), labels.get(JOB_ID_LABEL, "")
    if not isinstance(group, str) or not isinstance(job_id, str) or not job_id.isdigit():
        return ALLOW
    job = selectors.webhook_job_holding(request.namespace, group)
    if job is None or job.pk != int(job_id):
        return ALLOW
    subject = f"Pod {request.namespace}/{request.name}"
    deleted_by = request.username or "system:anonymous"
    try:  # deleting it cancels the job: the rule of any cancel (decide._delete)
        cancelled = services.job_cancel_object_deleted(
            job_id=job.pk, kind=subject, deleted_by=deleted_by, groups=request.groups, dry_run=request.dry_run
        )
    except NotMember as error:
        return refused(
            403, f"jobdash refuses to delete {subject}: deleting it cancels its job, and {error}", "Forbidden"
        )
    if request.dry_run:
        return Decision(allowed=True, warnings=[f"{subject}: deleting it would cancel its jobdash job (dry run)"])
    if not cancelled:
        return ALLOW
    log.info("webhook: %s deleted by %s: job %s cancelled", subject, deleted_by, job.pk)
    return Decision(
        allowed=True,
        job_id=job.pk,
        warnings=[f"{subject} was queued in jobdash job #{job.pk}, Queued: the job is cancelled, its other pods go"],
    )


def _queues(obj: Mapping[str, Any], namespace: str) -> bool:
    """Whether jobdash queues this pod: no controller owns it, jobdash manages its namespace,
    and it is a group's member, asks for a device, or its namespace queues every pod."""
    if _has_controller(obj):
        return False  # its controller's pods: a ReplicaSet's, a Job's (queued as that Job)
    queue_all = selectors.pod_queueing(namespace)
    if queue_all is None:
        return False  # not a namespace jobdash manages
    labelled = GROUP_LABEL in _meta(obj, "labels") or COUNT_ANNOTATION in _meta(obj, "annotations")
    return labelled or queue_all or asks_devices(obj)


def _joined(
    request: AdmissionRequest,
    obj: Mapping[str, Any],
    pod: str,
    subject: str,
    job: Job,
    workload: Workload,
    generated: str,
) -> Decision:
    """The pod counted in its job's group, under the job row's lock: never more than the count."""
    group = workload.name
    try:
        members = services.pod_group_join(job_id=job.pk, pod=pod, total=workload.pods)
    except InvalidInput as error:
        return refused(422, f"jobdash cannot queue {subject}: {error.message}", job_id=job.pk)
    log.info(
        "webhook: %s from %s queued in job %s (%d of %d)", subject, request.username, job.pk, members, workload.pods
    )
    said = f"{subject} is queued by jobdash as job #{job.pk} (pod group {group!r}: {members} of {workload.pods} pods)"
    return Decision(
        allowed=True,
        patch=_patch(obj, group, job.pk, generated),
        job_id=job.pk,
        warnings=[f"{said}; it stays SchedulingGated until jobdash releases the group"],
    )


def _meta(obj: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    metadata = (obj or {}).get("metadata")
    found = metadata.get(key) if isinstance(metadata, dict) else None
    return found if isinstance(found, dict) else {}


def _has_controller(obj: Mapping[str, Any]) -> bool:
    metadata = obj.get("metadata")
    references = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    return any(isinstance(r, dict) and r.get("controller") is True for r in references or ())


def _gates(obj: Mapping[str, Any]) -> list[Any]:
    spec = obj.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, dict) else None
    return list(gates) if isinstance(gates, list) else []


def _patch(obj: Mapping[str, Any], group: str, job_id: int | None, generated: str) -> list[dict[str, Any]]:
    """The gate last in spec.schedulingGates, the group and job labels, and the name the
    webhook generated (each one `add`: onto an existing member it replaces it)."""
    labels = {**_meta(obj, "labels"), GROUP_LABEL: group}
    if job_id is not None:
        labels[JOB_ID_LABEL] = str(job_id)
    gates = [g for g in _gates(obj) if not (isinstance(g, dict) and g.get("name") == GATE)] + [{"name": GATE}]
    patch: list[dict[str, Any]] = [
        {"op": "add", "path": "/metadata/labels", "value": labels},
        {"op": "add", "path": "/spec/schedulingGates", "value": gates},
    ]
    if generated:
        patch.append({"op": "add", "path": "/metadata/name", "value": generated})
    return patch


def _renamed(request: AdmissionRequest, name: str) -> AdmissionRequest:
    return dataclasses.replace(request, name=name)  # stored_object names the object by it


def _mismatch(job: Job, workload: Workload, adapter: JobAdapter) -> tuple[int, str] | None:
    """Why this pod cannot join the active job of its group's name, or None."""
    if job.kind_key != resource_key(adapter) or job.source != Source.WEBHOOK:
        return 409, f"the name is taken by jobdash job #{job.pk} ({job.kind}, {job.state}); choose another"
    first = Workload.from_json(job.workload)
    if first.pods != workload.pods:
        return 422, f"{COUNT_PATH}: is {workload.pods}, but the group's first pod said {first.pods}"
    mine, theirs = workload.pod_sets[0], first.pod_sets[0]
    for field, path in (
        ("requests", "spec.containers[*].resources"),
        ("limits", "spec.containers[*].resources"),
        ("node_selector", "spec.nodeSelector"),
        ("tolerations", "spec.tolerations"),
        ("node_affinity", "spec.affinity.nodeAffinity"),
    ):
        if getattr(mine, field) != getattr(theirs, field):
            return 422, (
                f"{path}: differs from the group's first pod ({field.replace('_', ' ')} "
                f"{_shown(getattr(mine, field))} here, {_shown(getattr(theirs, field))} there); "
                "the pods of a group share one shape"
            )
    return None


def _shown(value: Any) -> str:
    return str(dict(value)) if isinstance(value, Mapping) else str(value)
