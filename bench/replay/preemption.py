"""Preemption in the replay (issue #15, elastic quota), as the dispatcher does it.

On ``plan().preemptions`` each victim is marked: ``RunningJob.preempted_for`` (it is no
longer a candidate, and counts as leaving for its preemptor) and a grace deadline
``grace_s`` later, a time event for the loop.  At the deadline, if the preemptor still
waits, the victim's TFJob is suspended through kubesim's API (``runPolicy.suspend``: the
operator deletes its pods, the quota and the nodes are freed, kubesim's work clock keeps
the work up to the last checkpoint) and the job is queued again with its submission
time (it keeps its place), ``preempted_by`` set and one more preemption counted; its
next release unsuspends the same TFJob, whose run then does only the work not kept.  If
the preemptor was admitted meanwhile, or is gone, the preemption is called off: the
victim keeps running and may be chosen again.
"""

from __future__ import annotations

import dataclasses
import heapq
import time

from queueing import RunningJob
from queueing.preemption import MOVE
from queueing.reasons import Reason

from .mapping import job_name
from .records import QUEUED, RECLAIM_NOTICE, RUNNING, JobRecord


class Preemptions:
    """Mixed into ``engine.Replay``, whose ``__init__`` sets the state these methods keep."""

    def _init_preemptions(self) -> None:
        self.stats.update(
            preemptions_planned=0,
            preemptions=0,
            moves=0,  # of them, moves (defragmentation)
            preemptions_called_off=0,
            preemptions_reassigned=0,
            borrowing_admitted=0,
        )

    def _running_job(self, rec: JobRecord, expected_end: float | None) -> RunningJob:
        """What the snapshot shows of a running job: preemption reads its placements, whether
        it borrows, how often it was preempted and whether it is leaving already."""
        placements = (
            tuple(sorted(("Worker", pod[3], pod[1]) for pod in rec.pods.values() if pod[0] and pod[1]))
            if self.preempts
            else ()
        )
        return RunningJob(
            rec.job.id,
            rec.job.vc,
            rec.workload,
            started_at=rec.run_started_at,
            expected_end=expected_end,
            priority=0,
            borrowing=rec.borrowing,
            placements=placements,
            preemptions=rec.preemptions,
            preempted_for=rec.preempted_for,
            moved_at=rec.moved_at,
            counts={"Worker": rec.gang} if rec.elastic else {},
            # (kubesim keeps the work up to each checkpoint of a run: what the job declares,
            # and the last one it reported: checkpoints.py)
            checkpoint_every_s=self._declared_every(rec),
            checkpointed_at=rec.checkpointed_at if rec.declared_every_s is not None else None,
        )

    def _mark_victims(self, preemptions, now: float) -> None:
        """The plan's preemptions: each victim runs on through its grace period.  A victim
        already leaving (for a job that no longer needs it) changes preemptor, not deadline."""
        for preemption in preemptions:
            rec = self.records.get(preemption.victim)
            running = self.running.get(preemption.victim)
            if rec is None or running is None or rec.state != RUNNING:
                raise AssertionError(f"plan() preempts job {preemption.victim}, which does not run")
            if rec.preempted_for is None:
                self.stats["preemptions_planned"] += 1
                rec.preempt_at = now + self.config.grace_s
            else:
                self.stats["preemptions_reassigned"] += 1
            rec.preempted_for = preemption.preemptor
            rec.preempt_cause = preemption.cause
            self.running[rec.job.id] = dataclasses.replace(running, preempted_for=preemption.preemptor)
            heapq.heappush(self.graces, (rec.preempt_at, rec.job.id, preemption.preemptor))
            if self._checkpointed_now(rec, now):  # (checkpoints.py) saved this instant: it leaves now
                self._leave_at_checkpoint(rec, now)
            self._changed(now)

    def _note_preempting(self, result) -> None:
        """``PendingJob.preempting``: whether the job's reason is Preempting (it waits for
        victims to leave), as the dispatcher reads it from the job's stored reason; the next
        plan lets it go first once the room is there."""
        pending = self.pending
        for job_id, status in result.pending.items():
            flag = status.reason is Reason.PREEMPTING
            job = pending.get(job_id)
            if job is not None and job.preempting is not flag:
                pending[job_id] = dataclasses.replace(job, preempting=flag)

    def _graces(self, now: float) -> None:
        """Victims whose grace period ended: suspended and queued again, or called off."""
        graces = self.graces
        while graces and graces[0][0] <= now:
            _, job_id, preemptor = heapq.heappop(graces)
            rec = self.records.get(job_id)
            if preemptor == RECLAIM_NOTICE:  # (checkpoints.py) told of a reclaim, it has saved its work
                if rec is not None and rec.state == RUNNING:
                    self._leave_before_reclaim(rec, now)
                continue
            if rec is None or rec.state != RUNNING or rec.preempted_for != preemptor:
                continue  # it ended in its grace period
            if preemptor in self.pending:
                began = time.perf_counter()
                self._suspend(rec, now, preemptor)
                self.stats["cluster_s"] += time.perf_counter() - began
            else:  # admitted meanwhile, or gone (failed): the victim keeps running
                self.stats["preemptions_called_off"] += 1
                rec.preempted_for = rec.preempt_at = None
                self.running[job_id] = dataclasses.replace(self.running[job_id], preempted_for=None)
                self._changed(now)

    def _suspend(self, rec: JobRecord, now: float, preemptor: int | None) -> None:
        """``preemptor`` None: a lent pool's reclaim (lending.py)."""
        self.stats["preemptions"] += 1
        self._integrate(now)
        self._ran(rec, now)
        key = (rec.kind.plural, rec.job.vc, job_name(rec.job.id))
        kept, since = self.cluster.work.progress(key)
        assert rec.run_started_at is not None  # (it runs)
        run = now - rec.run_started_at
        # Queued before its pods go, so their deletion is not taken for a partial gang.
        rec.state = QUEUED
        self.busy -= rec.gpus
        self.running.pop(rec.job.id, None)
        rec.run_s += run
        self._set_suspend(rec, True)
        self.cluster.settle()  # the operator deletes the pods: quota and nodes freed
        if rec.elastic:  # (elastic_jobs.py) the work its run kept
            self._fold(rec, now)
            self._extras(rec, now)
        kept_now, _ = self.cluster.work.progress(key)
        if since is not None:
            run = now - since  # (the same instant, as kubesim saw the gang form)
        lost = max(0.0, run - (kept_now - kept))
        rec.lost_s += lost
        if preemptor is None:
            rec.lost_reclaim_s += lost
        elif rec.preempt_cause == MOVE:  # placed again at once, after its preemptor
            rec.lost_move_s += lost
            rec.moved_at = now
            self.stats["moves"] += 1
        rec.preempt_cause = ""
        rec.suspended_at = now
        rec.preemptions += 1
        rec.preempted_by = preemptor
        rec.preempted_for = rec.preempt_at = None
        self.last_progress = now
        self._enqueue(rec, backoff_until=None)
        self._changed(now)
