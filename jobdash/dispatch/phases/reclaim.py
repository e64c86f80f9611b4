"""Lent nodes going back (issue 35): a reclaim is a preemption whose grace period is the
lender's notice (preempt.py's two steps).

At the notice (phase 7, beside preemption's mark): each running job with pods on a pool
whose notice has begun, and which its 90 % bound does not see finished by the reclaim (or
which checkpoints, and was let run past it), is told on its timeline and by a Kubernetes
Event that it is preempted when the pool goes back; at the reclaim, any job still there is
told so and leaves at once. preempt.evict queues them again, keeping their places, and
suspends (or deletes) their objects; nothing on a reclaimed node goes unsaid.
"""

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from jobdash import logs
from jobdash.cluster import gateway as gw
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import State
from queueing.tide import LentPool, clock_words

log = logging.getLogger(__name__)


def extras_on(job: ActiveJob, nodes: frozenset[str]) -> dict[str, int] | None:
    """What an elastic job keeps if it gives back its pods on ``nodes``: its counts without
    them, when they are its highest-numbered pods of each role (the ones its operator removes
    on a scale-down) and it stays at its minimum or above; else None (it leaves whole)."""
    minimum = {ps.role: ps.minimum for ps in job.workload.pod_sets if ps.minimum is not None}
    counts = dict(job.workload.counts)
    there: dict[str, set[int]] = {}
    for role, index, node in job.placement:
        if node in nodes:
            if role not in minimum:
                return None
            there.setdefault(role, set()).add(index)
    keep = dict(counts)
    for role, indexes in there.items():
        keep[role] = counts[role] - len(indexes)
        if indexes != set(range(keep[role], counts[role])) or keep[role] < (minimum[role] or 0):
            return None
    return keep if there else None


Notice = tuple[ActiveJob, LentPool, float, str, dict[str, int] | None]


def notices(pools: Iterable[LentPool], active: Iterable[ActiveJob], now: float) -> list[Notice]:
    """(job, pool, when it leaves, the words, what it keeps if it only shrinks) for each
    running job to be told now. An elastic job whose pods on the pool are all extra gives
    them back and runs on, whatever its bound says."""
    told: list[Notice] = []
    pools = [pool for pool in pools if now >= pool.reclaim_at - pool.notice_s]
    for job in active:
        if job.state != State.RUNNING or job.preempt_at is not None or not job.placement:
            continue
        nodes = {node for _, _, node in job.placement}
        for pool in pools:
            if not nodes & pool.nodes:
                continue
            at = clock_words(pool.reclaim_at, pool.timezone, now)
            p90 = job.predicted_p90_s
            ends = None if job.started_at is None or p90 is None else job.started_at + p90
            keep = extras_on(job, pool.nodes)
            if keep is not None:
                runs = ", ".join(f"{count} {role}" for role, count in sorted(keep.items()))
                note = f"node-pool {pool.name} is reclaimed at {at}: this job gives back its pods there and runs on with {runs}"
                told.append((job, pool, max(now, pool.reclaim_at), note, keep))
            elif now >= pool.reclaim_at:
                note = f"node-pool {pool.name} was reclaimed at {at}: this job is preempted now"
                told.append((job, pool, now, note, None))
            elif ends is None or ends > pool.reclaim_at:
                note = (
                    f"node-pool {pool.name} is reclaimed at {at}; this job is not predicted to finish by then: "
                    "it runs on until then, and is preempted then (checkpoint before)"
                )
                told.append((job, pool, pool.reclaim_at, note, None))
            break
    return told


def mark(
    gateway: gw.ClusterGateway, pools: Iterable[LentPool], active: Iterable[ActiveJob], *, now: float, term: int | None
) -> int:
    marked = 0
    for job, pool, leave_at, note, keep in notices(pools, active, now):
        if not transitions.reclaim_notice(
            job.id, pool.name, leave_at=datetime.fromtimestamp(leave_at, UTC), note=note, term=term, shrink_to=keep
        ):
            continue
        marked += 1
        try:
            gateway.announce(job.key, job.object_uid, "ReclaimNotice", note)
        except gw.GatewayError as error:  # the timeline has it; the Event is a courtesy
            log.warning("reclaim notice event for job %s: %s", job.id, error, extra=logs.job(job.id, job.namespace))
    return marked
