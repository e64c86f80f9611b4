"""Reading usage (issue 37): the folded day rows plus what the fold has not reached yet (the
runs open at its mark and the events after it, up to now), read in one snapshot so a fold
committing meanwhile is counted once."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from jobdash.jobs.models import LostWork
from queueing.usage import Amounts, UsageKey, decayed, runs_from_events, summarize

from .lost_work import Cause
from .models import UsageDay, UsageMark
from .services import events_after, job_runs, open_of

GROUPS = ("namespace", "user", "kind", "priority_class", "day", "borrowed", "cluster")


def _snapshot(outermost: bool) -> None:
    """The rest of this transaction reads one snapshot. In a transaction begun by the caller,
    it can no longer be asked for: there the mark is locked instead, so no fold commits while
    the day rows and the events are read."""
    if not outermost:
        UsageMark.objects.select_for_update().filter(id=1).first()
        return
    with connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")


def unfolded(now: datetime) -> dict[UsageKey, Amounts]:
    """What the fold has not reached: the events after the mark and the runs still open, up to now."""
    mark = UsageMark.objects.filter(id=1).first()
    events = events_after(mark.event_id if mark else 0)
    closed, still_open = runs_from_events(
        ((job_id, kind, at.timestamp(), scale) for _, job_id, kind, at, scale in events.iterator(chunk_size=5_000)),
        open_of(mark) if mark else {},
    )
    end = now.timestamp()
    spans = [*closed, *((job_id, start, end, scale) for job_id, (start, scale) in still_open.items())]
    return summarize(job_runs(spans))


def _key(values: Iterable[object]) -> tuple:
    return tuple(values)


def usage(
    from_day: date | None,
    to_day: date | None,
    group_by: Collection[str],
    namespaces: Collection[str] | None = None,
    now: datetime | None = None,
    lost: bool = True,
) -> list[dict]:
    """Rows {each of group_by, gpu_hours, cpu_hours, memory_gib_hours, and the GPU-hours
    lost (redone: lost_gpu_hours, and lost_<cause>_gpu_hours for each cause)} over the UTC days from
    `from_day` to `to_day` (both included; None: unbounded), of `namespaces` (None: all),
    sorted by the groups."""
    unknown = [g for g in group_by if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown group {unknown[0]!r}; expected some of {', '.join(GROUPS)}")
    group_by = list(dict.fromkeys(group_by))
    now = now or timezone.now()
    where = _days(from_day, to_day, namespaces)
    sums: dict[tuple, list[float]] = {}
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        _snapshot(outermost)
        folded = (
            UsageDay.objects.filter(where)
            .values(*group_by)
            .annotate(gpu=Sum("gpu_s"), cpu=Sum("cpu_s"), memory=Sum("memory_gib_s"))
            .order_by()
        )
        for row in folded:
            sums[_key(row[g] for g in group_by)] = [row["gpu"], row["cpu"], row["memory"]]
        live = unfolded(now)
    for usage_key, amounts in live.items():
        if (from_day and usage_key.day < from_day) or (to_day and usage_key.day > to_day):
            continue
        if namespaces is not None and usage_key.namespace not in namespaces:
            continue
        total = sums.setdefault(_key(getattr(usage_key, g) for g in group_by), [0.0, 0.0, 0.0])
        total[0] += amounts.gpu_s
        total[1] += amounts.cpu_s
        total[2] += amounts.memory_gib_s
    # (budgets and fair share read the hours alone: lost=False spares them the lost work's query)
    lost_work = lost_by(from_day, to_day, group_by, namespaces) if lost else {}
    rows = []
    for group in sorted(sums.keys() | lost_work.keys(), key=lambda k: tuple(str(v) for v in k)):
        gpu, cpu, memory = sums.get(group, (0.0, 0.0, 0.0))
        by_cause = lost_work.get(group, {})
        rows.append(
            {
                **dict(zip(group_by, group, strict=True)),
                "gpu_hours": gpu / 3600,
                "cpu_hours": cpu / 3600,
                "memory_gib_hours": memory / 3600,
                "lost_gpu_hours": sum(by_cause.values()) / 3600,
                **{f"lost_{cause}_gpu_hours": by_cause.get(cause, 0.0) / 3600 for cause in Cause.values},
            }
        )
    return rows


def month_gpu_hours(namespaces: Collection[str] | None = None, now: datetime | None = None) -> dict[str, float]:
    """GPU-hours each namespace used this calendar month (UTC), open runs up to now: what budgets read."""
    now = now or timezone.now()
    first = now.astimezone(UTC).date().replace(day=1)
    return {
        row["namespace"]: row["gpu_hours"] for row in usage(first, None, ["namespace"], namespaces, now, lost=False)
    }


def decayed_gpu_hours(now: datetime | None = None, half_life_days: float = 7.0) -> dict[str, float]:
    """Each namespace's GPU-hours decayed with a half-life (Slurm's fair share): the last ten
    half-lives (a thousandth of a day's weight is all that is left before them)."""
    now = now or timezone.now()
    today = now.astimezone(UTC).date()
    since = today - timedelta(days=int(10 * half_life_days) + 1) if half_life_days > 0 else None
    by_namespace: dict[str, dict[date, float]] = {}
    for row in usage(since, None, ["namespace", "day"], None, now, lost=False):
        by_namespace.setdefault(row["namespace"], {})[row["day"]] = row["gpu_hours"]
    return {namespace: decayed(days, today, half_life_days) for namespace, days in by_namespace.items()}


def lost_by(
    from_day: date | None, to_day: date | None, group_by: Collection[str], namespaces: Collection[str] | None = None
) -> dict[tuple, dict[str, float]]:
    """{the group's values (in group_by's order): {cause: GPU-seconds}} over the UTC days
    from `from_day` to `to_day` (both included, None: unbounded); the same groups as usage."""
    where = _days(from_day, to_day, namespaces)
    rows = (
        LostWork.objects.annotate(day=TruncDate("at", tzinfo=UTC))
        .filter(where)
        .values(*group_by, "cause")
        .annotate(gpu_s=Sum("gpu_s"))
        .order_by()
    )
    found: dict[tuple, dict[str, float]] = {}
    for row in rows:
        found.setdefault(tuple(row[g] for g in group_by), {})[row["cause"]] = row["gpu_s"] or 0.0
    return found


def _days(from_day: date | None, to_day: date | None, namespaces: Collection[str] | None) -> Q:
    """Rows of the UTC days from `from_day` to `to_day` (both included; None: unbounded), of
    `namespaces` (None: all)."""
    where = Q()
    if from_day:
        where &= Q(day__gte=from_day)
    if to_day:
        where &= Q(day__lte=to_day)
    if namespaces is not None:
        where &= Q(namespace__in=list(namespaces))
    return where
