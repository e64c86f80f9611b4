"""What jobs used (issue 37), from their timelines: a run starts at a Running event and ends at
the job's next event that takes it off the cluster; its GPU-, CPU- and memory-seconds are
split at UTC midnights and summed per day and label. Pure: the database side
(jobdash/usage) folds events through these functions, so an incremental fold, a rebuild and
a direct computation agree by construction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

START = "Running"
# The events that end a run: the job left the cluster (or was never let on it again).
ENDS = frozenset({"Preempted", "Reclaimed", "Requeued", "Retrying", "Succeeded", "Failed", "Cancelled", "Refused"})
DAY_S = 86_400.0
GIB = float(2**30)


@dataclass(frozen=True)
class Run:
    job_id: int
    start: float  # epoch seconds
    end: float
    gpus: float
    cpu_m: float  # millicores
    memory_b: float  # bytes
    namespace: str
    user: str
    kind: str
    priority_class: str
    borrowed: bool


class UsageKey(NamedTuple):
    day: date
    namespace: str
    user: str
    kind: str
    priority_class: str
    borrowed: bool


class Amounts(NamedTuple):
    gpu_s: float = 0.0
    cpu_s: float = 0.0  # core-seconds
    memory_gib_s: float = 0.0

    def __add__(self, other: object) -> Amounts:
        if not isinstance(other, Amounts):
            return NotImplemented
        return Amounts(self.gpu_s + other.gpu_s, self.cpu_s + other.cpu_s, self.memory_gib_s + other.memory_gib_s)


def resources(requests: Mapping[str, float]) -> tuple[float, float, float]:
    """(GPUs, millicores, bytes) of a workload's total requests (queueing.Workload.requests):
    every resource named ".../gpu" counts as GPUs."""
    gpus = sum(float(v) for name, v in requests.items() if name.endswith("/gpu"))
    return gpus, float(requests.get("cpu", 0)), float(requests.get("memory", 0))


def runs_from_events(
    events: Iterable[tuple[int, str, float]], open_runs: Mapping[int, float] | None = None
) -> tuple[list[tuple[int, float, float]], dict[int, float]]:
    """(job id, event type, time) in time order -> the closed runs (job id, start, end) and the
    open ones {job id: start}. `open_runs`: those open before the first of `events` (a fold
    resumed where the last one stopped)."""
    still_open = dict(open_runs or {})
    closed = []
    for job_id, kind, at in events:
        if kind == START:
            # A second Running without an end between (never written today) keeps the first start.
            still_open.setdefault(job_id, at)
        elif kind in ENDS and job_id in still_open:
            closed.append((job_id, still_open.pop(job_id), at))
    return closed, still_open


def _epoch(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def split_by_day(start: float, end: float) -> list[tuple[date, float]]:
    """The UTC days [start, end) touches and the seconds spent in each."""
    if end <= start:
        return []
    day = datetime.fromtimestamp(start, UTC).date()
    parts = []
    at = start
    while at < end:
        midnight = _epoch(day + timedelta(days=1))
        upto = min(end, midnight)
        parts.append((day, upto - at))
        at, day = upto, day + timedelta(days=1)
    return parts


def run_amounts(run: Run) -> Iterable[tuple[UsageKey, Amounts]]:
    for day, seconds in split_by_day(run.start, run.end):
        key = UsageKey(day, run.namespace, run.user, run.kind, run.priority_class, run.borrowed)
        yield key, Amounts(run.gpus * seconds, run.cpu_m / 1000.0 * seconds, run.memory_b / GIB * seconds)


def summarize(runs: Iterable[Run]) -> dict[UsageKey, Amounts]:
    totals: dict[UsageKey, Amounts] = {}
    for run in runs:
        for key, amounts in run_amounts(run):
            totals[key] = totals.get(key, Amounts()) + amounts
    return totals


def decayed(usage_by_day: Mapping[date, float], today: date, half_life_days: float) -> float:
    """Slurm's decayed usage: each day's use counts half as much every `half_life_days` it is
    older than today (today's counts whole; 0 or less: no decay)."""
    if half_life_days <= 0:
        return float(sum(usage_by_day.values()))
    return float(
        sum(amount * 0.5 ** (max(0, (today - day).days) / half_life_days) for day, amount in usage_by_day.items())
    )
