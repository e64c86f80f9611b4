"""An UPDATE by anyone but jobdash of an object jobdash holds or has admitted.

jobdash admitted a job for what it asked when it was released: its pod sets, each pod's
requests and limits, where its pods may run, its priority class, its topology
(queueing.demand_change). An edit of that after admission would run a job jobdash never
admitted (a job patched from 4 to 40 workers runs 41 pods on a quota charged for 5; a
job whose gang grows while it waits suspended runs a partial gang), so, as Kueue
stops a job whose pod sets no longer match its Workload:

- admitted (the old object carries jobdash's jobdash.io/job-id label, set at release, and
  is not suspended; or its job is Released or Running): an edit that changes the demand,
  or removes or changes jobdash's own labels, annotations or placement gate, is refused
  (403 Forbidden) with what changed and what to do instead: cancel and resubmit (jobdash
  has no resize, elastic jobs included);
- held (suspended, its job Queued; the webhook's suspend mode, or a preempted job waiting
  again): an edit that changes the demand updates the queued job
  (services.job_update_queued_manifest), validated as a submission (invalid: 422 naming
  the field, nothing written), kept in its place unless its demand grew;
- anything else passes: metadata of the user's own, other spec fields (images, env,
  commands), objects jobdash never bound, a finished job's object.

The demand is compared without the database (an UPDATE that changes none of it, the
controllers' and people's usual ones, costs no query); the job is read only for an edit
that does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from jobdash.cluster.gateway import JOB_ID_LABEL, MANAGED_LABEL, QUEUED_LABEL, TERM_ANNOTATION
from jobdash.jobs import selectors, services
from jobdash.jobs.exceptions import ClusterUnavailable, Conflict, Forbidden, InvalidInput
from jobdash.jobs.models import Job, State
from queueing import capabilities, placement
from queueing.demand_change import DemandChange, demand_change
from queueing.workload import JobAdapter, read_path

from .decision import ALLOW, Decision, refused, service_refusal
from .objects import manifest_text, stored_object, suspended, unsuspended
from .review import AdmissionRequest

log = logging.getLogger(__name__)

OWN_LABELS = (JOB_ID_LABEL, MANAGED_LABEL, QUEUED_LABEL)
OWN_ANNOTATIONS = (TERM_ANNOTATION,)
ADMITTED = (State.RELEASED, State.RUNNING)


def edited(request: AdmissionRequest, adapter: JobAdapter) -> Decision:
    old, new = request.old_object or {}, request.object or {}
    bound_id = _job_id(old)
    if bound_id is None and not suspended(old, adapter):
        return ALLOW  # never released by jobdash, nor held by it
    change = demand_change(adapter, old, new, services.EditRuntimes())
    marks = _marks_changed(adapter, old, new) if bound_id is not None else []
    if not change and not marks:
        return ALLOW
    namespace = request.namespace or read_path(old, ("metadata", "namespace")) or ""
    name = request.name or read_path(old, ("metadata", "name")) or ""
    subject = f"{request.kind} {namespace}/{name}"
    job = selectors.job_bound_to(namespace, name, bound_id)
    if job is None or not _same_kind(job, old):
        return ALLOW
    if job.state == State.QUEUED and suspended(old, adapter) and not marks:
        return _update_queued(request, adapter, subject, job, change)
    if job.state not in (State.QUEUED, *ADMITTED):
        return ALLOW  # finished: jobdash answers for it no more
    return _refused(request, adapter, subject, job, change, marks)


def _job_id(obj: Mapping[str, Any]) -> int | None:
    value = read_path(obj, ("metadata", "labels", JOB_ID_LABEL))
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _same_kind(job: Job, obj: Mapping[str, Any]) -> bool:
    return (job.api_version, job.kind) == (obj.get("apiVersion"), obj.get("kind"))


def _marks_changed(adapter: JobAdapter, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """jobdash's own labels, annotations and placement gate that the edit takes off or changes."""
    found = []
    for section, keys in (("labels", OWN_LABELS), ("annotations", OWN_ANNOTATIONS)):
        before = read_path(old, ("metadata", section)) or {}
        after = read_path(new, ("metadata", section)) or {}
        found += [f"{section[:-1]} {key}" for key in keys if key in before and before.get(key) != after.get(key)]
    if _gated(adapter, old) and not _gated(adapter, new):
        found.append(f"scheduling gate {placement.GATE} in its pod templates")
    return found


def _gated(adapter: JobAdapter, obj: Mapping[str, Any]) -> bool:
    """Whether any of its pod templates carries jobdash's placement gate."""
    # Asked for no roles, no kind adds a template: obj is only read.
    for _, template in capabilities.pod_templates(adapter, obj):  # type: ignore[arg-type]
        spec = capabilities.template_pod_spec(adapter, template) or {}
        gates = spec.get(placement.GATES)
        if isinstance(gates, list) and any(isinstance(g, Mapping) and g.get("name") == placement.GATE for g in gates):
            return True
    return False


def _refused(
    request: AdmissionRequest,
    adapter: JobAdapter,
    subject: str,
    job: Job,
    change: DemandChange,
    marks: list[str],
) -> Decision:
    what = []
    if change:
        what.append(f"changes what it asks of the cluster ({change})")
    if marks:
        what.append(f"removes or changes jobdash's own {', '.join(marks)}")
    elastic = (
        " (jobdash cannot resize an elastic job in place either)"
        if capabilities.elastic_range(adapter, request.old_object or {})
        else ""
    )
    instead = (
        f"to run it so, cancel jobdash job #{job.pk} and submit the edited {request.kind} again{elastic}"
        if change
        else "leave jobdash's labels, annotations and gate as they are (patch the fields you mean to change "
        "instead of replacing the object)"
    )
    log.info("webhook: update of %s by %s refused: %s", subject, request.username, "; ".join(what))
    return refused(
        403,
        f"{subject} was admitted by jobdash as job #{job.pk} ({job.state}) for the demand it had then; "
        f"this update {' and '.join(what)}: {instead}",
        "Forbidden",
        job.pk,
    )


def _update_queued(
    request: AdmissionRequest, adapter: JobAdapter, subject: str, job: Job, change: DemandChange
) -> Decision:
    """The held object's queued job takes the edit: validated as a submission, then stored."""
    obj = stored_object(request)
    labels = read_path(obj, ("metadata", "labels"))
    annotations = read_path(obj, ("metadata", "annotations"))
    for found, keys in ((labels, OWN_LABELS), (annotations, OWN_ANNOTATIONS)):
        for key in keys if isinstance(found, dict) else ():
            found.pop(key, None)
    for section in ("labels", "annotations"):
        if obj["metadata"].get(section) == {}:
            del obj["metadata"][section]
    manifest = manifest_text(unsuspended(placement.restore(adapter, obj), adapter))
    who = request.username or "system:anonymous"
    try:
        edit = services.job_update_queued_manifest(
            job_id=job.pk, manifest=manifest, edited_by=who, note=str(change), dry_run=request.dry_run
        )
    except (InvalidInput, Forbidden, ClusterUnavailable) as error:
        return service_refusal(
            error, f"jobdash cannot queue {subject} as edited (held by jobdash job #{job.pk})", job.pk
        )
    except Conflict:
        # It left the queue since it was read: released meanwhile, so admitted.
        job.refresh_from_db(fields=["state"])
        return _refused(request, adapter, subject, job, change, [])
    place = (
        f"it goes to the back of {job.namespace.name}'s queue (its demand grew)"
        if edit.grew
        else "it keeps its place in the queue"
    )
    dry = " (dry run: nothing stored)" if request.dry_run else ""
    log.info("webhook: %s edited by %s: queued job %s updated (%s)%s", subject, who, job.pk, change, dry)
    return Decision(
        allowed=True,
        job_id=job.pk,
        warnings=[
            f"{subject}: its queued jobdash job #{job.pk} now asks for the edited demand ({change}); {place}{dry}"
        ],
    )
