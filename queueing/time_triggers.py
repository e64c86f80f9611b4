"""When the passing of time alone can change a plan.

A cycle over a world where nothing changed need not plan again, unless the clock crossed
a line the planner draws: a job's backoff ends, a head has waited long enough to reserve
or to hold, a job is promoted for waiting, a lent pool enters its notice, a job's tail no
longer fits before the reclaim.  ``next_trigger`` is the first such moment after
``snapshot.now``.  Until then, a plan that admitted, preempted and resized nothing stays
so (tests/queueing/test_queueing_time_triggers.py checks it on random snapshots): the
order of jobs already submitted does not move with time (ageing adds the same to every
waiting job's priority), and backfill only loses room as time passes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from .policies import namespace_overrides
from .policy import Policy
from .snapshot import Snapshot


def _thresholds(policy: Policy) -> tuple[float, ...]:
    """The waits (seconds since submission) at which the policy treats a job differently."""
    waits = (policy.reservation_after_s, policy.hold_after_s, policy.promote_after_s)
    return tuple(wait for wait in waits if wait is not None and math.isfinite(wait))


def _first_after(now: float, moments: Iterable[float]) -> float:
    return min((moment for moment in moments if moment > now), default=math.inf)


def next_trigger(snapshot: Snapshot, policy: Policy) -> float:
    """The first moment after ``snapshot.now`` at which planning the same snapshot may
    decide differently (inf: never, as far as time goes)."""
    now = snapshot.now
    overrides: Mapping[str, Policy] = namespace_overrides(snapshot.policies, policy)
    thresholds: dict[str, tuple[float, ...]] = {}
    moments: list[float] = []
    for job in snapshot.pending:
        if job.backoff_until is not None:
            moments.append(job.backoff_until)
        moments.append(job.submitted_at)  # (a job stamped in the future: its ageing starts then)
        waits = thresholds.get(job.namespace)
        if waits is None:
            waits = thresholds[job.namespace] = _thresholds(overrides.get(job.namespace, policy))
        moments.extend(job.submitted_at + wait for wait in waits)
    if snapshot.lent:  # (the tails once, whatever the number of pools)
        bounds = {job.bound for job in snapshot.pending if job.bound is not None and math.isfinite(job.bound)}
        for pool in snapshot.lent:
            moments += [pool.reclaim_at - pool.notice_s, pool.reclaim_at]
            moments.extend(pool.reclaim_at - bound for bound in bounds)
    return _first_after(now, moments)
