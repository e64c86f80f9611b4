"""Folding the jobs' timelines into UsageDay (issue 37). A fold is one transaction that locks
the UsageMark row, reads the events after its mark in id order, closes the runs they end,
adds those runs' seconds to the day rows and moves the mark: two processes (a failover,
a beat task and a rebuild) never fold one event twice, and a fold killed midway leaves
nothing behind."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from jobdash.jobs.models import Job, JobEvent
from queueing.usage import (
    Amounts,
    Run,
    Scale,
    UsageKey,
    cluster_at,
    resources,
    runs_from_events,
    scaled_requests,
    summarize,
)

from .models import UsageDay, UsageMark

UPSERT_CHUNK = 1_000


def settle_seconds() -> float:
    """How old an event must be before it is folded. Ids are handed out when a row is
    inserted, not when its transaction commits: an event of a transaction still open may get
    an id below one already committed. Folding only settled events keeps the mark from
    passing one not yet visible; reads add the unsettled ones themselves (selectors)."""
    return float(settings.JOBDASH_USAGE_SETTLE_SECONDS)


def locked_mark() -> UsageMark:
    """The mark, locked until the transaction ends (made on first use)."""
    UsageMark.objects.bulk_create([UsageMark(id=1)], ignore_conflicts=True)
    return UsageMark.objects.select_for_update().get(id=1)


def open_of(mark: UsageMark) -> dict[int, tuple[float, Scale]]:
    """The runs open at the mark: {job id: (start, scale)} (a mark written before elastic
    jobs were billed by size holds the start alone)."""
    found: dict[int, tuple[float, Scale]] = {}
    for job_id, value in (mark.open or {}).items():
        start, scale = value if isinstance(value, list) else (value, None)
        found[int(job_id)] = (float(start), scale)
    return found


def persisted(still_open: Mapping[int, tuple[float, Scale]]) -> dict[str, list]:
    """The open runs as the mark keeps them (JSON)."""
    return {str(job_id): [start, dict(scale) if scale else None] for job_id, (start, scale) in still_open.items()}


def events_after(event_id: int):
    """The events after `event_id`, in id order: (id, job id, type, time, scale)."""
    return (
        JobEvent.objects.filter(id__gt=event_id)
        .order_by("id")
        .values_list("id", "job_id", "type", "created_at", "scale")
    )


def job_runs(spans: Iterable[tuple[int, float, float, Scale]]) -> list[Run]:
    """(job id, start, end, scale) -> Runs with the jobs' resources at that scale and their
    labels (jobs removed since: none). A run's cluster (issue 49) is the one the job's last
    Released event before the run's start names ("released to cluster west"); when none
    names one (an adopted release), the job's cluster at the time of the fold, which for a
    job planned again elsewhere after its cluster was lost may be the later cluster."""
    spans = list(spans)
    ids = {span[0] for span in spans}
    jobs = {
        row[0]: row[1:]
        for row in Job.objects.filter(id__in=ids)
        .values_list(
            "id", "namespace__name", "submitted_by_name", "kind", "priority_class", "borrowing", "workload", "cluster"
        )
        .order_by()
    }
    releases = released_clusters(ids) if jobs else {}
    runs = []
    for job_id, start, end, scale in spans:
        if job_id not in jobs:
            continue
        namespace, user, kind, priority_class, borrowing, workload, now_in = jobs[job_id]
        gpus, cpu_m, memory_b = resources(scaled_requests(workload or {}, scale))
        cluster = cluster_at(releases.get(job_id, ()), start, now_in)
        labels = (namespace, user, kind, priority_class, borrowing, cluster)
        runs.append(Run(job_id, start, end, gpus, cpu_m, memory_b, *labels))
    return runs


def released_clusters(job_ids: Iterable[int]) -> dict[int, list[tuple[float, str | None]]]:
    """Each job's releases in time order: (when, the cluster its Released event names; "" with
    one cluster, or an adoption). One query (the jobs' events of one type, by the job index)."""
    found: dict[int, list[tuple[float, str | None]]] = {}
    rows = (
        JobEvent.objects.filter(job_id__in=list(job_ids), type="Released")
        .order_by("id")
        .values_list("job_id", "created_at", "cluster")
    )
    for job_id, at, cluster in rows:
        # ("": released with one cluster, or adopted: billed to no cluster, not to a later one)
        found.setdefault(job_id, []).append((at.timestamp(), cluster))
    return found


def add_to_days(totals: Mapping[UsageKey, Amounts]) -> None:
    """Adds to the day rows, making those missing: INSERT ... ON CONFLICT DO UPDATE, one
    statement per chunk."""
    table = connection.ops.quote_name(UsageDay._meta.db_table)
    keys = ["day", "namespace", "user", "kind", "priority_class", "borrowed", "cluster"]  # UsageKey's order
    amounts = ["gpu_s", "cpu_s", "memory_gib_s"]
    columns = ", ".join(connection.ops.quote_name(c) for c in keys + amounts)
    conflict = ", ".join(connection.ops.quote_name(c) for c in keys)
    update = ", ".join(f"{(q := connection.ops.quote_name(c))} = {table}.{q} + EXCLUDED.{q}" for c in amounts)
    row_slots = "(" + ", ".join(["%s"] * len(keys + amounts)) + ")"
    items = [(*key, *value) for key, value in totals.items() if value != Amounts()]
    with connection.cursor() as cursor:
        for i in range(0, len(items), UPSERT_CHUNK):
            chunk = items[i : i + UPSERT_CHUNK]
            values = ", ".join([row_slots] * len(chunk))
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {values} ON CONFLICT ({conflict}) DO UPDATE SET {update}",
                [value for row in chunk for value in row],
            )


def fold(limit: int = 10_000, now: datetime | None = None, settle_s: float | None = None) -> int:
    """Folds up to `limit` settled events after the mark; returns how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settle_seconds() if settle_s is None else settle_s)
    with transaction.atomic():
        mark = locked_mark()
        events = []
        for row in events_after(mark.event_id)[:limit]:
            if row[3] > cutoff:
                break  # the events after it wait, settled or not: the mark only moves forward
            events.append(row)
        if not events:
            return 0
        closed, still_open = runs_from_events(
            ((job_id, kind, at.timestamp(), scale) for _, job_id, kind, at, scale in events), open_of(mark)
        )
        add_to_days(summarize(job_runs(closed)))
        mark.event_id = events[-1][0]
        mark.open = persisted(still_open)
        mark.folded_at = now
        mark.save(update_fields=["event_id", "open", "folded_at"])
    return len(events)


def fold_all(batch: int = 10_000, now: datetime | None = None, settle_s: float | None = None) -> int:
    """Folds every settled event, a transaction per `batch`."""
    total = 0
    while folded := fold(batch, now=now, settle_s=settle_s):
        total += folded
    return total


def rebuild(batch: int = 10_000, now: datetime | None = None, settle_s: float | None = None) -> int:
    """Forgets every day row and folds every event from the first, under the mark's lock all
    along (a beat fold meanwhile waits, then finds nothing to do)."""
    with transaction.atomic():
        mark = locked_mark()
        UsageDay.objects.all().delete()
        mark.event_id, mark.open, mark.folded_at = 0, {}, None
        mark.save(update_fields=["event_id", "open", "folded_at"])
        return fold_all(batch, now=now, settle_s=settle_s)
