"""Backfill behind a head's reservation (EASY backfilling, as in Slurm's backfill scheduler).

When a namespace's head (the first job in queue order that cannot start) waits for
quota, it gets a *shadow* reservation: the earliest time its demand fits the
namespace's quota, given when the jobs holding that quota are expected to end, and
the quota that will still be free at that time once the head has taken its share
(``extra``).  A later job that fits now may start only if it does not delay that
start under the same estimates: it is expected to end by the shadow time, or it fits
in ``extra`` (which it then uses up).  Small jobs fill the gaps; the head's start is
not pushed back by them, as long as the estimates hold.

Estimates come from ``eta.duration_of`` (declared, annotation, the namespace's
history of the same shape); no oracle.  They are wrong both ways, so two rules keep
an error from starving the head:

- a running job past its expected end is taken to end now: the head looks about to
  fit, so nothing needing its quota is backfilled until the job really ends;
- once the head has waited the policy's ``hold_after_s`` the planner holds
  its quota outright instead (``policies.PriorityPolicy``): from then on nothing
  else in the namespace takes quota the head needs, and running jobs all end some
  day.  If no expected end makes room for the head (jobs with no estimate, usage
  jobdash does not know about) it gets no shadow: nothing says what would delay
  it, so the jobs behind it are not held back until that outright hold.

Pure functions on plain dicts; the planner (``planner._Planner``) keeps one ``Shadow``
per namespace and cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .eta import duration_of
from .snapshot import InFlightJob, PendingJob, Snapshot
from .workload import Workload

INF = float("inf")
ENDS_FIRST, EXTRA = "ends-first", "extra"


@dataclass
class Shadow:
    """``head`` is expected to fit at ``start``; ``extra`` is what is free then beyond its demand."""

    head: int
    start: float
    extra: dict[str, int] = field(default_factory=dict)

    def allows(self, now: float, duration: float | None, demand: Mapping[str, int]) -> str | None:
        """How a job that fits the free quota now may start without delaying the head:
        "ends-first" (expected to end by ``start``), "extra" (fits what is left at
        ``start``), or None (it may not).  Nothing is taken: see ``take``."""
        if duration is not None and self.start != INF and now + duration <= self.start:
            return ENDS_FIRST
        if all(demand.get(key, 0) <= amount for key, amount in self.extra.items()):
            return EXTRA
        return None

    def take(self, how: str, demand: Mapping[str, int]) -> None:
        """The job was admitted: one admitted into ``extra`` uses it up."""
        if how == EXTRA:
            for key in self.extra:
                self.extra[key] -= demand.get(key, 0)


def shadow(
    head: int,
    now: float,
    free: Mapping[str, int],
    demand: Mapping[str, int],
    releases: Iterable[tuple[float, Mapping[str, int]]],
) -> Shadow:
    """The head's shadow reservation.  ``free``: the namespace's free quota now (constrained
    keys only); ``demand``: the head's; ``releases``: (expected end, quota it gives back) of
    every job holding the namespace's quota.  Ends in the past count as now.

    Returns ``start = inf`` (and no extra) if the known releases never make room: then no
    estimate says backfilling is harmless, and the caller must not backfill at all."""
    available = dict(free)
    keys = tuple(available)

    def fits() -> bool:
        return all(demand.get(key, 0) <= available[key] for key in keys)

    ordered = sorted(releases, key=_end)
    taken = 0
    while not fits() and taken < len(ordered):
        for key in keys:
            available[key] += ordered[taken][1].get(key, 0)
        taken += 1
    if not fits():
        return Shadow(head, INF, {key: 0 for key in keys})
    start = now if taken == 0 else max(ordered[taken - 1][0], now)
    # Quota given back by the shadow time is there too (ties, and ends already past).
    for end, gives in ordered[taken:]:
        if max(end, now) > start:
            break
        for key in keys:
            available[key] += gives.get(key, 0)
    return Shadow(head, start, {key: available[key] - demand.get(key, 0) for key in keys})


def _end(release: tuple[float, Mapping[str, int]]) -> float:
    return release[0]


class CycleBackfill:
    """One planning cycle's shadows (namespace -> Shadow) and the estimates behind them."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot
        self.now = snapshot.now
        self.shadows: dict[str, Shadow] = {}
        self._holders: dict[str, list[tuple[float, Mapping[str, int]]]] | None = None
        # Jobs of one shape and namespace share their estimate (unless declared per job).
        self._durations: dict[tuple[int, str], float | None] = {}

    def estimate(self, workload: Workload, namespace: str, declared: float | None = None) -> float | None:
        """``eta.duration_of``'s seconds, cached per shape and namespace for the cycle (the
        start-time forecast asks the same questions: it shares this cache)."""
        if declared is not None and declared > 0:
            return float(declared)
        key = (id(workload), namespace)
        if key not in self._durations:
            self._durations[key], _ = duration_of(workload, namespace, None, self.snapshot.history)
        return self._durations[key]

    def duration(self, job: PendingJob | InFlightJob, unknown: float | None) -> float | None:
        """The job's expected run time in seconds, or ``unknown`` if nothing says."""
        seconds = self.estimate(job.workload, job.namespace, job.expected_duration)
        return unknown if seconds is None else seconds

    def _expected_end(self, start: float, duration: float | None) -> float:
        if duration is None:
            return INF  # gives nothing back as far as anyone knows
        # Past its estimate: assume it ends any moment, so the head looks about to fit
        # and nothing is backfilled on the strength of an estimate already proven short.
        return max(start + duration, self.now)

    def holders(self, namespace: str) -> list[tuple[float, Mapping[str, int]]]:
        """(expected end, quota demand) of the running and in-flight jobs of ``namespace``."""
        if self._holders is None:
            self._holders = {}
            for job in self.snapshot.running:
                end = job.expected_end
                if end is None:
                    end = self._expected_end(job.started_at, self.estimate(job.workload, job.namespace))
                self._holders.setdefault(job.namespace, []).append((max(end, self.now), job.demand))
            for flight in self.snapshot.in_flight:
                end = self._expected_end(self.now, self.duration(flight, None))
                self._holders.setdefault(flight.namespace, []).append((end, flight.demand))
        return self._holders.get(namespace, [])

    def reserve(
        self, head: PendingJob, free: Mapping[str, int], admitted: Iterable[PendingJob], unknown: float | None
    ) -> Shadow | None:
        """Give ``head`` its shadow: ``free`` is its namespace's free quota now, after
        ``admitted`` (this cycle's earlier admissions there, which hold quota from now).
        None if no expected end makes room for it: then the estimates cannot say what
        would delay it, and it waits for the planner's outright hold instead."""
        releases = list(self.holders(head.namespace))
        for job in admitted:
            releases.append((self._expected_end(self.now, self.duration(job, unknown)), job.demand))
        found = shadow(head.id, self.now, free, head.demand, releases)
        if found.start == INF:
            return None  # no known end makes room: nothing to protect by estimate
        self.shadows[head.namespace] = found
        return found
