"""Writes. Each service is one transaction; state changes are compare-and-set and leave a JobEvent."""

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

import queueing
from jobdash.cluster import runtimes
from queueing.names import assign_generated_name

from . import elastic, hot_queries, selectors
from .exceptions import ClusterUnavailable, Conflict, FieldProblem, InvalidInput, JobdashError, NotMember
from .models import ACTIVE_STATES, Job, JobEvent, Namespace, Source, State
from .priority import allowed_class, priority_sources, resolve_priority, validate_priority
from .signals import queue_changed
from .storable import tree_problem

SYSTEM_ACTOR = "jobdash"


def _runtimes() -> queueing.workload.RuntimeSource:
    """Built per submission; it reaches the cluster only if the job refers to something."""
    return runtimes.from_settings()


def actor_name(user) -> str:
    return user.get_username() if user is not None and user.is_authenticated else SYSTEM_ACTOR


def manifest_check(
    manifest: str | bytes,
    *,
    namespace: str | None = None,
    runtime_source: queueing.workload.RuntimeSource | None = None,
) -> tuple[dict, queueing.Workload]:
    """Parse and validate an untrusted manifest; no database access. A name from
    metadata.generateName is assigned here (as the API server would), and objects the job
    refers to (a TrainJob's runtime) are read from the cluster, in `namespace` when the
    manifest names none (`runtime_source`: the ones read so far, in a bulk submission)."""
    try:
        document = queueing.load_document(manifest, max_bytes=settings.JOBDASH_MAX_MANIFEST_BYTES)
        metadata = document.get("metadata") if isinstance(document, dict) else None
        if isinstance(metadata, dict):
            if namespace and not metadata.get("namespace"):
                metadata["namespace"] = namespace
            assign_generated_name(document)
        workload = queueing.workload_from_manifest(document, runtime_source or _runtimes())
    except queueing.ManifestError as error:
        problems = [FieldProblem(e.path, e.message) for e in error.errors]
        raise InvalidInput(problems, too_large=error.too_large) from None
    except runtimes.RuntimeUnreadable as error:
        raise ClusterUnavailable("spec.runtimeRef.name", f"{error}; try again") from None
    # Valid for the cluster, but the database must store it too (jsonb refuses NUL).
    found = tree_problem(document)
    if found is not None:
        raise InvalidInput.at(*found)
    return document, workload


def _resolve_namespace(
    user,
    workload: queueing.Workload,
    namespace: str | None,
    looked_up: dict[str, tuple[Namespace | None, bool]] | None = None,
) -> Namespace:
    """`looked_up`: the namespaces read so far, by name (a bulk submission reads each once)."""
    name = workload.namespace or namespace
    if workload.namespace and namespace and workload.namespace != namespace:
        raise InvalidInput.at(
            "metadata.namespace", f"is {workload.namespace!r} but the job was submitted to {namespace!r}"
        )
    if not name:
        raise InvalidInput.at("metadata.namespace", "required: set metadata.namespace or choose a namespace")
    check_membership = user is not None and not selectors.sees_all_namespaces(user)
    found = looked_up.get(name) if looked_up is not None else None
    if found is None:
        found = hot_queries.namespace_and_membership(name, user if check_membership else None)
        if looked_up is not None:
            looked_up[name] = found
    ns, member = found
    # Non-members learn nothing about which namespaces exist.
    if check_membership and (ns is None or not member):
        raise NotMember(f"you are not a member of namespace {name!r}")
    if ns is None:
        raise InvalidInput.at("metadata.namespace", f"namespace {name!r} is not managed by jobdash")
    return ns


def _queue_changed() -> None:
    queue_changed.send(sender=Job)


def _record(job: Job, type_: str, message: str, actor: str) -> JobEvent:
    return JobEvent.objects.create(job=job, type=type_, message=message, actor=actor)


@dataclass(frozen=True)
class Submission:
    """One job of a bulk submission: what job_submit takes for one."""

    manifest: str | bytes
    priority: Any = 0
    priority_class: str = ""
    namespace: str | None = None


@dataclass(frozen=True)
class _Checked:
    """A submission that passed every check, ready to be stored."""

    manifest: str
    parsed: dict
    workload: queueing.Workload
    ns: Namespace
    priority: int
    priority_class: str


def _check(
    user,
    submission: Submission,
    *,
    runtime_source: queueing.workload.RuntimeSource | None = None,
    priority_source=None,
    namespaces: dict[str, tuple[Namespace | None, bool]] | None = None,
) -> _Checked:
    priority = validate_priority(submission.priority)
    manifest, namespace = submission.manifest, submission.namespace
    parsed, workload = manifest_check(manifest, namespace=namespace, runtime_source=runtime_source)
    if isinstance(manifest, bytes):
        manifest = manifest.decode("utf-8")  # manifest_check proved it is UTF-8
    ns = _resolve_namespace(user, workload, namespace, namespaces)
    priority, priority_class = resolve_priority(
        user, ns, parsed, submission.priority_class, priority, source=priority_source
    )
    return _Checked(manifest, parsed, workload, ns, priority, priority_class)


def _new_job(checked: _Checked, *, user, source: str, actor: str) -> Job:
    return Job(
        namespace=checked.ns,
        name=checked.workload.name,
        kind=checked.workload.kind,
        api_version=checked.workload.api_version,
        manifest=checked.manifest,
        parsed=checked.parsed,
        workload=checked.workload.to_json(),
        priority=checked.priority,
        priority_class=checked.priority_class,
        state=State.QUEUED,
        source=source,
        submitted_by=user if user is not None and user.is_authenticated else None,
        submitted_by_name=actor,
    )


def _submitted_note(checked: _Checked, source: str) -> str:
    of_class = f" (class {checked.priority_class!r})" if checked.priority_class else ""
    return f"queued from {source} with priority {checked.priority}{of_class}"


def _name_taken(checked: _Checked) -> Conflict | None:
    """After an IntegrityError: the conflict, if an active job of this name exists."""
    # Ask the database rather than parse its message: vendors word it differently.
    if not Job.objects.filter(namespace=checked.ns, name=checked.workload.name, state__in=ACTIVE_STATES).exists():
        return None
    return Conflict(f"an active job named {checked.workload.name!r} already exists in namespace {checked.ns.name!r}")


def job_submit(
    *,
    user,
    manifest: str | bytes,
    source: str,
    priority=0,
    priority_class: str = "",
    namespace: str | None = None,
    submitted_by_name: str = "",
) -> Job:
    """Validate a manifest and store it as a Queued job, exactly as written.

    `user` is None for submissions from cluster identities (the admission webhook); then
    `submitted_by_name` names the submitter and membership is not checked.
    """
    if source not in Source.values:
        raise ValueError(f"unknown source {source!r}")
    checked = _check(user, Submission(manifest, priority, priority_class, namespace))
    actor = actor_name(user) if user is not None else (submitted_by_name or SYSTEM_ACTOR)
    job = _new_job(checked, user=user, source=source, actor=actor)
    note = _submitted_note(checked, source)
    try:
        if connection.vendor == "postgresql":
            # Within a caller's transaction, a savepoint: a refused insert must not abort it.
            with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
                hot_queries.insert_submitted(job, note, actor)
                transaction.on_commit(_queue_changed)
        else:
            with transaction.atomic():
                job.save(force_insert=True)
                _record(job, "Submitted", note, actor)
                transaction.on_commit(_queue_changed)
    except IntegrityError:
        conflict = _name_taken(checked)
        if conflict is None:
            raise
        raise conflict from None
    return job


def yaml_documents(stream: str | bytes) -> list[str]:
    """The documents of a YAML request body (a stream separated by `---`), each as written;
    one for a single manifest. Refusals as for one manifest (paths start with the
    document's index, `[2].spec...`, when the stream holds several); at most
    JOBDASH_BULK_MAX_JOBS of them (413)."""
    limit = settings.JOBDASH_BULK_MAX_JOBS
    try:
        documents = queueing.load_documents(
            stream,
            max_bytes=settings.JOBDASH_MAX_MANIFEST_BYTES,
            max_documents=limit,
        )
    except queueing.TooManyDocuments:
        raise _too_many(limit) from None
    except queueing.ManifestError as error:
        problems = [FieldProblem(e.path, e.message) for e in error.errors]
        raise InvalidInput(problems, too_large=error.too_large) from None
    return [document.text for document in documents]


def check_bulk_size(count: int) -> None:
    """A bulk submission holds at least one job and at most JOBDASH_BULK_MAX_JOBS (413 above)."""
    if count == 0:
        raise InvalidInput.at("", "no jobs to submit: send at least one manifest")
    if count > settings.JOBDASH_BULK_MAX_JOBS:
        raise _too_many(settings.JOBDASH_BULK_MAX_JOBS)


def _too_many(limit: int) -> InvalidInput:
    return InvalidInput(
        [FieldProblem("", f"more than {limit} jobs in one request (the limit is JOBDASH_BULK_MAX_JOBS)")],
        too_large=True,
    )


def jobs_submit_many(*, user, submissions: Sequence[Submission], source: str, submitted_by_name: str = "") -> list[Job]:
    """Validate every submission, then store them all as Queued jobs, in order, in one
    transaction: all or nothing.

    Every document is checked (as job_submit checks one, membership of its namespace
    included) before anything is written. Refusals name the document: paths start with its
    index, `[3].spec...`. A refusal of the request as a whole wins (403, then 503);
    otherwise every document's problems come back together (400, or 413 when one is too
    large). Two documents naming the same job, or a name an active job holds, is a 409.
    """
    if source not in Source.values:
        raise ValueError(f"unknown source {source!r}")
    check_bulk_size(len(submissions))
    # Read from the cluster once per request, not once per document.
    runtime_source, priority_source = _runtimes(), priority_sources()
    namespaces: dict[str, tuple[Namespace | None, bool]] = {}  # and the membership, each read once
    checked: list[_Checked] = []
    refusals: list[JobdashError] = []
    for index, submission in enumerate(submissions):
        try:
            checked.append(
                _check(
                    user,
                    submission,
                    runtime_source=runtime_source,
                    priority_source=priority_source,
                    namespaces=namespaces,
                )
            )
        except JobdashError as error:
            refusals.append(error.in_document(index))
    if refusals:
        raise _refusal(refusals)
    first_named: dict[tuple[int, str], int] = {}
    for index, one in enumerate(checked):
        first = first_named.setdefault((one.ns.pk, one.workload.name), index)
        if first != index:
            raise Conflict(
                f"document [{first}] is a job named {one.workload.name!r} in namespace {one.ns.name!r} too"
            ).in_document(index)
    actor = actor_name(user) if user is not None else (submitted_by_name or SYSTEM_ACTOR)
    try:
        with transaction.atomic():
            jobs = Job.objects.bulk_create([_new_job(one, user=user, source=source, actor=actor) for one in checked])
            JobEvent.objects.bulk_create(
                JobEvent(job=job, type="Submitted", message=_submitted_note(one, source), actor=actor)
                for job, one in zip(jobs, checked, strict=True)
            )
            transaction.on_commit(_queue_changed)
    except IntegrityError:
        for index, one in enumerate(checked):
            conflict = _name_taken(one)
            if conflict is not None:
                raise conflict.in_document(index) from None
        raise
    return jobs


def _refusal(refusals: list[JobdashError]) -> JobdashError:
    """One error for the refusals of a bulk submission's documents."""
    for status in (403, 503):
        for refusal in refusals:
            if refusal.status == status:
                return refusal
    for refusal in refusals:
        if refusal.status not in (400, 413):
            return refusal
    problems = [problem for refusal in refusals for problem in refusal.problems]
    return InvalidInput(problems, too_large=any(refusal.status == 413 for refusal in refusals))


def compare_and_set(job_id: int, *, from_states, to_state: str, event: str, note: str, actor: str, **fields) -> bool:
    """The low-level step under every state change (the services here and the dispatcher's
    transitions): move the job only if it is still in one of `from_states`, and record its
    JobEvent in the same transaction. Returns whether it moved."""
    with transaction.atomic():
        moved = Job.objects.filter(pk=job_id, state__in=from_states).update(state=to_state, **fields)
        if moved:
            JobEvent.objects.create(job_id=job_id, type=event, message=note, actor=actor)
    return bool(moved)


def job_cancel(*, job_id: int, user, reason: str = "") -> Job:
    job = selectors.job_get_visible(user, job_id)
    actor = actor_name(user)
    note = f"cancelled by {actor}" + (f": {reason}" if reason else "")
    cancelled = _cancel(job.pk, note, actor, from_states=ACTIVE_STATES)
    job.refresh_from_db(from_queryset=Job.objects.select_related("namespace"))
    if not cancelled:
        raise Conflict(f"job {job.pk} is already {job.state}")
    transaction.on_commit(_queue_changed)
    return job


def job_cancel_object_deleted(*, job_id: int, kind: str, deleted_by: str) -> bool:
    """The admission webhook saw someone other than jobdash delete the cluster object a
    Queued job holds (suspend mode): the job is cancelled, the deleting cluster identity as
    its actor. Returns whether it was cancelled (False when it left Queued meanwhile)."""
    cancelled = _cancel(job_id, f"its {kind} was deleted by {deleted_by}", deleted_by, from_states=(State.QUEUED,))
    if cancelled:
        transaction.on_commit(_queue_changed)
    return cancelled


def _cancel(job_id: int, note: str, actor: str, *, from_states) -> bool:
    return compare_and_set(
        job_id,
        from_states=from_states,
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
    job.refresh_from_db(from_queryset=Job.objects.select_related("namespace"))
    return job


def job_set_priority_class(*, job_id: int, user, priority_class) -> Job:
    """A Queued job's class, and with it its priority: members within their namespace's
    limit, staff any class."""
    if not isinstance(priority_class, str) or not priority_class:
        raise InvalidInput.at("priority_class", "required: the name of a priority class")
    job = selectors.job_get_visible(user, job_id)
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
        transaction.on_commit(_queue_changed)
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
                backoff_until=None,
                finished_at=None,
                released_at=None,
                placement=None,
                object_uid="",
                leader_term=None,
                requeue_requested_at=None,
                position=None,
                reason="",
                message=note,
                eta=None,
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
    transaction.on_commit(_queue_changed)
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
        transaction.on_commit(_queue_changed)
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
        transaction.on_commit(_queue_changed)
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
        if workload.name != name or (workload.namespace and workload.namespace != namespace):
            raise InvalidInput.at(
                "metadata", f"the manifest names {workload.namespace}/{workload.name}, not {namespace}/{name}"
            )
        resolve_priority(None, ns, parsed, "", priority)
        return None, True
    try:
        with transaction.atomic():
            job = job_submit(
                user=None,
                manifest=text,
                source=source,
                priority=priority,
                namespace=namespace,
                submitted_by_name=submitted_by_name,
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
