"""Submission: untrusted manifests -> Queued jobs, one (job_submit) or many in one
transaction (jobs_submit_many). Every check (parse, the kind's validation, namespace and
membership, priority) comes before any write; the write is one round trip on PostgreSQL
(hot_queries). jobs.services re-exports these: it is where callers find every write."""

import contextlib
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

import queueing
from queueing import capabilities, cluster_request, topology_request
from queueing.job_options import CheckpointLimits, JobOptions, options_from_annotations, with_fields
from queueing.names import assign_generated_name
from queueing.safe_yaml import document_path
from queueing.workflows import array_name

from . import cluster_port, dependencies, hot_queries, roles, selectors
from .exceptions import ClusterUnavailable, Conflict, FieldProblem, InvalidInput, JobdashError, NotMember
from .models import ACTIVE_STATES, Job, JobEvent, Namespace, Source, State, Workflow
from .priority import priority_sources, resolve_priority, validate_priority
from .signals import send_queue_changed
from .storable import tree_problem

SYSTEM_ACTOR = "jobdash"


def _runtimes() -> queueing.workload.RuntimeSource:
    """Built per submission; it reaches the cluster only if the job refers to something."""
    return cluster_port.runtime_source()


def actor_name(user) -> str:
    return user.get_username() if user is not None and user.is_authenticated else SYSTEM_ACTOR


def manifest_check(
    manifest: str | bytes,
    *,
    namespace: str | None = None,
    runtime_source: queueing.workload.RuntimeSource | None = None,
    name_index: int | None = None,
) -> tuple[dict, queueing.Workload]:
    """Parse and validate an untrusted manifest; no database access. A name from
    metadata.generateName is assigned here (as the API server would), and objects the job
    refers to (a TrainJob's runtime) are read from the cluster, in `namespace` when the
    manifest names none (`runtime_source`: the ones read so far, in a bulk submission).
    An array's job whose name lacks the index marker gets it appended (`name_index`,
    queueing.workflows.array_name); its manifest is already the array's expansion."""
    try:
        document = queueing.load_document(manifest, max_bytes=settings.JOBDASH_MAX_MANIFEST_BYTES)
        metadata = document.get("metadata") if isinstance(document, dict) else None
        if isinstance(metadata, dict):
            if namespace and not metadata.get("namespace"):
                metadata["namespace"] = namespace
            assign_generated_name(document)
            if name_index is not None and isinstance(metadata.get("name"), str):
                metadata["name"] = array_name(metadata["name"], name_index)
        workload = queueing.workload_from_manifest(document, runtime_source or _runtimes())
    except queueing.ManifestError as error:
        problems = [FieldProblem(e.path, e.message) for e in error.errors]
        raise InvalidInput(problems, too_large=error.too_large) from None
    except cluster_port.RuntimeUnreadable as error:
        raise ClusterUnavailable("spec.runtimeRef.name", f"{error}; try again") from None
    # Valid for the cluster, but the database must store it too (jsonb refuses NUL).
    found = tree_problem(document)
    if found is not None:
        raise InvalidInput.at(*found)
    sliced = topology_request.problems(workload.annotations)  # (the check shows them as submit refuses them)
    if cluster_request.asks(workload.annotations):  # (the clusters' names read only then)
        sliced += cluster_request.problems(workload.annotations, cluster_port.cluster_labels())
    if sliced:
        raise InvalidInput([FieldProblem(e.path, e.message) for e in sliced])
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
    if check_membership and ns is not None:
        member = roles.may_submit(user, ns, member)
        granted = roles.grant(user, ns) if not member else None
        if granted is not None and granted.allows(roles.VIEW):  # who sees the namespace learns why
            raise NotMember(f"submitting needs the edit role in namespace {name!r}; yours is {granted}")
    # Non-members learn nothing about which namespaces exist.
    if check_membership and (ns is None or not member):
        raise NotMember(f"you are not a member of namespace {name!r}")
    if ns is None:
        raise InvalidInput.at("metadata.namespace", f"namespace {name!r} is not managed by jobdash")
    return ns


@dataclass(frozen=True)
class Submission:
    """One job of a bulk submission: what job_submit takes for one. `options`: the API's fields
    for the job's options (queueing.job_options.with_fields: after, retry, max_run_seconds, ...),
    over its annotations'. `name_index`: an array's index to append to its name."""

    manifest: str | bytes
    priority: Any = 0
    priority_class: str = ""
    namespace: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    name_index: int | None = None


@dataclass(frozen=True)
class Checked:
    """A submission that passed every check, ready to be stored."""

    manifest: str
    parsed: dict
    workload: queueing.Workload
    ns: Namespace
    priority: int
    priority_class: str
    options: JobOptions
    after_path: str  # where a refused dependency is named


def _check(
    user,
    submission: Submission,
    *,
    runtime_source: queueing.workload.RuntimeSource | None = None,
    priority_source=None,
    namespaces: dict[str, tuple[Namespace | None, bool]] | None = None,
) -> Checked:
    priority = validate_priority(submission.priority)
    manifest, namespace = submission.manifest, submission.namespace
    parsed, workload = manifest_check(
        manifest, namespace=namespace, runtime_source=runtime_source, name_index=submission.name_index
    )
    if isinstance(manifest, bytes):
        manifest = manifest.decode("utf-8")  # manifest_check proved it is UTF-8
    ns = _resolve_namespace(user, workload, namespace, namespaces)
    priority, priority_class = resolve_priority(
        user, ns, parsed, submission.priority_class, priority, source=priority_source
    )
    options = options_check(workload, submission.options)
    if options.max_run_s is None and ns.default_max_run_seconds:  # (the namespace's default)
        options = dataclasses.replace(options, max_run_s=float(ns.default_max_run_seconds))
    if options.min_runtime_s is None and ns.default_min_runtime_seconds:  # (its default, within the ceiling)
        ceiling = float(settings.JOBDASH_MAX_MIN_RUNTIME_SECONDS)
        options = dataclasses.replace(options, min_runtime_s=min(float(ns.default_min_runtime_seconds), ceiling))
    path = dependencies.after_path(submission.options)
    return Checked(manifest, parsed, workload, ns, priority, priority_class, options, path)


def options_check(workload: queueing.Workload, fields: Mapping[str, Any] | None = None) -> JobOptions:
    """The job's options: its annotations', the API's fields over them; every problem at once
    (InvalidInput, each at its path). A dry run asks it as a submission would."""
    now = time.time()
    limits = checkpoint_limits()
    try:
        return with_fields(options_from_annotations(workload.annotations, now, limits), fields or {}, now, limits)
    except queueing.ManifestError as error:
        raise InvalidInput([FieldProblem(e.path, e.message) for e in error.errors]) from None


def checkpoint_limits() -> CheckpointLimits:
    """The admin's bounds of what a job may say of its checkpoints (settings)."""
    return CheckpointLimits(
        max_notice_s=float(settings.JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS),
        max_min_runtime_s=float(settings.JOBDASH_MAX_MIN_RUNTIME_SECONDS),
    )


def _new_job(checked: Checked, *, user, source: str, actor: str, owner=None) -> Job:
    adapter = queueing.adapter_for(checked.workload.api_version, checked.workload.kind)
    if adapter is not None and source != Source.WEBHOOK and capabilities.objects_are_pods(adapter):
        # Its pods wait in the cluster, gated, made by their user: nothing here could make them.
        raise InvalidInput.at(
            "kind",
            f"a {checked.workload.kind} is queued when it is created in the cluster (kubectl create), "
            "not submitted here",
        )
    return Job(
        namespace=checked.ns,
        name=checked.workload.name,
        kind=checked.workload.kind,
        api_version=checked.workload.api_version,
        kind_key=queueing.adapter_key(checked.workload.api_version, checked.workload.kind),
        manifest=checked.manifest,
        parsed=checked.parsed,
        workload=checked.workload.to_json(),
        priority=checked.priority,
        priority_class=checked.priority_class,
        state=State.QUEUED,
        source=source,
        submitted_by=user if user is not None and user.is_authenticated else owner,
        submitted_by_name=actor,
        options=checked.options.to_json(),
        start_by=None if checked.options.start_by is None else datetime.fromtimestamp(checked.options.start_by, UTC),
        checkpoint_every_s=checked.options.checkpoint_every_s,
        checkpoint_on_notice_s=checked.options.checkpoint_on_notice_s,
        min_runtime_s=checked.options.min_runtime_s,
    )


def _submitted_note(checked: Checked, source: str) -> str:
    of_class = f" (class {checked.priority_class!r})" if checked.priority_class else ""
    return f"queued from {source} with priority {checked.priority}{of_class}"


def _name_taken(checked: Checked) -> Conflict | None:
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
    owner=None,
    options: Mapping[str, Any] | None = None,
) -> Job:
    """Validate a manifest and store it as a Queued job, exactly as written (`options`: the
    API's fields for its workflow options, see Submission).

    `user` is None for submissions from cluster identities (the admission webhook); then
    `submitted_by_name` names the submitter and membership is not checked; `owner` is the
    jobdash user of that cluster identity (accounts.identity), whose job it is.
    """
    if source not in Source.values:
        raise ValueError(f"unknown source {source!r}")
    checked = _check(user, Submission(manifest, priority, priority_class, namespace, options or {}))
    edges = dependencies.resolve(checked.ns, checked.options, {}, checked.after_path, own=checked.workload.name)
    actor = actor_name(user) if user is not None else (submitted_by_name or SYSTEM_ACTOR)
    job = _new_job(checked, user=user, source=source, actor=actor, owner=owner)
    note = _submitted_note(checked, source)
    try:
        if edges:  # (the job and its dependencies together, or neither)
            with transaction.atomic():
                job.save(force_insert=True)
                JobEvent.objects.create(job=job, type="Submitted", message=note, actor=actor)
                dependencies.store([job], [edges])
                transaction.on_commit(send_queue_changed)
        else:
            # Within a caller's transaction, a savepoint: a refused insert must not abort it.
            with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
                hot_queries.insert_submitted(job, note, actor)
                transaction.on_commit(send_queue_changed)
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


def jobs_check_many(
    *, user, submissions: Sequence[Submission], first_document: int = 0
) -> tuple[list[Checked], list[list[dependencies.Edge]]]:
    """Every check jobs_submit_many makes before it writes, and nothing written: each
    submission checked (as job_submit checks one, membership of its namespace included),
    then the dependencies among them and on jobs stored (never in a circle). The submit
    page's check calls it for a workflow, so that it refuses exactly what submitting would.

    Refusals name the document: paths start with its index, `[3].spec...` (counted from
    `first_document`: a workflow's stream starts with its header). A refusal of the request
    as a whole wins (403, then 503); otherwise every document's problems come back together
    (400, or 413 when one is too large). Two documents naming the same job is a 409."""
    check_bulk_size(len(submissions))
    # Read from the cluster once per request, not once per document.
    runtime_source, priority_source = _runtimes(), priority_sources()
    namespaces: dict[str, tuple[Namespace | None, bool]] = {}  # and the membership, each read once
    checked: list[Checked] = []
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
            refusals.append(error.in_document(first_document + index))
    if refusals:
        raise _refusal(refusals)
    first_named: dict[tuple[int, str], int] = {}
    for index, one in enumerate(checked):
        first = first_named.setdefault((one.ns.pk, one.workload.name), index)
        if first != index:
            raise Conflict(
                f"document [{first_document + first}] is a job named {one.workload.name!r} in namespace "
                f"{one.ns.name!r} too"
            ).in_document(first_document + index)
    return checked, _edges(checked, first_document)


def jobs_submit_many(
    *,
    user,
    submissions: Sequence[Submission],
    source: str,
    submitted_by_name: str = "",
    workflow: Workflow | None = None,
    indexes: Sequence[int] | None = None,
    first_document: int = 0,
) -> list[Job]:
    """Validate every submission (jobs_check_many), then store them all as Queued jobs, in
    order, in one transaction: all or nothing. `workflow` (unsaved): the workflow they form,
    saved with them (its namespace the first job's), `indexes` an array's. A name an active
    job holds is a 409 naming its document."""
    if source not in Source.values:
        raise ValueError(f"unknown source {source!r}")
    checked, edges = jobs_check_many(user=user, submissions=submissions, first_document=first_document)
    actor = actor_name(user) if user is not None else (submitted_by_name or SYSTEM_ACTOR)
    new = [_new_job(one, user=user, source=source, actor=actor) for one in checked]
    try:
        with transaction.atomic():
            if workflow is not None:
                workflow.namespace = checked[0].ns
                workflow.submitted_by = user if user is not None and user.is_authenticated else None
                workflow.submitted_by_name = actor
                workflow.save()
                for i, job in enumerate(new):
                    job.workflow, job.array_index = workflow, indexes[i] if indexes is not None else None
            jobs = Job.objects.bulk_create(new)
            dependencies.store(jobs, edges)
            JobEvent.objects.bulk_create(
                JobEvent(job=job, type="Submitted", message=_submitted_note(one, source), actor=actor)
                for job, one in zip(jobs, checked, strict=True)
            )
            transaction.on_commit(send_queue_changed)
    except IntegrityError:
        for index, one in enumerate(checked):
            conflict = _name_taken(one)
            if conflict is not None:
                raise conflict.in_document(first_document + index) from None
        raise
    return jobs


def _edges(checked: Sequence[Checked], first_document: int) -> list[list[dependencies.Edge]]:
    """Each document's dependencies, on each other (by name, in one namespace) or on jobs stored."""
    siblings: dict[tuple[int, str], int] = {(one.ns.pk, one.workload.name): i for i, one in enumerate(checked)}
    edges, problems = [], []
    for index, one in enumerate(checked):
        named = {name: i for (ns, name), i in siblings.items() if ns == one.ns.pk}
        try:
            edges.append(dependencies.resolve(one.ns, one.options, named, one.after_path, index, one.workload.name))
        except InvalidInput as error:
            problems.append(error.in_document(first_document + index))
            edges.append([])
    if problems:
        raise _refusal(problems)
    paths = [document_path(first_document + i, one.after_path) for i, one in enumerate(checked)]
    dependencies.check_acyclic([one.workload.name for one in checked], edges, paths)
    return edges


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
