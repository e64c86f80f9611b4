"""Writes. Each service is one transaction; state changes are compare-and-set and leave a JobEvent.

Submissions (one job or many) are in jobs.submission and re-exported here: callers find
every write in this module."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError, models, transaction
from django.utils import timezone

from jobdash.accounts import identity

from . import elastic, hot_queries, lifecycle, roles, selectors
from .checkpoints import job_checkpointed as job_checkpointed
from .checkpoints import record_checkpoint as record_checkpoint
from .exceptions import Conflict, InvalidInput, NotMember
from .models import ACTIVE_STATES, Job, JobEvent, Namespace, State
from .pod_groups import pod_group_join as pod_group_join
from .priority import allowed_class, resolve_priority, validate_priority
from .queued_edit import EditRuntimes as EditRuntimes
from .queued_edit import QueuedEdit as QueuedEdit
from .queued_edit import job_update_queued_manifest as job_update_queued_manifest
from .signals import send_queue_changed
from .submission import SYSTEM_ACTOR as SYSTEM_ACTOR
from .submission import Submission as Submission
from .submission import actor_name as actor_name
from .submission import check_bulk_size as check_bulk_size
from .submission import job_submit as job_submit
from .submission import jobs_check_many as jobs_check_many
from .submission import jobs_submit_many as jobs_submit_many
from .submission import manifest_check as manifest_check
from .submission import options_check as options_check
from .submission import yaml_documents as yaml_documents


def _record(job: Job, type_: str, message: str, actor: str) -> JobEvent:
    return JobEvent.objects.create(job=job, type=type_, message=message, actor=actor)


def compare_and_set(
    job_id: int,
    *,
    from_states,
    to_state: str,
    event: str,
    note: str,
    actor: str,
    now: datetime | None = None,
    **fields,
) -> bool:
    """The low-level step under every state change (the services here and the dispatcher's
    transitions): move the job only if it is still in one of `from_states`, and record its
    JobEvent in the same transaction. The row gets what entering `to_state` means
    (lifecycle.ENTERING) at `now` (default: the current time), then `fields`, what is
    particular to this transition. Returns whether it moved."""
    with transaction.atomic():
        changes = lifecycle.entering(to_state, now, **fields)
        moved = Job.objects.filter(pk=job_id, state__in=from_states).update(state=to_state, **changes)
        if moved:
            JobEvent.objects.create(job_id=job_id, type=event, message=note, actor=actor)
    return bool(moved)


def job_cancel(*, job_id: int, user, reason: str = "") -> Job:
    """One's own job with the edit role, anyone's with admin (roles.py)."""
    job = selectors.job_get_visible(user, job_id)
    roles.require_on_job(user, job, f"cancelling job {job.pk}")
    actor = actor_name(user)
    note = f"cancelled by {actor}" + (f": {reason}" if reason else "")
    cancelled = cancel_row(job.pk, note, actor, from_states=ACTIVE_STATES)
    job.refresh_from_db(from_queryset=Job.objects.select_related("namespace"))
    if not cancelled:
        raise Conflict(f"job {job.pk} is already {job.state}")
    transaction.on_commit(send_queue_changed)
    return job


def job_cancel_object_deleted(
    *,
    job_id: int,
    kind: str,
    deleted_by: str,
    groups: Sequence[str] = (),
    dry_run: bool = False,
    object_name: str = "",
) -> bool:
    """The admission webhook saw someone other than jobdash delete a job's cluster object (a
    Queued job holds it in suspend mode; a released one runs as it): the same rule as a
    cancel anywhere (roles.require_on_job_in_cluster: NotMember says why not), then the job
    Cancelled with the deleting cluster identity as its actor. Returns whether it was
    cancelled (False on a dry run, or when it ended meanwhile). `object_name`: its
    namespace/name, for the refusal (`kind` may name it already: "Pod team-a/x")."""
    note = f"its {kind} was deleted by {deleted_by}"
    what = f"{kind} {object_name}" if object_name else kind
    return _cancel_deleted(job_id, note, what, deleted_by, groups, dry_run)


def job_cancel_queued_object_deleted(
    *, job_id: int, namespace: str, name: str, deleted_by: str = "", groups: Sequence[str] = (), dry_run: bool = False
) -> bool:
    """The job's QueuedJob was deleted by someone else than jobdash (`kubectl delete
    queuedjob`): leaving the queue in the cluster leaves it here too. `deleted_by`: the
    cluster identity, when the webhook saw the DELETE (then the rule of any cancel applies,
    as for job_cancel_object_deleted); "" when the dispatcher only sees it gone. Returns
    whether it was cancelled (False on a dry run, or when it left Queued meanwhile)."""
    by = f"by {deleted_by}" if deleted_by else "from the cluster"
    note = f"its QueuedJob {namespace}/{name} was deleted {by}: it left the queue"
    if not deleted_by:
        return _cancelled(cancel_row(job_id, note, "cluster", from_states=(State.QUEUED,)))
    return _cancel_deleted(
        job_id, note, f"QueuedJob {namespace}/{name}", deleted_by, groups, dry_run, from_states=(State.QUEUED,)
    )


def _cancel_deleted(
    job_id: int,
    note: str,
    what: str,
    deleted_by: str,
    groups: Sequence[str],
    dry_run: bool,
    from_states: Sequence[str] = ACTIVE_STATES,
) -> bool:
    job = Job.objects.select_related("namespace").filter(pk=job_id).first()
    if job is None or job.state not in from_states:
        return False
    who = identity.admission_subject(deleted_by, groups)
    roles.require_on_job_in_cluster(who, groups, job, f"deleting {what}, jobdash job #{job.pk}")
    return not dry_run and _cancelled(cancel_row(job.pk, note, deleted_by, from_states=from_states))


def _cancelled(cancelled: bool) -> bool:
    if cancelled:
        transaction.on_commit(send_queue_changed)
    return cancelled


def cancel_row(job_id: int, note: str, actor: str, *, from_states) -> bool:
    """The job Cancelled (if still in one of `from_states`), with its event and `note` as its message."""
    return compare_and_set(
        job_id,
        from_states=from_states,
        to_state=State.CANCELLED,
        event="Cancelled",
        note=note,
        actor=actor,
        message=note,
    )


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
        transaction.on_commit(send_queue_changed)
    job.refresh_from_db(from_queryset=Job.objects.select_related("namespace"))
    return job


def job_set_priority_class(*, job_id: int, user, priority_class) -> Job:
    """A Queued job's class, and with it its priority: its submitter (edit) or the
    namespace's admin within the namespace's limit, staff any class (roles.py)."""
    if not isinstance(priority_class, str) or not priority_class:
        raise InvalidInput.at("priority_class", "required: the name of a priority class")
    job = selectors.job_get_visible(user, job_id)
    roles.require_on_job(user, job, f"changing job {job.pk}'s priority class")
    chosen = allowed_class(user, job.namespace, "priority_class", priority_class)
    actor = actor_name(user)
    with transaction.atomic():
        old = Job.objects.select_for_update().values("priority", "priority_class").get(pk=job.pk)
        changed = Job.objects.filter(pk=job.pk, state=State.QUEUED).update(
            priority=chosen.value, priority_class=chosen.name
        )
        if not changed:
            raise Conflict(f"job {job.pk} is {job.state}; only a Queued job's priority class can change")
        was = f"{old['priority_class']!r}" if old["priority_class"] else "none"
        note = f"priority class {was} -> {chosen.name!r}, priority {old['priority']} -> {chosen.value}"
        _record(job, "PriorityChanged", note, actor)
        transaction.on_commit(send_queue_changed)
    job.refresh_from_db(from_queryset=Job.objects.select_related("namespace"))
    return job


def job_requeue(*, job_id: int, user, reason: str = "") -> Job:
    """Staff only: put a job back in the queue. Returns the job as it is now.

    What is safe from the database alone is done here; what needs the cluster is a
    request the dispatcher carries out (the web process has no cluster gateway):

    - Released or Running: its object exists, so the job is only *marked*
      (`requeue_requested_at`, event `RequeueRequested`). The dispatcher's tracker then
      takes the object back as on a start timeout (deleted, or re-suspended in unsuspend
      mode) and moves the job to Queued with a short backoff (event `Requeued`), so the
      next release cannot meet the old object. If the object finishes first, the finish wins.
    - Failed without having started (`started_at` empty: refused by the cluster, gave up
      after the start timeout, or its object was deleted): nothing of it runs, so it goes
      straight back to Queued with its attempts reset.
    - Queued, Succeeded, Cancelled, or Failed after running: 409. A finished run is
      resubmitted, not requeued, so its history stays as it was.
    """
    if not selectors.sees_all_namespaces(user):
        raise NotMember("only staff may requeue a job")
    job = selectors.job_get_visible(user, job_id)
    actor = actor_name(user)
    why = f": {reason}" if reason else ""
    marked = 0
    if job.state in (State.RELEASED, State.RUNNING):
        with transaction.atomic():
            marked = Job.objects.filter(
                pk=job.pk, state__in=(State.RELEASED, State.RUNNING), requeue_requested_at__isnull=True
            ).update(requeue_requested_at=timezone.now())
            if marked:
                _record(
                    job,
                    "RequeueRequested",
                    f"requeue requested by {actor}{why}; the dispatcher takes its object back",
                    actor,
                )
    elif job.state == State.FAILED and job.started_at is None:
        note = f"requeued by {actor}{why}"
        try:
            marked = compare_and_set(
                job.pk,
                from_states=(State.FAILED,),
                to_state=State.QUEUED,
                event="Requeued",
                note=note,
                actor=actor,
                attempts=0,
                message=note,
            )
        except IntegrityError:  # the one-active-job-per-name index: a newer job took the name
            raise Conflict(
                f"an active job named {job.name!r} already exists in namespace {job.namespace.name!r}"
            ) from None
    job.refresh_from_db(from_queryset=Job.objects.select_related("namespace"))
    if not marked:
        if job.requeue_requested_at is not None and job.is_active:
            raise Conflict(f"job {job.pk} already has a requeue requested")
        raise Conflict(
            f"job {job.pk} is {job.state}; only Released, Running and never-started Failed jobs can be requeued"
        )
    transaction.on_commit(send_queue_changed)
    return job


def namespace_save(namespace: Namespace) -> Namespace:
    """The admin's namespace form (members and groups are saved by the form after this).
    Validated like any input (elastic quota as set_elastic_quota checks it, under the same
    lock), and a changed weight, policy or guarantee is a reason for a new cycle."""
    namespace.full_clean(validate_unique=False, validate_constraints=False)
    with transaction.atomic():
        others = _lock_namespaces()
        cleaned = _clean_elastic(namespace, {f: getattr(namespace, f) for f in elastic.FIELDS}, others)
        for field, value in cleaned.items():
            setattr(namespace, field, value)
        namespace.save()
        transaction.on_commit(send_queue_changed)
    return namespace


UNSET: Any = object()


def set_elastic_quota(
    namespace: Namespace | str, *, user, guaranteed: Any = UNSET, cohort: Any = UNSET, borrowing_limit: Any = UNSET
) -> Namespace:
    """Staff only: a namespace's guaranteed share, cohort and borrowing limit (jobs/elastic.py
    says what is accepted); a field not given stays as it is. One transaction, all or
    nothing: a refusal is a ValidationError keyed by field and writes nothing."""
    ns = selectors.namespace_get_visible(user, namespace if isinstance(namespace, str) else namespace.name)
    if not selectors.sees_all_namespaces(user):
        raise NotMember("only staff may set a namespace's elastic quota")
    given = {"guaranteed": guaranteed, "cohort": cohort, "borrowing_limit": borrowing_limit}
    with transaction.atomic():
        others = _lock_namespaces()
        # Read under the lock: a concurrent edit of another of these fields is not undone.
        values = dict(Namespace.objects.filter(pk=ns.pk).values(*elastic.FIELDS).get())
        values.update({field: value for field, value in given.items() if value is not UNSET})
        cleaned = _clean_elastic(ns, values, others)
        Namespace.objects.filter(pk=ns.pk).update(**cleaned)
        transaction.on_commit(send_queue_changed)
    ns.refresh_from_db()
    return ns


def elastic_quota_check(namespace: Namespace, **values: Any) -> dict[str, Any]:
    """The elastic fields as set_elastic_quota would store them, or its ValidationError; a read
    (no lock) for forms, which show the problems on their fields before anything is saved."""
    return _clean_elastic(namespace, values, _members(Namespace.objects.all()))


def _lock_namespaces() -> list[elastic.Member]:
    """Lock every namespace row, in primary-key order (two edits never deadlock), and read
    them as committed. Every row, not only the cohort's: a namespace moving into the cohort
    concurrently is not among its rows yet."""
    return _members(Namespace.objects.select_for_update())


def _members(rows: models.QuerySet[Namespace]) -> list[elastic.Member]:
    return [
        elastic.Member(pk, name, cohort, guaranteed or {})
        for pk, name, cohort, guaranteed in rows.order_by("pk").values_list("pk", "name", "cohort", "guaranteed")
    ]


def _clean_elastic(namespace: Namespace, values: dict[str, Any], others: list[elastic.Member]) -> dict[str, Any]:
    quotas, nodes = selectors.cluster_quotas_and_nodes()
    return elastic.clean(
        pk=namespace.pk,
        name=namespace.name,
        others=others,
        hard=(quotas.get(namespace.name) or {}).get("hard"),
        nodes=nodes,
        **values,
    )


class NamespaceNotManaged(Exception):
    """jobdash has no Namespace of that name: its jobs are not jobdash's to queue."""


def _active_job(namespace: str, name: str) -> Job | None:
    return hot_queries.lookup(namespace, name)[1]


def job_submit_or_find(
    *,
    namespace: str,
    name: str,
    manifest,
    source: str,
    submitted_by_name: str,
    submitted_by_groups: Sequence[str] = (),
    priority=0,
    dry_run: bool = False,
) -> tuple[Job | None, bool]:
    """For cluster identities that retry a create until it succeeds (the admission webhook):
    the active job (Queued, Released or Running) named `name` in `namespace`, or a new
    Queued job submitted from `manifest`. Returns `(job, created)`.

    Every retry lands on the job the first attempt made, never a duplicate, also when two
    retries race (the database's one-active-job index decides, the loser finds the winner).
    A finished job does not count: a new create after it queues a new job.

    `manifest` is the text, or a callable returning it: a retry that finds its job costs one
    indexed query and never builds the text. With `dry_run` nothing is written: a new job's
    manifest is validated and `(None, True)` returned. Raises NamespaceNotManaged when
    jobdash has no such namespace, InvalidInput when the manifest is invalid or names
    another job.
    """
    ns, job = hot_queries.lookup(namespace, name)
    if job is not None:
        return job, False
    if ns is None:
        raise NamespaceNotManaged(namespace)
    text = manifest() if callable(manifest) else manifest
    if dry_run:
        parsed, workload = manifest_check(text, namespace=namespace)
        options_check(workload)  # (its jobdash.io/* options, as job_submit reads them)
        if workload.name != name or (workload.namespace and workload.namespace != namespace):
            raise InvalidInput.at(
                "metadata", f"the manifest names {workload.namespace}/{workload.name}, not {namespace}/{name}"
            )
        resolve_priority(None, ns, parsed, "", priority)
        return None, True
    try:
        with transaction.atomic():
            # The cluster identity is a jobdash user (made on first sight): the same person
            # in kubectl, the UI, the API and the CLI.
            job = job_submit(
                user=None,
                manifest=text,
                source=source,
                priority=priority,
                namespace=namespace,
                submitted_by_name=submitted_by_name,
                owner=identity.admission_owner(submitted_by_name, submitted_by_groups),
            )
            if job.name != name:
                # The key retries look up by must be the job's own name: roll the insert back.
                raise InvalidInput.at("metadata.name", f"is {job.name!r}, but the job was submitted as {name!r}")
    except Conflict:
        job = _active_job(namespace, name)
        if job is None:  # the winner finished in between: a rare race, the caller retries
            raise
        return job, False
    return job, True
