"""Reads. Every query that decides what a user may see lives here."""

from collections.abc import Iterable
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, Count, F, Q, QuerySet, When

from . import roles
from .exceptions import NotFound
from .models import (
    ACTIVE_STATES,
    ClusterState,
    Job,
    JobDependency,
    JobEvent,
    LostWork,
    Namespace,
    Source,
    State,
    Workflow,
)

# Admission order as the last cycle saw it; jobs it has not placed yet last, oldest first.
QUEUE_ORDER = (F("position").asc(nulls_last=True), "submitted_at", "id")


def sees_all_namespaces(user) -> bool:
    return user.is_active and (user.is_staff or user.is_superuser)


def namespaces_visible_to(user) -> QuerySet[Namespace]:
    if not user.is_authenticated or not user.is_active:
        return Namespace.objects.none()
    if sees_all_namespaces(user):
        return Namespace.objects.all()
    # Who views a namespace is roles.py's: the admin console's members, the cluster's RBAC, or both.
    viewer = Q(pk__in=[])
    if roles.from_membership():
        viewer |= Q(members=user) | Q(groups__in=user.groups.all())
    if roles.from_rbac():
        viewer |= Q(name__in=roles.rbac_viewable(user))
    # A subquery, not .distinct(): callers annotate and paginate it.
    return Namespace.objects.filter(pk__in=Namespace.objects.filter(viewer).values("pk"))


def is_member(user, namespace: Namespace) -> bool:
    """The admin console's membership of one namespace (roles.py decides what it grants):
    two primary-key probes of the join tables rather than the OR over both joins."""
    if not user.is_authenticated or not user.is_active:
        return False
    if sees_all_namespaces(user):
        return True
    if Namespace.members.through.objects.filter(namespace_id=namespace.pk, user_id=user.pk).exists():
        return True
    return Namespace.groups.through.objects.filter(namespace_id=namespace.pk, group__user=user.pk).exists()


def is_managed_namespace(name: str) -> bool:
    """Whether jobdash manages a namespace of that name (for the cluster's side, which
    sees every namespace: the webhook)."""
    return Namespace.objects.filter(name=name).exists()


def pod_queueing(name: str) -> bool | None:
    """For the webhook's plain Pods: None when jobdash does not manage the namespace, else
    whether it queues every plain Pod there (Namespace.queue_all_pods), not only those
    asking for devices."""
    found = Namespace.objects.filter(name=name).values_list("queue_all_pods", flat=True).first()
    return None if found is None else bool(found)


def namespace_get_visible(user, name: str) -> Namespace:
    namespace = namespaces_visible_to(user).filter(name=name).first()
    if namespace is None:
        raise NotFound(f"namespace {name!r} not found")
    return namespace


def jobs_visible_to(user) -> QuerySet[Job]:
    """The jobs of the namespaces the user sees, and the user's own wherever they are: the
    cluster let them create it there (kubectl, through the webhook), so it is theirs to see
    and cancel."""
    if not user.is_authenticated or not user.is_active:
        return Job.objects.none()
    return Job.objects.filter(Q(namespace__in=namespaces_visible_to(user)) | Q(submitted_by=user)).select_related(
        "namespace"
    )


def workflows_visible_to(user) -> QuerySet[Workflow]:
    """The workflows of the namespaces the user sees, and the user's own."""
    if not user.is_authenticated or not user.is_active:
        return Workflow.objects.none()
    seen = Q(namespace__in=namespaces_visible_to(user)) | Q(submitted_by=user)
    return Workflow.objects.filter(seen).select_related("namespace")


def workflow_get_visible(user, workflow_id: int) -> Workflow:
    workflow = workflows_visible_to(user).filter(pk=workflow_id).first()
    if workflow is None:
        raise NotFound(f"workflow {workflow_id} not found")
    return workflow


def workflow_jobs(workflow: Workflow) -> list[Job]:
    """Its jobs in submission (and array index) order, with their dependencies' ids."""
    return list(
        workflow.jobs.select_related("namespace").prefetch_related("dependencies").order_by("array_index", "id")
    )


def workflow_counts(workflow_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Each workflow's jobs counted by state, in one query (a list page's progress)."""
    counts: dict[int, dict[str, int]] = {}
    rows = Job.objects.filter(workflow_id__in=list(workflow_ids)).values_list("workflow_id", "state")
    for workflow_id, state, n in rows.annotate(n=Count("id")).order_by():
        counts.setdefault(workflow_id, {})[state] = n
    return counts


def job_dependencies(job: Job) -> list[JobDependency]:
    """What the job waits for, with each target's name and state."""
    return list(job.dependencies.select_related("on").order_by("id"))


def jobs_of(user, limit: int = 20) -> QuerySet[Job]:
    """The user's own jobs ("my jobs"), active first, then the newest."""
    if not user.is_authenticated:
        return Job.objects.none()
    active_first = Case(When(state__in=ACTIVE_STATES, then=0), default=1)
    return (
        Job.objects.filter(submitted_by=user)
        .select_related("namespace")
        .order_by(active_first, "-submitted_at")[:limit]
    )


def job_get_visible(user, job_id: int) -> Job:
    job = jobs_visible_to(user).filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"job {job_id} not found")
    return job


def queue_of(user, namespace: str) -> QuerySet[Job]:
    """Queued jobs in admission order (the last cycle's positions; new jobs last)."""
    ns = namespace_get_visible(user, namespace)
    return Job.objects.filter(namespace=ns, state=State.QUEUED).select_related("namespace").order_by(*QUEUE_ORDER)


def queued_besides(job: Job) -> int:
    """How many other jobs wait Queued in the job's namespace: a new job's provisional
    place (last) until a cycle ranks it."""
    return Job.objects.filter(namespace_id=job.namespace_id, state=State.QUEUED).exclude(pk=job.pk).count()


def webhook_job_holding(namespace: str, name: str) -> Job | None:
    """The Queued job the webhook stored for the object namespace/name (with its
    namespace), the one that holds that object while it waits; None if there is none."""
    return (
        Job.objects.select_related("namespace")
        .filter(namespace__name=namespace, name=name, state=State.QUEUED, source=Source.WEBHOOK)
        .first()
    )


def job_bound_to(namespace: str, name: str, job_id: int | None) -> Job | None:
    """The job a cluster object namespace/name is bound to (with its namespace): the one its
    jobdash.io/job-id label names (`job_id`), else the active job of that name."""
    jobs = Job.objects.select_related("namespace").filter(namespace__name=namespace, name=name)
    if job_id is not None:
        return jobs.filter(pk=job_id).first()
    return jobs.filter(state__in=ACTIVE_STATES).first()


def job_events(job: Job) -> QuerySet[JobEvent]:
    return JobEvent.objects.filter(job=job).order_by("created_at", "id")


def namespace_summaries(user) -> QuerySet[Namespace]:
    """Namespaces with their job counts per active state, in one query."""
    return (
        namespaces_visible_to(user)
        .annotate(
            queued=Count("jobs", filter=Q(jobs__state=State.QUEUED)),
            released=Count("jobs", filter=Q(jobs__state=State.RELEASED)),
            running=Count("jobs", filter=Q(jobs__state=State.RUNNING)),
        )
        .order_by("name")
    )


def cluster_quotas() -> dict:
    """Per namespace hard/used/reserved as the last admission cycle saw them."""
    return ClusterState.objects.filter(id=1).values_list("quotas", flat=True).first() or {}


def cluster_quotas_and_nodes() -> tuple[dict, list]:
    """Quotas (as cluster_quotas) and nodes ({"name", "allocatable", "unschedulable", ...}) in one query."""
    row = ClusterState.objects.filter(id=1).values_list("quotas", "nodes").first()
    return (row[0] or {}, row[1] or []) if row else ({}, [])


def job_counts_by_state(user) -> dict[str, int]:
    """The jobs `user` may see (all, for staff), every state (zero included)."""
    jobs = (
        Job.objects.all()
        if sees_all_namespaces(user)
        else Job.objects.filter(namespace__in=namespaces_visible_to(user))
    )
    counts = dict(jobs.values_list("state").annotate(n=Count("id")).order_by())
    return {state: counts.get(state, 0) for state in State.values}


@contextmanager
def one_snapshot():
    """Reads that must agree with each other (a job's state badge and its timeline) from one
    database snapshot: under PostgreSQL's default READ COMMITTED each query sees the latest
    commit, so a release landing between two reads showed Queued beside 'Released'."""
    with transaction.atomic():
        # Only as the outermost transaction (no savepoint): inside another one (a test's) the
        # level can no longer be set.
        if not connection.savepoint_ids:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def lost_work_of(job_id: int) -> list[dict[str, Any]]:
    """A job's stops to make room, oldest first: {cause, at, seconds, gpu_hours, checkpointed_at}."""
    return [
        {
            "cause": row.cause,
            "at": row.at,
            "seconds": row.seconds,
            "gpu_hours": row.gpu_s / 3600,
            "checkpointed_at": row.checkpointed_at,
        }
        for row in LostWork.objects.filter(job_id=job_id)
    ]
