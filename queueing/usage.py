"""What jobs used (issue 37), from their timelines: a run starts at a Running event and ends at
the job's next event that takes it off the cluster; its GPU-, CPU- and memory-seconds are
split at UTC midnights and summed per day and label. An elastic job is billed for the pods
it ran: its Running event says the size it was admitted with, each resize (grown or shrunk)
its new size, and the run is cut there. Pure: the database side (jobdash/usage) folds events
through these functions, so an incremental fold, a rebuild and a direct computation agree
by construction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple

START = "Running"
# The events that end a run: the job left the cluster (or was never let on it again). ClusterLost
# (issue 49): its cluster lost, it is planned again elsewhere; its next run is another cluster's
# (a copy left running behind the partition is not jobdash's to count).
ENDS = frozenset(
    {"Preempted", "Reclaimed", "Requeued", "Retrying", "Succeeded", "Failed", "Cancelled", "Refused", "ClusterLost"}
)
# The events after which a running elastic job runs another number of pods (the event's scale).
RESIZES = frozenset({"Resized", "Shrunk"})
# The pods an elastic job runs per elastic role (its other roles as written); None: as written.
Scale = Mapping[str, int] | None
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
    cluster: str = ""  # the cluster it ran in (issue 49); "": the one cluster


class UsageKey(NamedTuple):
    day: date
    namespace: str
    user: str
    kind: str
    priority_class: str
    borrowed: bool
    cluster: str = ""


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


def scaled_requests(workload: Mapping[str, Any], scale: Scale) -> dict[str, float]:
    """A job's total requests (its Workload.to_json's "requests") while its roles run the pods
    `scale` says: each scaled role's pods beyond or short of its written count added or taken
    away at its per-pod requests."""
    totals = {name: float(amount) for name, amount in (workload.get("requests") or {}).items()}
    if not scale:
        return totals
    for pod_set in workload.get("pod_sets") or ():
        role = pod_set.get("role")
        if role in scale:
            more = scale[role] - pod_set.get("count", 0)
            for name, amount in (pod_set.get("requests") or {}).items():
                totals[name] = totals.get(name, 0.0) + float(amount) * more
    return totals


def runs_from_events(
    events: Iterable[tuple[int, str, float, Scale]], open_runs: Mapping[int, tuple[float, Scale]] | None = None
) -> tuple[list[tuple[int, float, float, Scale]], dict[int, tuple[float, Scale]]]:
    """(job id, event type, time, scale) in time order -> the closed runs (job id, start, end,
    scale) and the open ones {job id: (start, scale)}. A resize with its scale closes the run
    at its size so far and opens one at the new size. `open_runs`: those open before the
    first of `events` (a fold resumed where the last one stopped)."""
    still_open = dict(open_runs or {})
    closed = []
    for job_id, kind, at, scale in events:
        if kind == START:
            # A second Running without an end between (never written today) keeps the first start.
            still_open.setdefault(job_id, (at, scale))
        elif kind in RESIZES and job_id in still_open and scale is not None:
            start, before = still_open[job_id]
            closed.append((job_id, start, at, before))
            still_open[job_id] = (at, scale)
        elif kind in ENDS and job_id in still_open:
            start, before = still_open.pop(job_id)
            closed.append((job_id, start, at, before))
    return closed, still_open


def cluster_at(releases: Sequence[tuple[float, str | None]], start: float, now_in: str) -> str:
    """The cluster a run that started at `start` ran in (issue 49): the one named by the job's
    last release at or before it (`releases`: (time, the cluster its Released event names,
    or None when it names none), in time order); else `now_in`, the job's cluster now."""
    found = now_in
    for at, cluster in releases:
        if at > start:
            break
        found = now_in if cluster is None else cluster
    return found


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
        key = UsageKey(day, run.namespace, run.user, run.kind, run.priority_class, run.borrowed, run.cluster)
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
