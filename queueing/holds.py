"""Workflow holds (issue 36): a job waits for its dependencies, and an array runs at most its
limit of jobs at once.

The dispatcher works out, from the database, which of a queued job's dependencies are not
met yet and which can never be (``Dependencies``), and how many of an array's jobs are
admitted now (``GroupLimit``); the planner holds the job in phase 3a and gives the reason.
A job waiting for its dependencies is not played forward with the queue: its likely start is
when the last of them is likely to end (``dependent_starts``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .reasons import Outcome, Reason

if TYPE_CHECKING:  # snapshot.py imports this module
    from .cycle_state import NamespaceState
    from .snapshot import InFlightJob, PendingJob, Snapshot


@dataclass(frozen=True, slots=True)
class Dependencies:
    """A queued job's dependencies not met yet: ``waiting`` (job id, name, condition) may still
    be met; ``never`` (job id, name, condition, the state it ended in) no longer can, and the
    job was kept all the same (``jobdash.io/keep-if-never-satisfied``)."""

    waiting: tuple[tuple[int, str, str], ...] = ()
    never: tuple[tuple[int, str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Budget:
    """A namespace past its GPU-hour budget this month (issue 37): ``mode`` "wait" holds its
    jobs; "borrow" admits them last, on what nobody else wants, as borrowing (first to go)."""

    used_hours: float
    budget_hours: float
    mode: str = "borrow"


@dataclass(frozen=True, slots=True)
class GroupLimit:
    """An array's limit: at most ``limit`` of its jobs admitted at once; ``admitted`` are now."""

    name: str
    limit: int
    admitted: int


def dependent_starts(
    dependents: Mapping[int, Dependencies],
    starts: Mapping[int, float],
    durations: Callable[[int], float | None],
    ends: Mapping[int, float | None],
    now: float,
) -> tuple[dict[int, float], dict[int, str]]:
    """Likely starts of jobs that wait for others: when the last of their dependencies is
    likely to end. ``starts``: the forecast's starts of queued jobs; ``durations(id)``: a queued
    job's expected run time; ``ends``: likely ends of the jobs admitted already (None: unknown).
    A dependency that is itself a dependent is resolved first (a chain preprocess -> train ->
    evaluate adds up). No start when any end is unknown: a note says whose."""
    found: dict[int, float | None] = {}

    def start(job_id: int, trail: frozenset[int]) -> float | None:
        if job_id in found:
            return found[job_id]
        latest = now
        for on, _, _ in dependents[job_id].waiting:
            end = end_of(on, trail | {job_id})
            if end is None:
                found[job_id] = None
                return None
            latest = max(latest, end)
        found[job_id] = latest
        return latest

    def end_of(job_id: int, trail: frozenset[int]) -> float | None:
        if job_id in ends:
            return ends[job_id]
        if job_id in dependents:
            if job_id in trail:  # (a cycle: refused at submission, but never loop on one)
                return None
            begun = start(job_id, trail)
        else:
            begun = starts.get(job_id)
        duration = durations(job_id)
        return None if begun is None or duration is None else begun + duration

    result, notes = {}, {}
    for job_id, after in dependents.items():
        if not after.never:
            at = start(job_id, frozenset())
            if at is not None:
                result[job_id] = at
            else:
                names = ", ".join(f"{name} (#{on})" for on, name, _ in after.waiting)
                notes[job_id] = f"it starts once {names} ended, and when that will be is not known"
    return result, notes


class Holds:
    """Phase 3a's workflow holds over one cycle: the arrays' admissions counted as they happen."""

    def __init__(self, groups: Mapping[int, GroupLimit], budgets: Mapping[str, Budget] | None = None) -> None:
        self.groups = groups
        budgets = budgets or {}
        self.waiting = {name: budget for name, budget in budgets.items() if budget.mode == "wait"}
        self.borrow_only = frozenset(name for name, budget in budgets.items() if budget.mode != "wait")
        self.admitted = {group: limit.admitted for group, limit in groups.items()}
        self.dependents: list[PendingJob] = []  # the jobs held by their dependencies, for the forecast

    def held(self, job: PendingJob) -> Outcome | None:
        after = job.after
        if after is not None:
            self.dependents.append(job)
            if after.never:
                return Reason.DEPENDENCY_NEVER_SATISFIED, {"never": after.never}
            return Reason.WAITING_FOR_DEPENDENCY, {"waits": after.waiting}
        group = job.group
        if group is not None:
            limit = self.groups.get(group)
            if limit is not None and self.admitted[group] >= limit.limit:
                return Reason.ARRAY_CONCURRENCY_LIMIT, {"group": group, "name": limit.name, "limit": limit.limit}
        return None

    def hold_namespaces(self, namespaces: Mapping[str, NamespaceState]) -> None:
        """Namespaces past their budget ("wait") hold every job, as a policy hold of the whole
        namespace: one outcome, no work per job."""
        for name, budget in self.waiting.items():
            namespace = namespaces.get(name)
            if namespace is not None:
                namespace.blocked_by = 0
                namespace.held_back = Reason.OVER_BUDGET, {"used": budget.used_hours, "budget": budget.budget_hours}

    def last(self, passes: list[list[PendingJob]]) -> list[list[PendingJob]]:
        """The admission passes with the jobs of namespaces past their budget ("borrow") moved
        to a last pass of their own: they get what the others leave."""
        if not self.borrow_only:
            return passes
        late = self.borrow_only
        return [[j for j in jobs if j.namespace not in late] for jobs in passes] + [
            [j for jobs in passes for j in jobs if j.namespace in late]
        ]

    def admit(self, job: PendingJob) -> None:
        if job.group in self.admitted:
            self.admitted[job.group] += 1


def forecast_dependents(
    snapshot: Snapshot,
    held: Sequence[PendingJob],
    admitted: Sequence[PendingJob],
    starts: Mapping[int, float],
    expected: Callable[[PendingJob], float | None],
) -> tuple[dict[int, float], dict[int, str]]:
    """``dependent_starts`` for a planned cycle: the ends of the jobs running, starting and
    admitted now, and the queued jobs' forecast starts and expected run times. `held`: the jobs
    phase 3a held for their dependencies (none: nothing is read of the queue)."""
    now = snapshot.now
    dependents = {job.id: job.after for job in held if job.after is not None}
    if not dependents:
        return {}, {}
    ends: dict[int, float | None] = {}
    for running in snapshot.running:
        end = running.likely_end if running.likely_end is not None else running.expected_end
        ends[running.id] = None if end is None else max(end, now)
    queued = {job.id: job for job in snapshot.pending}
    starting: list[InFlightJob | PendingJob] = [*snapshot.in_flight, *admitted]
    for started in starting:
        took = started.expected_duration
        ends[started.id] = None if took is None else now + took

    def duration(job_id: int) -> float | None:
        job = queued.get(job_id)
        return None if job is None else expected(job)

    return dependent_starts(dependents, starts, duration, ends, now)
