"""Reads about start-time estimates (issue #16): whether a queued job is past the late bound
it was first given, how a started job's first estimate did, and a namespace's track record.

The dispatcher writes the estimates (jobdash.dispatch); this module only reads them. How
they read to people is presenters.py's.
"""

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from .models import Job, Namespace, State

# The track record: a namespace's last RECORD_JOBS started jobs that had a first estimate,
# and how many started within CLOSE_ENOUGH of their first likely start (either side).
RECORD_JOBS = 10
CLOSE_ENOUGH = timedelta(minutes=20)
_RECORD_FIELDS = ("started_at", "eta_first", "eta_first_late")


def past_late_bound(job: Job, now: datetime) -> bool:
    """A queued job still waiting after the late bound of the first range it was given."""
    return job.state == State.QUEUED and job.eta_first_late is not None and now > job.eta_first_late


@dataclass(frozen=True)
class FirstEstimate:
    """How a started job's first estimate did: `late_by` is the start minus the first likely
    start (negative: it started earlier), `past_bound_by` the start minus the first late bound
    (at most 0: within it; None when it was given no late bound)."""

    late_by: timedelta
    past_bound_by: timedelta | None


def first_estimate_outcome(job: Job) -> FirstEstimate | None:
    """None unless the job has started and had a first estimate."""
    if job.started_at is None or job.eta_first is None:
        return None
    past_bound_by = None if job.eta_first_late is None else job.started_at - job.eta_first_late
    return FirstEstimate(late_by=job.started_at - job.eta_first, past_bound_by=past_bound_by)


@dataclass(frozen=True)
class EstimateRecord:
    """Of a namespace's last `jobs` started jobs with a first estimate (at most RECORD_JOBS):
    how many started within CLOSE_ENOUGH of their first likely start, and how many by their
    first late bound (a job given no late bound does not count as having started by it)."""

    jobs: int = 0
    within_20_min: int = 0
    by_late_bound: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def judge(rows: Iterable[tuple[datetime, datetime, datetime | None]]) -> EstimateRecord:
    """(started_at, eta_first, eta_first_late) rows -> the record over them."""
    jobs = within = by_bound = 0
    for started_at, first, first_late in rows:
        jobs += 1
        within += int(abs(started_at - first) <= CLOSE_ENOUGH)
        by_bound += int(first_late is not None and started_at <= first_late)
    return EstimateRecord(jobs, within, by_bound)


def _judged() -> QuerySet[Job]:
    return Job.objects.filter(started_at__isnull=False, eta_first__isnull=False)


def estimate_record(namespace: Namespace) -> EstimateRecord:
    """The namespace's track record: one query of at most RECORD_JOBS rows, newest start first."""
    rows = _judged().filter(namespace=namespace).order_by("-started_at", "-id").values_list(*_RECORD_FIELDS)
    return judge(rows[:RECORD_JOBS])


def estimate_records(namespaces: Iterable[Namespace]) -> dict[int, EstimateRecord]:
    """The track record of each namespace (by id), in one query for all of them: the
    newest RECORD_JOBS judged starts per namespace by a window over their starts."""
    ids = [namespace.pk for namespace in namespaces]
    if not ids:
        return {}
    newest_first = Window(
        RowNumber(), partition_by=F("namespace_id"), order_by=(F("started_at").desc(), F("id").desc())
    )
    rows = (
        _judged()
        .filter(namespace_id__in=ids)
        .annotate(rank=newest_first)
        .filter(rank__lte=RECORD_JOBS)
        .values_list("namespace_id", *_RECORD_FIELDS)
    )
    by_namespace: dict[int, list[tuple[datetime, datetime, datetime | None]]] = {pk: [] for pk in ids}
    for namespace_id, *row in rows:
        by_namespace[namespace_id].append((row[0], row[1], row[2]))
    return {pk: judge(judged) for pk, judged in by_namespace.items()}
