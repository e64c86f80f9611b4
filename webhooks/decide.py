"""The webhook's decision for one AdmissionRequest: pass, queue (deny), or queue (suspend).

- Only writes of a kind jobdash manages (one with an adapter in queueing's registry) are
  acted on: CREATE, an UPDATE that clears the suspend flag, DELETE; everything else passes
  untouched. Nothing here names a kind: the adapter of
  the request's kind says where its suspend flag lives, the request says what it is called.
- A kind whose jobs are their pods (a plain Pod, a pod group) is decided by pods.py.
- Writes by jobdash's own identities (settings.JOBDASH_OWN_IDENTITIES) are its releases
  and take-backs: they pass under the current leader term (the fence).
- An object whose controller is itself a managed kind (the child jobs a kind's controller
  makes, the adapters say which) passes: its parent went through the queue (Kueue does
  the same).
- Everyone else's job is queued, idempotently by namespace and name
  (services.job_submit_or_find): Katib retries a refused create until it succeeds, and
  every retry must land on the job the first attempt made. A create with only
  metadata.generateName is named here, as the API server would name it (it runs mutating
  admission before it generates names), and queued under that name.
  - deny: the object is stored as a Queued job (metadata kept: ownerReferences to the
    Katib Trial, labels, annotations) and the create is refused with a message naming the
    job and its position. On release jobdash creates the object from the stored one.
  - suspend: the create is allowed with a JSONPatch setting the kind's suspend flag and
    the jobdash.io/queued label (and metadata.name, when the webhook named it); the job is
    bound to the object by namespace and name, and release (mode unsuspend) resumes it.
- A create that is already suspended is queued like any other (its stored manifest has
  the flag cleared: the queue decides when it runs).
- An UPDATE by anyone but jobdash that clears the suspend flag of an object jobdash holds
  (bound by namespace and name to a Queued job of the webhook, same kind) is refused with
  the job named: jobdash unsuspends it. One that changes what an admitted job asks of the
  cluster, or jobdash's own marks on it, is refused; one that changes the demand of a
  held, queued object updates its queued job (edits.py). Other updates by others pass.
- A DELETE by anyone but jobdash of an active job's object (held for a Queued job, or
  released) cancels the job in the deleter's name, as a cancel anywhere: by its owner, or
  by someone with the admin role in the namespace (or staff); anyone else's is refused,
  saying why.
- dryRun: the same verdict, nothing written, and nothing told about a job already stored
  under the name. A namespace jobdash does not manage passes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jobdash.cluster.gateway import JOB_ID_LABEL, STALE_TERM_REASON, TERM_ANNOTATION
from jobdash.jobs import cluster_selectors, selectors, services
from jobdash.jobs.exceptions import NotMember
from jobdash.jobs.models import Job, Source, State
from queueing import capabilities
from queueing.errors import ManifestError
from queueing.names import assign_generated_name
from queueing.workload import JobAdapter, adapter_for

from . import edits, pods
from .decision import ALLOW, Decision, refused
from .objects import manifest_text, stored_object, suspend_patch, suspended, unsuspended
from .review import AdmissionRequest
from .submit import submit

log = logging.getLogger(__name__)

MODES = ("deny", "suspend")


def _controlled_by_managed_kind(obj: dict[str, Any]) -> bool:
    """Its controller (the ownerReference with controller: true) is an object of a kind
    jobdash manages (the child jobs a managed kind's controller makes). The parent was
    queued; its children run when it does. (Katib's Trial is no such kind: a trial's job
    is queued.) The webhook cannot see the cluster: it takes the reference at
    its word, as Kueue does; the garbage collector deletes a child whose owner is not there."""
    metadata = obj.get("metadata")
    references = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    for reference in references if isinstance(references, list) else ():
        if isinstance(reference, dict) and reference.get("controller") is True:
            api_version, kind = reference.get("apiVersion"), reference.get("kind")
            return isinstance(api_version, str) and isinstance(kind, str) and adapter_for(api_version, kind) is not None
    return False


def _position(job: Job, created: bool) -> str:
    namespace = job.namespace.name
    if job.position:
        return f"position {job.position} in {namespace}'s queue"
    if created:
        # Provisional: last in its namespace until the next admission cycle ranks it.
        ahead = selectors.queued_besides(job)
        return f"position {ahead + 1} in {namespace}'s queue until the next admission cycle ranks it"
    return f"waiting in {namespace}'s queue for its first admission cycle"


_SUBMITTED_THROUGH: dict[str, str] = {Source.WEB: "web form", Source.API: "REST API", Source.ADMIN: "admin console"}


def _describe(job: Job, created: bool) -> str:
    """`jobdash job #12 (Queued, position 2 in team-a's queue: <why it waits>)`."""
    label = f"jobdash job #{job.pk}"
    if job.source != Source.WEBHOOK:
        through = _SUBMITTED_THROUGH.get(job.source, job.source)
        label += f" (submitted through the {through} by {job.submitted_by_name or 'jobdash'})"
    if job.state == State.QUEUED:
        why = f": {job.message}" if job.message else ""
        return f"{label}, Queued, {_position(job, created)}{why}"
    kind = _held_kind(job)
    if job.state == State.RELEASED:
        return f"{label}, Released: jobdash is creating its {kind} in the cluster now"
    return f"{label}, {job.state}: its {kind} is in the cluster"


def _held_kind(job: Job) -> str:
    """The kind of the job's object, from the stored manifest (fetched with the lookup)."""
    kind = (job.parsed or {}).get("kind")
    return kind if isinstance(kind, str) and kind else "object"


def _same_kind(job: Job, obj: dict[str, Any]) -> bool:
    parsed = job.parsed or {}
    return (parsed.get("apiVersion"), parsed.get("kind")) == (obj.get("apiVersion"), obj.get("kind"))


def _same_spec(job: Job, obj: dict[str, Any]) -> bool:
    """Same kind and spec, the suspend flag aside (the stored manifest has it cleared)."""
    if not _same_kind(job, obj):
        return False
    adapter = adapter_for(str(obj.get("apiVersion")), str(obj.get("kind")))
    if adapter is not None:
        return unsuspended(job.parsed or {}, adapter).get("spec") == unsuspended(obj, adapter).get("spec")
    return (job.parsed or {}).get("spec") == obj.get("spec")


def fence(request: AdmissionRequest) -> Decision:
    """A write of jobdash's own (create, unsuspend, take-back, the stamp before a delete)
    passes only under the leader term that leads now: the object carries the term it was
    written under (TERM_ANNOTATION), and one older than the Fence row's is refused before
    the API server stores anything. A deposed leader that wakes from a pause writes nothing.
    An object without the annotation is a write from outside the dispatcher (an operator's
    tool running as jobdash): it passes, as before the fence existed."""
    obj = request.object or {}
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    written = annotations.get(TERM_ANNOTATION) if isinstance(annotations, dict) else None
    if written is None:
        return ALLOW
    leading = cluster_selectors.leading_term() or 0
    try:
        term = int(written)
    except (TypeError, ValueError):
        term = -1
    if term >= leading:
        return ALLOW
    return refused(
        403,
        f"written under leader term {written}, but term {leading} leads now: a deposed leader writes nothing",
        STALE_TERM_REASON,
    )


@dataclass(frozen=True)
class _Subject:
    """What the messages name: the request's kind, namespace and name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def decide(request: AdmissionRequest, *, mode: str, own_identities: Iterable[str]) -> Decision:
    if mode not in MODES:
        raise ValueError(f"JOBDASH_WEBHOOK_MODE is {mode!r}; expected one of {', '.join(MODES)}")
    if request.username in own_identities:
        # jobdash's own write: only under the current term; its deletes pass
        return fence(request) if request.is_job_write else ALLOW
    adapter = request.adapter
    if adapter is None:
        return ALLOW
    if capabilities.objects_are_pods(adapter):
        return pods.decide(request, adapter)  # a pod cannot wait suspended, only gated: its own paths
    if request.is_job_create:
        return _create(request, adapter, mode)
    if request.is_job_update:
        return _update(request, adapter)
    if request.is_job_delete:
        return _delete(request, adapter)
    return ALLOW


def _create(request: AdmissionRequest, adapter: JobAdapter, mode: str) -> Decision:
    """Someone other than jobdash creates a job: it is queued by namespace and name, and the
    create refused (deny) or let through suspended (suspend)."""
    obj = request.object or {}
    if _controlled_by_managed_kind(obj):
        return ALLOW  # a managed parent's child: the parent went through the queue
    named = _named(request, obj)
    if isinstance(named, Decision):
        return named
    request, subject, generated = named
    submitted = submit(
        request,
        subject.namespace,
        subject.name,
        lambda: manifest_text(unsuspended(stored_object(request), adapter)),
        str(subject),
    )
    if isinstance(submitted, Decision):
        return submitted
    job, created = submitted
    if created:
        log.info(
            "webhook: %s from %s queued as job %s (%s mode%s)",
            subject,
            request.username,
            job.pk if job else "-",
            mode,
            ", dry run" if request.dry_run else "",
        )
    flag = capabilities.suspend_path(adapter)
    if mode == "deny" or flag is None:  # (a kind without a suspend flag cannot wait in the cluster)
        decision = _deny_mode(job, created, subject, obj)
    else:
        decision = _suspend_mode(job, created, subject, obj, suspend_patch(obj, flag, name=generated))
    if request.dry_run and job is not None:
        return _undisclosed(decision, subject)
    return decision


def _update(request: AdmissionRequest, adapter: JobAdapter) -> Decision:
    """Someone other than jobdash updates an object: clearing the suspend flag of an object
    jobdash holds is refused (jobdash unsuspends it when the quota allows); an edit of what
    its job asks of the cluster is edits.py's."""
    old, new = request.old_object or {}, request.object or {}
    if _controlled_by_managed_kind(old):
        return ALLOW  # a managed parent's child: its controller writes it
    if not suspended(old, adapter) or suspended(new, adapter):
        return edits.edited(request, adapter)
    subject, job = _held(request, old)
    if job is None:
        return edits.edited(request, adapter)
    if request.dry_run:
        return refused(
            403,
            f"{subject}: jobdash holds it suspended in its queue; only jobdash unsuspends it (dry run)",
            "Forbidden",
        )
    log.info("webhook: %s from %s refused: clears the suspend flag of job %s", subject, request.username, job.pk)
    return refused(
        403,
        f"{subject} is held by {_describe(job, False)}; jobdash unsuspends it when the quota allows "
        f"(cancel jobdash job #{job.pk} to take it out of the queue)",
        "Forbidden",
        job.pk,
    )


def _delete(request: AdmissionRequest, adapter: JobAdapter) -> Decision:
    """Someone other than jobdash deletes the object of an active job: the object a Queued
    job holds, or a released job's. Deleting it cancels the job, so the rule of any cancel
    applies: its owner may, anyone else needs the admin role (refused otherwise, saying why);
    the cancel names who deleted it."""
    old = request.old_object
    if not old:
        return ALLOW  # nothing said about what is deleted
    subject, job = _held(request, old)
    if job is None:
        job = _released(subject, old)
    if job is None:
        return ALLOW
    deleted_by = request.username or "system:anonymous"
    state = job.state
    try:
        cancelled = services.job_cancel_object_deleted(
            job_id=job.pk,
            kind=request.kind,
            object_name=f"{subject.namespace}/{subject.name}",
            deleted_by=deleted_by,
            groups=request.groups,
            dry_run=request.dry_run,
        )
    except NotMember as error:
        log.info("webhook: %s: delete by %s refused: %s", subject, deleted_by, error)
        return refused(
            403, f"jobdash refuses to delete {subject}: deleting it cancels its job, and {error}", "Forbidden", job.pk
        )
    if request.dry_run:
        return Decision(allowed=True, warnings=[f"{subject}: deleting it would cancel its jobdash job (dry run)"])
    if not cancelled:
        return ALLOW
    log.info("webhook: %s deleted by %s: job %s cancelled", subject, deleted_by, job.pk)
    return Decision(
        allowed=True,
        job_id=job.pk,
        warnings=[f"{subject} was jobdash job #{job.pk}'s, {state}: the job is cancelled"],
    )


def _named(request: AdmissionRequest, obj: dict[str, Any]) -> tuple[AdmissionRequest, _Subject, str] | Decision:
    """The namespace and name the create is queued under, with the name generated here from
    metadata.generateName (as the API server would: it runs mutating admission before it
    names), and the request renamed by it; or the decision on a create that has neither."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    namespace = request.namespace or metadata.get("namespace") or ""
    name = metadata.get("name") or request.name
    generated = ""
    if not name and metadata.get("generateName"):
        try:
            generated = _generated_name(obj)
        except ManifestError as error:
            if not selectors.is_managed_namespace(namespace):
                return ALLOW  # not jobdash's namespace: the API server judges the prefix
            problems = "; ".join(str(e) for e in error.errors)
            return refused(
                422, f"jobdash cannot queue this {request.kind} in {namespace or 'its namespace'}: {problems}"
            )
        name = generated
        request = dataclasses.replace(request, name=generated)  # stored_object names the object by it
    if not isinstance(name, str) or not name or not namespace:
        return refused(
            422,
            f"jobdash queues each {request.kind} by namespace and name: set metadata.name or metadata.generateName",
        )
    return request, _Subject(request.kind, namespace, name), generated


def _held(request: AdmissionRequest, obj: dict[str, Any]) -> tuple[_Subject, Job | None]:
    """The Queued job that holds the request's object: bound to it by namespace and name,
    queued through the webhook, of the same kind. None for any other object."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    namespace = request.namespace or metadata.get("namespace") or ""
    name = request.name or metadata.get("name") or ""
    subject = _Subject(request.kind, namespace, name)
    if not namespace or not name or _controlled_by_managed_kind(obj):
        return subject, None
    job = selectors.webhook_job_holding(namespace, name)
    if job is None or not _same_kind(job, obj):
        return subject, None
    return subject, job


def _released(subject: _Subject, obj: dict[str, Any]) -> Job | None:
    """The Released or Running job whose object this is (jobdash's job-id label on it, same kind)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    job_id = labels.get(JOB_ID_LABEL) if isinstance(labels, dict) else None
    if not isinstance(job_id, str) or not job_id.isdigit() or _controlled_by_managed_kind(obj):
        return None
    job = selectors.job_bound_to(subject.namespace, subject.name, int(job_id))
    if job is None or job.state not in (State.RELEASED, State.RUNNING) or not _same_kind(job, obj):
        return None
    return job


def _generated_name(obj: dict[str, Any]) -> str:
    """The name the API server would give the object (metadata.generateName + 5 random
    characters), checked by the kind's name rule; raises ManifestError."""
    metadata = obj.get("metadata")
    assert isinstance(metadata, dict)
    shell = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": {**metadata, "name": ""}}
    return assign_generated_name(shell)


def _undisclosed(decision: Decision, subject: _Subject) -> Decision:
    """A dry run costs nothing and its answer is read by whoever asks: it says whether the
    create would pass, never which job holds the name, whose it is or where it waits."""
    said = f"{subject}: jobdash already holds a job of this name (dry run: nothing stored)"
    if decision.allowed:
        return Decision(allowed=True, patch=decision.patch, warnings=[said])
    return dataclasses.replace(decision, message=said, job_id=None)  # the same refusal, saying less


def _differs(job: Job, obj: dict[str, Any]) -> str:
    if not _same_kind(job, obj):
        return f"the name is held by a {_held_kind(job)}, not this {obj.get('kind')}"
    return "this request's spec differs from the stored one"


def _deny_mode(job: Job | None, created: bool, subject: _Subject, obj: dict[str, Any]) -> Decision:
    if job is None:  # dry run of a new job
        return refused(403, f"{subject} would be queued by jobdash (dry run: nothing stored)", "Forbidden")
    verb = "is queued by jobdash as" if created else "is held by"
    message = f"{subject} {verb} {_describe(job, created)}. "
    if job.state == State.QUEUED:
        message += "jobdash creates it, with its metadata, when the namespace's quota allows. "
    if not created and not _same_spec(job, obj):
        differs = _differs(job, obj)
        message += f"{differs[0].upper()}{differs[1:]}: cancel jobdash job #{job.pk} to queue it instead. "
    message += "Retries of this create land on the same job."
    return refused(403, message, "Forbidden", job.pk)


def _suspend_mode(
    job: Job | None, created: bool, subject: _Subject, obj: dict[str, Any], patch: list[dict[str, Any]]
) -> Decision:
    if job is None:  # dry run of a new job
        return Decision(
            allowed=True,
            patch=patch,
            warnings=[f"jobdash would queue {subject} and keep it suspended until it is released (dry run)"],
        )
    if job.state != State.QUEUED:
        return refused(409, f"{subject} belongs to {_describe(job, created)}", "AlreadyExists", job.pk)
    if job.source != Source.WEBHOOK:
        return refused(
            409,
            f"the name {subject.namespace}/{subject.name} is taken by {_describe(job, created)}; "
            "choose another name or cancel that job",
            "AlreadyExists",
            job.pk,
        )
    if not created and not _same_spec(job, obj):
        return refused(
            409,
            f"{subject} is queued as {_describe(job, created)}, but {_differs(job, obj)}; "
            f"cancel jobdash job #{job.pk} to queue this one",
            "AlreadyExists",
            job.pk,
        )
    return Decision(
        allowed=True,
        patch=patch,
        job_id=job.pk,
        warnings=[
            f"{subject} is queued by jobdash as {_describe(job, created)}; it stays suspended until jobdash releases it"
        ],
    )
