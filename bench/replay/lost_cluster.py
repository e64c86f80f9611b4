"""A cluster lost for a while in the replay (issue 49, part 6: ``--lose-cluster``).

``--lose-cluster c1 --lose-at T --lose-for S`` (with ``--clusters N``): T seconds after the
replay's start (simulated seconds, from ``--from``; with ``--compress K`` they are replay
seconds, not trace seconds) cluster c1's API server falls silent for S seconds.  The
dispatcher's rules (docs/architecture.md, "Many clusters, one queue"), replayed:

- Silent ``LOST_AFTER_S`` (60 s), the cluster is Lost: the plan is told
  ``Cluster("c1", lost=True)`` (nothing new is admitted there), and its running jobs are
  no victims (``RunningJob.preemptible`` False: nothing can be written there).  Its jobs
  keep running behind the partition until they end.
- Lost ``REPLAN_RELEASED_S`` (300 s) more: its released jobs that never ran (state
  RELEASED, still in flight) are taken back and queued again at once, no attempt counted
  (``jobs_replanned_released``).  With pinned placement a release starts within seconds and
  nothing new goes to a lost cluster, so this is almost always 0.
- Lost ``REPLAN_RUNNING_S`` (1800 s) more: its running jobs that checkpoint (the
  ``--checkpointing`` share's; ``--declare-checkpoints`` makes every job one) are queued
  again with their submission time, as a preempted job is (they keep their place), and may
  start elsewhere from their last checkpoint: the work since it is lost (``rec.lost_s``, cause
  ``cluster``: ``lost_gpu_hours_by_cause["cluster"]``).  Their copy keeps running in the lost
  cluster, until it ends or the cluster returns.  Jobs that do not checkpoint wait where they
  are (``jobs_waited``: those running there at that moment).
- Answering again after S seconds: every copy left there is deleted at once, before the
  cycle of that instant admits anything there; the GPU-seconds each copy ran behind the
  partition after its job was planned again are ``ran_twice_gpu_hours`` (its jobs:
  ``ran_twice_behind_partition``).

How it is modelled.  kubesim is one cluster with one API, and a job one object: the replay
cannot run two copies of it.  So at the running timeout the job is suspended in kubesim (its
pods go: its nodes in the lost cluster free, which no plan may use while it is lost), and its
copy is bookkeeping: it would have run to ``min(its own end, the return)``, counted as ran
twice, not in the utilisation.  The replay learns of the ends of jobs in the lost cluster as
they happen (the dispatcher learns them when it answers again): the quota they free is used
a little sooner than it would be.

Checked: no job runs twice while the lost cluster answers
(``jobs_running_twice_while_both_answered``, every cycle and every lost-cluster event;
the replay raises ``AssertionError`` if it is ever not 0).
"""

from __future__ import annotations

import dataclasses
import heapq

from queueing import RunningJob
from queueing.clusters import Cluster

from .mapping import job_name
from .records import INF, QUEUED, RELEASED, RUNNING, JobRecord

LOST_AFTER_S = 60.0  # JOBDASH_CLUSTER_LOST_AFTER_SECONDS
REPLAN_RELEASED_S = 300.0  # JOBDASH_CLUSTER_REPLAN_RELEASED_SECONDS
REPLAN_RUNNING_S = 1800.0  # JOBDASH_CLUSTER_REPLAN_RUNNING_SECONDS

# The events, in the order they happen at one instant.
_RETURN, _LOST, _RELEASED, _RUNNING = range(4)


class LostCluster:
    """Mixed into ``engine.Replay`` first (it extends the loop's time events, the running
    jobs the plan sees and the cycle's check)."""

    def _init_lost_cluster(self) -> None:
        config = self.config
        self.lost_name = config.lose_cluster
        self.lost_now = False
        self.lost_events: list[tuple[float, int]] = []
        # Copies left running behind the partition: job id -> (GPUs, planned again at, the copy's end).
        self.copies: dict[int, tuple[int, float, float]] = {}
        if not self.lost_name:
            return
        if self.lost_name not in self.cluster_names:
            raise ValueError(f"--lose-cluster {self.lost_name}: not one of {', '.join(self.cluster_names)}")
        silent = self.start + config.lose_at_s
        back = silent + config.lose_for_s
        self.lost_back = back
        for kind, at in (
            (_LOST, silent + LOST_AFTER_S),
            (_RELEASED, silent + LOST_AFTER_S + REPLAN_RELEASED_S),
            (_RUNNING, silent + LOST_AFTER_S + REPLAN_RUNNING_S),
        ):
            if at < back:  # (answering again first: the later rules never apply)
                heapq.heappush(self.lost_events, (at, kind))
        heapq.heappush(self.lost_events, (back, _RETURN))
        self.stats["lost_cluster"] = {
            "cluster": self.lost_name,
            "at": config.lose_at_s,
            "seconds": config.lose_for_s,
            "jobs_replanned_released": 0,
            "jobs_replanned_running": 0,
            "jobs_waited": 0,
            "lost_gpu_hours": 0.0,
            "ran_twice_behind_partition": 0,
            "ran_twice_gpu_hours": 0.0,
            "jobs_running_twice_while_both_answered": 0,
        }
        self.lost_gpu_s = self.twice_gpu_s = 0.0

    # -- the loop's time events ------------------------------------------------------------------

    def _next_tide(self) -> float:
        own = self.lost_events[0][0] if self.lost_events else INF
        return min(own, super()._next_tide())  # type: ignore[misc]

    def _tide(self, now: float) -> None:
        events = self.lost_events
        while events and events[0][0] <= now:
            _, kind = heapq.heappop(events)
            if kind == _LOST:
                self._set_lost(True, now)
            elif kind == _RELEASED:
                self._replan_released(now)
            elif kind == _RUNNING:
                self._replan_running(now)
            else:
                self._answers_again(now)
            self._check_twice(now)
            self._changed(now)
        if super()._next_tide() <= now:  # type: ignore[misc]
            super()._tide(now)  # type: ignore[misc]

    def _cycle(self, now: float) -> None:
        self._check_twice(now)
        super()._cycle(now)  # type: ignore[misc]

    def _end_lost_cluster(self, end: float) -> None:
        """The replay ends (engine._run): copies of a cluster still lost counted to the end."""
        if self.copies:
            self._answers_again(min(self.lost_back, end))

    # -- the rules -------------------------------------------------------------------------------

    def _set_lost(self, lost: bool, now: float) -> None:
        """What the plan is told of the cluster, and whether its running jobs may be victims."""
        self.lost_now = lost
        self.plan_clusters = tuple(Cluster(name, lost=lost and name == self.lost_name) for name in self.cluster_names)
        for job_id, running in list(self.running.items()):
            if self.records[job_id].cluster == self.lost_name:
                self.running[job_id] = dataclasses.replace(running, preemptible=not lost)

    def _running_job(self, rec: JobRecord, expected_end: float | None) -> RunningJob:
        job = super()._running_job(rec, expected_end)  # type: ignore[misc]
        if self.lost_now and rec.cluster == self.lost_name:
            return dataclasses.replace(job, preemptible=False)
        return job

    def _replan_released(self, now: float) -> None:
        """Released there and never run: queued again at once (ClusterLost), no attempt counted."""
        for rec in list(self.inflight.values()):
            if rec.state == RELEASED and rec.cluster == self.lost_name:
                self.stats["lost_cluster"]["jobs_replanned_released"] += 1
                self._take_back(rec, now, count_attempt=False)

    def _replan_running(self, now: float) -> None:
        """Running there: those that checkpoint are queued again, their copy left running."""
        found = self.stats["lost_cluster"]
        for job_id in list(self.running):
            rec = self.records[job_id]
            if rec.cluster != self.lost_name or rec.state != RUNNING:
                continue
            if rec.declared_every_s is None and not self.config.checkpoints_declared:
                found["jobs_waited"] += 1
                continue
            found["jobs_replanned_running"] += 1
            self._requeue_from_lost(rec, now)

    def _requeue_from_lost(self, rec: JobRecord, now: float) -> None:
        """As preemption.py's ``_suspend``, cause ``cluster``: the run ends here for the
        replay (its GPU-seconds to the lost cluster), the work since its last checkpoint lost;
        queued again with its submission time.  Its copy's end: now + the work still to do."""
        self._integrate(now)
        self._ran(rec, now)
        key = (rec.kind.plural, rec.job.vc, job_name(rec.job.id))
        kept, since = self.cluster.work.progress(key)
        assert rec.run_started_at is not None  # (it runs)
        run = now - rec.run_started_at
        done = kept + (now - since if since is not None else run)
        self.copies[rec.job.id] = (rec.gpus, now, now + max(0.0, rec.job.duration - done))
        rec.state = QUEUED
        self.busy -= rec.gpus
        self.running.pop(rec.job.id, None)
        rec.run_s += run
        if rec.preempted_for is not None:  # (a victim in its grace: nothing can be written there)
            rec.preempted_for = rec.preempt_at = None
        self._set_suspend(rec, True)
        self.cluster.settle()
        kept_now, _ = self.cluster.work.progress(key)
        if since is not None:
            run = now - since
        lost = max(0.0, run - (kept_now - kept))
        rec.lost_s += lost
        rec.lost_cluster_s += lost
        self.lost_gpu_s += rec.gpus * lost
        self.stats["lost_cluster"]["lost_gpu_hours"] = round(self.lost_gpu_s / 3600, 2)
        rec.suspended_at = now
        rec.preempted_by = None
        self.last_progress = now
        self._enqueue(rec, backoff_until=None)

    def _answers_again(self, now: float) -> None:
        """Every copy left there deleted at once (what it ran since counted twice), then the
        cluster offered to the plan again."""
        found = self.stats["lost_cluster"]
        for gpus, replanned, end in self.copies.values():
            found["ran_twice_behind_partition"] += 1
            self.twice_gpu_s += gpus * max(0.0, min(end, now) - replanned)
        self.copies.clear()
        found["ran_twice_gpu_hours"] = round(self.twice_gpu_s / 3600, 2)
        self._set_lost(False, now)

    def _check_twice(self, now: float) -> None:
        """No job runs twice while the lost cluster answers: a copy alive there (not yet
        deleted, not ended) of a job started again elsewhere."""
        if self.lost_now or not self.copies:
            return
        twice = [
            job_id
            for job_id, (_, _, end) in self.copies.items()
            if end > now and job_id in self.records and self.records[job_id].state in (RELEASED, RUNNING)
        ]
        if twice:
            self.stats["lost_cluster"]["jobs_running_twice_while_both_answered"] += len(twice)
            raise AssertionError(f"jobs {twice} run twice at {now} while cluster {self.lost_name} answers")
