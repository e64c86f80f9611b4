"""Reads for the namespace dashboard: its tables, the quota bars and the history chart.

Every table is one page query plus one count, whatever the size of the queue: the rows
carry what the page shows (demand from the workload column), the big text columns
(manifest, parsed) are never loaded.
"""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Q, QuerySet
from django.db.models.fields.json import KT
from django.utils import timezone

from queueing.workload import ADAPTERS

from .cluster_selectors import several_clusters
from .estimates import EstimateRecord, estimate_record
from .models import ACTIVE_STATES, FINISHED_STATES, ClusterState, Job, Namespace, State
from .selectors import QUEUE_ORDER, cluster_quotas

PAGE_SIZE = 25
# Columns a table row needs; everything else (manifest, parsed, placement) stays in the database.
ROW_FIELDS = (
    "id",
    "namespace",
    "name",
    "kind",
    "state",
    "priority",
    "workload",
    "submitted_at",
    "submitted_by_name",
    "released_at",
    "started_at",
    "finished_at",
    "position",
    "reason",
    "message",
    "eta",
    "eta_late",
    "eta_first_late",
    "attempts",
    "borrowing",
    "preemptions",
    "preempted_for",
    "preempt_at",
    "cluster",
)
STATE_FILTERS = ("", "Queued", "Running", *[str(s) for s in FINISHED_STATES])


def kind_filters() -> tuple[str, ...]:
    """ "" (every kind) and the kinds jobdash manages, by name."""
    return ("", *sorted({adapter.kind for adapter in ADAPTERS.values()}))


@dataclass(frozen=True)
class Filters:
    state: str = ""  # "" = the active jobs (queue and running); "Running" includes Released
    q: str = ""  # part of the job name
    kind: str = ""  # "" = every kind

    @classmethod
    def parse(cls, params) -> "Filters":
        state, kind = params.get("state", ""), params.get("kind", "")
        # Unknown values fall back to the default view rather than erroring: these come from links.
        return cls(
            state=state if state in STATE_FILTERS else "",
            q=params.get("q", "").strip()[:63],
            kind=kind if kind in kind_filters() else "",
        )


def _rows(namespace: Namespace, filters: Filters) -> QuerySet[Job]:
    jobs = Job.objects.filter(namespace=namespace).only(*ROW_FIELDS)
    if filters.q:
        jobs = jobs.filter(name__icontains=filters.q)
    if filters.kind:
        jobs = jobs.filter(kind=filters.kind)
    return jobs


def queue_page(namespace: Namespace, filters: Filters, page: str | None) -> Page | None:
    """Queued jobs in admission order: the last cycle's positions, then new jobs by age."""
    if filters.state not in ("", State.QUEUED):
        return None
    jobs = _rows(namespace, filters).filter(state=State.QUEUED).order_by(*QUEUE_ORDER)
    return Paginator(jobs, PAGE_SIZE).get_page(page)


def running_page(namespace: Namespace, filters: Filters, page: str | None) -> Page | None:
    """Released (pods starting) and Running jobs, longest running first."""
    if filters.state not in ("", State.RUNNING):
        return None
    jobs = (
        _rows(namespace, filters)
        .filter(state__in=(State.RELEASED, State.RUNNING))
        .order_by(F("started_at").asc(nulls_last=True), "released_at", "id")
    )
    return Paginator(jobs, PAGE_SIZE).get_page(page)


def finished_page(namespace: Namespace, filters: Filters, page: str | None) -> Page | None:
    if filters.state not in FINISHED_STATES:
        return None
    jobs = _rows(namespace, filters).filter(state=filters.state).order_by(F("finished_at").desc(nulls_last=True), "-id")
    return Paginator(jobs, PAGE_SIZE).get_page(page)


def namespace_state_counts(namespace: Namespace) -> dict[str, int]:
    """Active jobs of the namespace per state, in one query."""
    counts = Job.objects.filter(namespace=namespace, state__in=ACTIVE_STATES).aggregate(
        **{str(s).lower(): Count("id", filter=Q(state=s)) for s in ACTIVE_STATES}
    )
    return counts


def namespace_quota(namespace: Namespace) -> dict | None:
    return cluster_quotas().get(namespace.name)


@dataclass(frozen=True)
class NamespacePage:
    """Everything the namespace dashboard shows; `history` and `estimates` (the track record
    of its start estimates) only for the full page (the live part polled by htmx does not
    redraw the chart, and the record changes only as jobs start)."""

    counts: dict[str, int]
    quota: dict | None
    queue: Page | None
    running: Page | None
    finished: Page | None
    history: "History | None"
    estimates: EstimateRecord | None = None
    several_clusters: bool = False  # (issue 49) the tables name each job's cluster


def namespace_page(
    namespace: Namespace,
    filters: Filters,
    *,
    page: str | None,
    running_page_number: str | None,
    live: bool,
    now: datetime,
) -> NamespacePage:
    """The namespace dashboard's one selector: a page query and a count per table shown,
    the counts per state, the quota as the last cycle saw it, and (full page) the history
    and the track record of its start estimates."""
    return NamespacePage(
        counts=namespace_state_counts(namespace),
        quota=namespace_quota(namespace),
        queue=queue_page(namespace, filters, page),
        running=running_page(namespace, filters, running_page_number),
        finished=finished_page(namespace, filters, page),
        history=None if live else history(namespace, now=now),
        estimates=None if live else estimate_record(namespace),
        several_clusters=several_clusters(),
    )


@dataclass(frozen=True)
class History:
    start: datetime
    step: timedelta
    queued: list[int]  # queue length at the end of each bucket
    admitted: list[int]  # jobs released during each bucket


def history(namespace: Namespace, *, hours: int = 6, buckets: int = 24, now: datetime | None = None) -> History:
    """Queue length and admissions over the last `hours`, in one query.

    Derived from the jobs' own times: a job is queued at t when submitted before t and
    neither released nor finished by t. A requeued job has lost its first release time,
    so it counts as queued since its submission: an overestimate, never a gap. Only jobs
    that touch the window are read (the WHERE below), so old history costs nothing.
    """
    now = now or timezone.now()
    step = timedelta(hours=hours) / buckets
    start = now - step * buckets
    ends = [start + step * (i + 1) for i in range(buckets)]
    aggregates = {}
    for i, end in enumerate(ends):
        aggregates[f"q{i}"] = Count(
            "id",
            filter=Q(submitted_at__lte=end)
            & (Q(released_at__isnull=True) | Q(released_at__gt=end))
            & (Q(finished_at__isnull=True) | Q(finished_at__gt=end)),
        )
        aggregates[f"a{i}"] = Count("id", filter=Q(released_at__gt=end - step, released_at__lte=end))
    # Still active, or finished within the window: each side has its index (job_state_ns_submitted,
    # job_state_finished), so a namespace's million finished jobs are not read (bench/retention.py).
    touching = (Q(released_at__isnull=True) | Q(released_at__gt=start)) & (
        Q(state__in=ACTIVE_STATES) | Q(state__in=FINISHED_STATES, finished_at__gt=start)
    )
    row = Job.objects.filter(touching, namespace=namespace, submitted_at__lte=now).aggregate(**aggregates)
    return History(
        start=start,
        step=step,
        queued=[row[f"q{i}"] for i in range(buckets)],
        admitted=[row[f"a{i}"] for i in range(buckets)],
    )


def job_pods(job: Job) -> dict:
    """Pod phase counts per replica type of one job ("replicas"), and its first pods one by
    one ("pods": name, role, phase, node, gated), as the last cycle saw them; reads only
    that job's key of the cluster summary, not the whole of it."""
    key = f"{job.namespace.name}/{job.name}"
    row = ClusterState.objects.filter(id=1).values(entry=KT(f"pods__{key}")).first()
    if not row or not row["entry"]:
        return {}
    entry = row["entry"]
    # KT gives the JSON text of an object.
    entry = json.loads(entry) if isinstance(entry, str) else entry
    # The object of that name may be another job's (an earlier run of the same name).
    return entry if entry.get("job") == job.pk else {}
