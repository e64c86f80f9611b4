"""Jobs that checkpoint and jobs that never do (issue 48, ``ReplayConfig.checkpointing``).

A share of the trace's jobs, the same in every replay of a window (the hash elastic jobs are
picked by: elastic_jobs.picked), checkpoints every ``checkpoint_every_s`` of its run: its
object carries ``kubesim.io/checkpoint-seconds`` explicitly, so kubesim keeps its work up to
each checkpoint and, as a real training job would, annotates the object with
``jobdash.io/checkpointed-at`` at each one (kubesim/controllers.py, the work clock).  Every
other job carries ``"0"``: a stop loses its whole run.  Without ``checkpointing`` nothing is
set and every job keeps its work at kubesim's default interval, reporting nothing (as before).

Declared (the default): the checkpointing jobs tell the planner their interval
(``RunningJob.checkpoint_every_s``, and ``jobdash.io/checkpoint-every`` with
``jobdash.io/checkpoints: "true"`` on their workload, so ``PendingJob.checkpoints`` lets them
onto lent nodes whatever their bound), and ``RunningJob.checkpointed_at`` is the last
annotation read from the object, as the dispatcher's watch cache reads it
(dispatch/phases/checkpoint_reports.py).  A job told to leave (a victim in its grace period,
or a job on a lent pool told of its reclaim at the notice) that writes a checkpoint meanwhile
leaves at that moment (jobs/checkpoints.py ``_leave_now``), not at the end of its notice.
``checkpoint_blind``: the same jobs checkpoint the same way, and the planner is told
nothing: notices last their whole time, as before.

A checkpoint's annotation changes nothing the planner would decide otherwise (the declared
interval already says when the run was last saved: queueing/lost_work.py), so it does not
count as a change that makes a cycle due; what it starts (a victim leaving) does.
"""

from __future__ import annotations

import dataclasses
import heapq

from queueing.checkpoint_options import CHECKPOINTED_AT, checkpointed_at

from .elastic_jobs import picked
from .mapping import checkpoint_seconds
from .records import RECLAIM_NOTICE, RUNNING, JobRecord
from .trace import TraceJob


class Checkpoints:
    """Mixed into ``engine.Replay``; ``_init_checkpoints`` sets its state."""

    def _init_checkpoints(self) -> None:
        config = self.config
        # Jobs on a lent pool told at its notice that they are preempted at its reclaim -> the reclaim.
        self.told_reclaim: dict[int, float] = {}
        self.stats.update(
            checkpointing_share=config.checkpointing,
            checkpoint_every_s=config.checkpoint_every_s if config.checkpointing else None,
            checkpoint_blind=config.checkpoint_blind,
            checkpointing_jobs=0,
            checkpoints_seen=0,  # jobdash.io/checkpointed-at values read (new ones)
            preemption_notices_ended=0,  # victims whose grace ended at a checkpoint
            reclaim_left_at_checkpoint=0,  # runs on a lent pool that left at a checkpoint in its notice
            reclaim_left_gpu_s=0.0,  # GPU-seconds those runs had run (none of it lost)
        )

    def _checkpoints_of(self, job: TraceJob) -> tuple[float | None, float | None]:
        """(the interval set on its object for kubesim, the one told to the planner)."""
        config = self.config
        if not config.checkpointing:
            return None, None
        if not picked(job.id, config.checkpointing):
            return 0.0, None
        self.stats["checkpointing_jobs"] += 1
        every = config.checkpoint_every_s
        return every, None if config.checkpoint_blind else every

    def _object_annotations(self, rec: JobRecord) -> dict[str, str] | None:
        """What its object says to kubesim about its checkpoints (None: nothing, the default)."""
        return None if rec.checkpoint_s is None else checkpoint_seconds(rec.checkpoint_s)

    def _declared_every(self, rec: JobRecord) -> float | None:
        """The interval the running job declares to the planner."""
        if self.config.checkpoints_declared:  # (--declare-checkpoints: every job, kubesim's default)
            return self.config.checkpoint_s
        return rec.declared_every_s

    def _checkpoint_event(self, rec: JobRecord, obj: dict, now: float) -> bool:
        """A modified object of a job that checkpoints: whether it is a checkpoint's report (a
        later jobdash.io/checkpointed-at than the last one read), recorded and acted on here."""
        value = (obj["metadata"].get("annotations") or {}).get(CHECKPOINTED_AT)
        if value is None:
            return False
        try:
            at = checkpointed_at(value)
        except ValueError:
            return False
        if rec.checkpointed_at is not None and at <= rec.checkpointed_at:
            return False
        rec.checkpointed_at = at
        rec.checkpoint_seen = now
        self.stats["checkpoints_seen"] += 1
        if rec.declared_every_s is None or rec.state != RUNNING:
            return True
        running = self.running.get(rec.job.id)
        if running is not None:
            self.running[rec.job.id] = dataclasses.replace(running, checkpointed_at=at)
        self._leave_at_checkpoint(rec, now)
        return True

    def _leave_at_checkpoint(self, rec: JobRecord, now: float) -> None:
        """A job told to leave that has written its checkpoint leaves now (the loop's grace
        events: preemption.py ``_graces``), as the dispatcher ends its notice."""
        job_id = rec.job.id
        if rec.preempted_for is not None:
            if rec.preempt_at is not None and rec.preempt_at > now:
                rec.preempt_at = now
                self.stats["preemption_notices_ended"] += 1
                heapq.heappush(self.graces, (now, job_id, rec.preempted_for))
        elif self.told_reclaim.get(job_id, now) > now:
            heapq.heappush(self.graces, (now, job_id, RECLAIM_NOTICE))

    def _checkpointed_now(self, rec: JobRecord, now: float) -> bool:
        """Told to leave at the very instant it wrote a checkpoint (read in the same pass): it
        leaves at once, as the dispatcher records reports after its notices."""
        return rec.declared_every_s is not None and rec.checkpoint_seen == now
