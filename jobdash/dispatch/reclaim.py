"""Lent nodes going back (issue 35): a reclaim is a preemption whose grace period is the
lender's notice (preempt.py's two steps).

At the notice (phase 4, beside preemption's mark): each running job with pods on a pool
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
from jobdash.jobs.models import State
from queueing.tide import LentPool, clock_words

from . import transitions
from .active import ActiveJob

log = logging.getLogger(__name__)


def notices(
    pools: Iterable[LentPool], active: Iterable[ActiveJob], now: float
) -> list[tuple[ActiveJob, LentPool, float, str]]:
    """(job, pool, when it leaves, the words) for each running job to be told now."""
    told = []
    pools = [pool for pool in pools if now >= pool.reclaim_at - pool.notice_s]
    for job in active:
        if job.state != State.RUNNING or job.preempt_at is not None or not job.placement:
            continue
        nodes = {node for _, _, node in job.placement}
        for pool in pools:
            if not nodes & pool.nodes:
                continue
            at = clock_words(pool.reclaim_at, pool.timezone, now)
            ends = (
                None if job.started_at is None or job.predicted_p90_s is None else job.started_at + job.predicted_p90_s
            )
            if now >= pool.reclaim_at:
                told.append((job, pool, now, f"node-pool {pool.name} was reclaimed at {at}: this job is preempted now"))
            elif ends is None or ends > pool.reclaim_at:
                told.append(
                    (
                        job,
                        pool,
                        pool.reclaim_at,
                        f"node-pool {pool.name} is reclaimed at {at}; this job is not predicted to finish by "
                        "then: it runs on until then, and is preempted then (checkpoint before)",
                    )
                )
            break
    return told


def mark(
    gateway: gw.ClusterGateway, pools: Iterable[LentPool], active: Iterable[ActiveJob], *, now: float, term: int | None
) -> int:
    marked = 0
    for job, pool, leave_at, note in notices(pools, active, now):
        if not transitions.reclaim_notice(
            job.id, pool.name, leave_at=datetime.fromtimestamp(leave_at, UTC), note=note, term=term
        ):
            continue
        marked += 1
        try:
            gateway.announce(job.key, job.object_uid, "ReclaimNotice", note)
        except gw.GatewayError as error:  # the timeline has it; the Event is a courtesy
            log.warning("reclaim notice event for job %s: %s", job.id, error, extra=logs.job(job.id, job.namespace))
    return marked
