"""Cycles that cost what changed: a cycle over a world where nothing moved plans nothing.

A plan is a function of the queue, the namespaces, the cluster and the clock. After a
cycle whose plan started, preempted and resized nothing, with nothing in flight, the next
cycle would decide the same unless one of those changed. QuietWatch tells which:
- the job rows: none written since the last read, but the leader's own status writes
  (cycle_cache.queue_unchanged, one light query);
- the namespaces and the lent pools as the database holds them (one query of versions);
- the cluster: the watch cache's revision (quotas, nodes, pods, job objects; an event that
  changes nothing the cache keeps is no change);
- the term;
- the clock: the planner's own next trigger (queueing.next_trigger: a backoff ends, a
  head has waited long enough...), the dispatcher's deadlines (a start-by deadline, a
  maximum run time, a job of pods whose pods never came), and REPLAN_EVERY_S, which also
  bounds what nothing above follows (fair share's memory, budgets, a workflow's limit).
A quiet cycle skips phases 1 to 13; the mirror and the events run only while they have
something left to write.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection

from jobdash.cluster.gateway import ClusterGateway
from jobdash.dispatch.phases import pod_groups
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.state import cycle_cache
from jobdash.jobs.models import Job, LentPool, Namespace, State
from queueing import Plan, Policy, Snapshot, next_trigger
from queueing.job_options import JobOptions

REPLAN_EVERY_S = 120.0  # (the start ranges of a queue where nothing moves, refreshed this often)


def _tables_version() -> str:
    """The versions of every namespace and lent pool row, as one digest."""
    parts = []
    for model in (Namespace, LentPool):
        table = connection.ops.quote_name(model._meta.db_table)
        parts.append(f"(SELECT md5(coalesce(string_agg(xmin::text || ctid::text, ',' ORDER BY id), '')) FROM {table})")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {' || '.join(parts)}")
        return cursor.fetchone()[0]


@dataclass(frozen=True)
class Seen:
    """What a cycle read before its snapshot: equal in the next cycle, nothing outside moved."""

    term: int
    cluster: int
    tables: str


def acted(tracked: dict[str, int], *others: dict) -> bool:
    """Whether the tracker moved anything on (every outcome but "running", a job followed
    and left as it was), or the other phases' counts say they did something."""
    return any(count for outcome, count in tracked.items() if outcome != "running") or any(
        count for counts in others for count in counts.values()
    )


def _deadlines(snapshot: Snapshot, active: Iterable[ActiveJob]) -> list[float]:
    """The dispatcher's own moments: a running job's maximum run time, a job of pods whose
    pods never came, the first start-by deadline of a queued job."""
    moments = []
    for job in active:
        limit = JobOptions.max_run_of(job.options)
        if limit is not None and job.started_at is not None:
            moments.append(job.started_at + limit)
    moments += [job.submitted_at + pod_groups.NEVER_CREATED_S for job in snapshot.pending if job.pods_created == 0]
    first = Job.objects.filter(state=State.QUEUED, start_by__isnull=False).order_by("start_by").first()
    if first is not None and first.start_by is not None:
        moments.append(first.start_by.timestamp())
    return moments


class QuietWatch:
    """Kept by the Dispatcher: what the last full cycle saw, and until when it holds."""

    def __init__(self) -> None:
        self.seen: Seen | None = None
        self.until = -math.inf  # epoch seconds
        self.pending = 0  # the queue's length then

    def look(self, gateway: ClusterGateway, term: int) -> Seen:
        """Read at a cycle's start, before anything else: what changes after it is the next cycle's."""
        return Seen(term, gateway.revision(), _tables_version())

    def quiet(self, now: float, seen: Seen, cache: cycle_cache.CycleCache) -> bool:
        """Whether this cycle may skip planning (the job rows are read last: the cheapest
        checks first, and the horizon moves only when everything else held)."""
        return self.seen == seen and now < self.until and cycle_cache.queue_unchanged(cache)

    def forget(self) -> None:
        """A full cycle begins: until it ends and remembers, no cycle is quiet (one that fails
        half way may have read a change, moving the horizon past it, and planned nothing)."""
        self.seen, self.until = None, -math.inf

    def remember(
        self,
        seen: Seen,
        *,
        snapshot: Snapshot,
        plan: Plan,
        policy: Policy,
        active: list[ActiveJob],
        acted: bool,
    ) -> None:
        """After a full cycle: the next may be quiet if this one's plan did nothing, nothing
        is on its way (in flight, leaving, being replaced) and the cycle itself `acted` on
        nothing (no job moved on, nothing repaired)."""
        self.pending = len(snapshot.pending)
        busy = (
            acted
            or plan.admissions
            or plan.preemptions
            or plan.resizes
            or snapshot.in_flight
            or snapshot.replacements
            or any(job.preempted_for is not None or job.shrink_to for job in active)
        )
        if busy:
            self.seen, self.until = None, -math.inf
            return
        moments = [snapshot.now + REPLAN_EVERY_S, next_trigger(snapshot, policy), *_deadlines(snapshot, active)]
        self.seen = seen
        self.until = min(moment for moment in moments if moment > snapshot.now)
