"""Writes. Each service is one transaction; state changes are compare-and-set and leave a JobEvent."""

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

import queueing

from . import selectors
from .signals import queue_changed
from .exceptions import Conflict, FieldProblem, InvalidInput, NotMember
from .models import ACTIVE_STATES, Job, JobEvent, Namespace, Source, State

PRIORITY_MIN, PRIORITY_MAX = -1_000_000, 1_000_000
SYSTEM_ACTOR = "jobdash"


def actor_name(user) -> str:
    return user.get_username() if user is not None and user.is_authenticated else SYSTEM_ACTOR


def validate_priority(value) -> int:
    """Accepts ints and decimal strings (query parameters); anything else names the field."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise InvalidInput.at("priority", f"must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput.at("priority", "must be an integer")
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise InvalidInput.at("priority", f"must be between {PRIORITY_MIN} and {PRIORITY_MAX}")
    return value


def manifest_check(manifest: str | bytes) -> tuple[dict, queueing.Workload]:
    """Parse and validate an untrusted manifest; no database access."""
    try:
        return queueing.parse_job(manifest, max_bytes=settings.JOBDASH_MAX_MANIFEST_BYTES)
    except queueing.ManifestError as error:
        problems = [FieldProblem(e.path, e.message) for e in error.errors]
        raise InvalidInput(problems, too_large=error.too_large) from None


def _resolve_namespace(user, workload: queueing.Workload, namespace: str | None) -> Namespace:
    name = workload.namespace or namespace
    if workload.namespace and namespace and workload.namespace != namespace:
        raise InvalidInput.at(
            "metadata.namespace", f"is {workload.namespace!r} but the job was submitted to {namespace!r}"
        )
    if not name:
        raise InvalidInput.at("metadata.namespace", "required: set metadata.namespace or choose a namespace")
    ns = Namespace.objects.filter(name=name).first()
    # Non-members learn nothing about which namespaces exist.
    if user is not None and not selectors.sees_all_namespaces(user):
        if ns is None or not selectors.is_member(user, ns):
            raise NotMember(f"you are not a member of namespace {name!r}")
    if ns is None:
        raise InvalidInput.at("metadata.namespace", f"namespace {name!r} is not managed by jobdash")
    return ns


def _queue_changed() -> None:
    queue_changed.send(sender=Job)


def _record(job: Job, type_: str, message: str, actor: str) -> JobEvent:
    return JobEvent.objects.create(job=job, type=type_, message=message, actor=actor)


def job_submit(
    *,
    user,
    manifest: str | bytes,
    source: str,
    priority=0,
    namespace: str | None = None,
    submitted_by_name: str = "",
) -> Job:
    """Validate a manifest and store it as a Queued job, exactly as written.

    `user` is None for submissions from cluster identities (the admission webhook); then
    `submitted_by_name` names the submitter and membership is not checked.
    """
    if source not in Source.values:
        raise ValueError(f"unknown source {source!r}")
    priority = validate_priority(priority)
    parsed, workload = manifest_check(manifest)
    if isinstance(manifest, bytes):
        manifest = manifest.decode("utf-8")  # manifest_check proved it is UTF-8
    ns = _resolve_namespace(user, workload, namespace)
    actor = actor_name(user) if user is not None else (submitted_by_name or SYSTEM_ACTOR)
    try:
        with transaction.atomic():
            job = Job.objects.create(
                namespace=ns,
                name=workload.name,
                kind=workload.kind,
                api_version=workload.api_version,
                manifest=manifest,
                parsed=parsed,
                workload=workload.to_json(),
                priority=priority,
                state=State.QUEUED,
                source=source,
                submitted_by=user if user is not None and user.is_authenticated else None,
                submitted_by_name=actor,
            )
            _record(job, "Submitted", f"queued from {source} with priority {priority}", actor)
            transaction.on_commit(_queue_changed)
    except IntegrityError:
        # Ask the database rather than parse its message: vendors word it differently.
        if not Job.objects.filter(namespace=ns, name=workload.name, state__in=ACTIVE_STATES).exists():
            raise
        raise Conflict(f"an active job named {workload.name!r} already exists in namespace {ns.name!r}") from None
    return job


def transition(job_id: int, *, from_states, to_state: str, event: str, note: str, actor: str, **fields) -> bool:
    """Compare-and-set: move the job only if it is still in one of `from_states`."""
    with transaction.atomic():
        moved = Job.objects.filter(pk=job_id, state__in=from_states).update(state=to_state, **fields)
        if moved:
            JobEvent.objects.create(job_id=job_id, type=event, message=note, actor=actor)
    return bool(moved)


def job_cancel(*, job_id: int, user, reason: str = "") -> Job:
    job = selectors.job_get_visible(user, job_id)
    actor = actor_name(user)
    note = f"cancelled by {actor}" + (f": {reason}" if reason else "")
    cancelled = transition(
        job.pk,
        from_states=ACTIVE_STATES,
        to_state=State.CANCELLED,
        event="Cancelled",
        note=note,
        actor=actor,
        finished_at=timezone.now(),
        position=None,
        reason="",
        message=note,
        eta=None,
    )
    job.refresh_from_db()
    if not cancelled:
        raise Conflict(f"job {job.pk} is already {job.state}")
    transaction.on_commit(_queue_changed)
    return job


def job_set_priority(*, job_id: int, user, priority) -> Job:
    """Staff only: the admin's lever on a job that waits too long or must wait."""
    priority = validate_priority(priority)
    if not selectors.sees_all_namespaces(user):
        raise NotMember("only staff may change a job's priority")
    job = selectors.job_get_visible(user, job_id)
    actor = actor_name(user)
    with transaction.atomic():
        old = Job.objects.select_for_update().values_list("priority", flat=True).get(pk=job.pk)
        changed = Job.objects.filter(pk=job.pk, state__in=ACTIVE_STATES).update(priority=priority)
        if not changed:
            raise Conflict(f"job {job.pk} is already {job.state}")
        _record(job, "PriorityChanged", f"priority {old} -> {priority}", actor)
        transaction.on_commit(_queue_changed)
    job.refresh_from_db()
    return job
