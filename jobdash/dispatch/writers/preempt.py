"""Preemption, in two steps a grace period apart (queueing/preemption.py decides who).

1. mark (phase 7 of a cycle, after the releases): each victim is told, on its timeline and
   by a Kubernetes Event on its object (so the job can checkpoint), that it leaves at the
   end of its notice to make room for its preemptor; the preemptor's timeline names it.
   The notice is its own `jobdash.io/checkpoint-on-notice` (at most
   JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS), else the grace period. It keeps running
   meanwhile, and the planner counts it as leaving; a checkpoint it reports meanwhile ends
   the notice there (jobs.checkpoints.record_checkpoint), so its preemptor starts then.
2. evict (the tracker's pass): a victim whose grace period is over is queued again, keeping
   its place, and its object suspended (or deleted, for a kind without suspend) -- a job
   moved by defragmentation (cause move) alike, and the plan that moved it places it again
   on other nodes once its preemptor has started; the work
   it did up to its last checkpoint is kept by the job itself; what it did since is counted
   as lost (usage.LostWork), in the same transaction. If its preemptor no longer
   waits (it started, was cancelled, or finished), the preemption is called off.
Both are fenced by the leader's term like every other change.
"""

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.utils import timezone

from jobdash import logs, metrics
from jobdash.cluster import gateway as gw
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.state.cycle_cache import as_datetime
from jobdash.dispatch.writers import holding, transitions
from jobdash.jobs.models import Job, LostWork, State
from jobdash.jobs.words import preemption_words, redone_words
from jobdash.usage import lost_work
from queueing.lost_work import notice_s
from queueing.preemption import MOVE, Preemption

log = logging.getLogger(__name__)


def mark(
    gateway: gw.ClusterGateway,
    preemptions: Iterable[Preemption],
    *,
    active: Iterable[ActiveJob],
    waiting: Mapping[int, tuple[str, str]],
    grace_s: float,
    max_notice_s: float = 600.0,
    term: int | None,
    now: datetime | None = None,
) -> int:
    """`active`: the running jobs among which the victims are (the cycle's snapshot);
    `waiting`: the (namespace, name) of the waiting jobs, among which the preemptors are;
    `max_notice_s`: the most a victim's own checkpoint-on-notice gives it."""
    preemptions = list(preemptions)
    if not preemptions:
        return 0
    victims = {job.id: job for job in active}
    now = now or timezone.now()
    marked = 0
    for preemption in preemptions:
        victim, preemptor = victims.get(preemption.victim), waiting.get(preemption.preemptor)
        if victim is None or preemptor is None or preemption.shrink_to:  # (a shrink: resize.mark)
            continue
        notice = notice_s(victim.checkpoint_on_notice_s, grace_s, max_notice_s)
        leave_at = now + timedelta(seconds=notice)
        when = as_datetime(victim.preempt_at) or leave_at
        note, preemptor_note = preemption_words(
            preemption, victim.namespace, victim.name, *preemptor, when, victim.checkpoint_on_notice_s is not None
        )
        if not transitions.preempting(
            preemption.victim,
            preemption.preemptor,
            leave_at=leave_at,
            note=note,
            preemptor_note=preemptor_note,
            term=term,
            cause=preemption.cause,
        ):
            continue
        marked += 1
        metrics.count_preemption(victim.namespace)
        try:
            gateway.announce(victim.key, victim.object_uid, "Preempting", note)
        except gw.GatewayError as error:  # the timeline has it; the Event is a courtesy
            log.warning(
                "preemption event for job %s: %s",
                preemption.victim,
                error,
                extra=logs.job(preemption.victim, victim.namespace),
            )
    return marked


def evict(gateway: gw.ClusterGateway, *, term: int | None, now: datetime | None = None) -> dict[str, int]:
    """Victims whose grace period is over (at `now`): queued again and their objects suspended."""
    now = now or timezone.now()
    counts = {"preempted": 0, "called-off": 0}
    # (an elastic job giving back its extra pods is no whole victim: resize.apply scales it down)
    due = Job.objects.filter(state=State.RUNNING, preempt_at__lte=now, shrink_to__isnull=True).values(
        *lost_work.JOB_FIELDS,
        "name",
        "kind_key",
        "preempted_for_id",
        "preempted_for__state",
        "reclaimed_by",
        "preempt_cause",
    )
    for row in due:
        preemptor = row["preempted_for_id"]
        key = (row["kind_key"], row["namespace__name"], row["name"])
        if row["reclaimed_by"]:  # its lent nodes went back: nobody to call it off for
            lost = lost_work.stopped(row, lost_work.Cause.RECLAIM, now)
            note = f"node-pool {row['reclaimed_by']} was reclaimed: queued again in its place; {_redone(lost)}"
            if transitions.preempted(row["id"], None, note, term, now, event="Reclaimed", lost=lost):
                _take_back(gateway, key, row["id"], term)
                counts["reclaimed"] = counts.get("reclaimed", 0) + 1
            continue
        if preemptor is None or row["preempted_for__state"] != State.QUEUED:
            note = f"preemption called off: job {preemptor} no longer waits for the room"
            counts["called-off"] += transitions.preemption_called_off(row["id"], note, term)
            continue
        if row["preempt_cause"] == MOVE:  # placed again at once, on other nodes, after its preemptor
            lost = lost_work.stopped(row, lost_work.Cause.MOVE, now)
            note = f"moved to make room for job {preemptor}: queued again to start on other nodes; {_redone(lost)}"
            if transitions.preempted(row["id"], preemptor, note, term, now, event="Moved", lost=lost, moved=True):
                _take_back(gateway, key, row["id"], term)
                counts["moved"] = counts.get("moved", 0) + 1
            continue
        lost = lost_work.stopped(row, lost_work.Cause.PREEMPTION, now)
        note = f"preempted to make room for job {preemptor}; queued again in its place; {_redone(lost)}"
        if not transitions.preempted(row["id"], preemptor, note, term, now, lost=lost):
            continue
        _take_back(gateway, key, row["id"], term)
        counts["preempted"] += 1
    return counts


def _redone(lost: LostWork) -> str:
    return redone_words(lost.seconds, lost.gpu_s, lost.checkpointed_at)


def _take_back(gateway: gw.ClusterGateway, key: gw.ObjectKey, job_id: int, term: int | None) -> None:
    try:
        holding.evicted(gateway, key, term)
    except gw.GatewayError as error:
        # Queued, its object still running: reconcile adopts it back as Released.
        log.warning("suspending preempted job %s: %s", job_id, error, extra=logs.job(job_id, key[1]))
