"""A Celery beat scheduler that emits only while this replica is the elected leader.

Every beat replica runs the election; standbys tick but emit nothing. The leader records
its term (the fencing token) before its first emission, sends a reconcile pass, and puts
its term into every admission_cycle it emits, so a deposed leader's late tasks are refused
by the release compare-and-set."""

import logging
from datetime import timedelta

from celery.beat import Scheduler
from celery.schedules import crontab
from django.conf import settings
from django.db import close_old_connections

from jobdash import logs, metrics
from jobdash.dispatch.writers import transitions
from jobdash.leader import LeaderLoop
from jobdash.leader.factory import elector_from_settings, renew_every

log = logging.getLogger(__name__)
CYCLE_ENTRY = "jobdash-admission-cycle"
RETENTION_ENTRY = "jobdash-retention-sweep"
# The usage fold (jobdash/usage/tasks.py), named by its task name.
FOLD_ENTRY, FOLD_EVERY_SECONDS = "jobdash-usage-fold", 60.0


class LeaderGatedScheduler(Scheduler):
    def __init__(self, *args, **kwargs):
        self.leader: LeaderLoop | None = None
        super().__init__(*args, **kwargs)

    def _campaign(self) -> LeaderLoop:
        # Started on the first tick, not in __init__: celery also builds a scheduler
        # just to print its banner, and that one must not take part in the election.
        if self.leader is None:
            metrics.serve()  # JOBDASH_METRICS_PORT (0: off): this replica's jobdash_leader
            self.leader = LeaderLoop(
                elector_from_settings(),
                on_elected=self._elected,
                on_lost=lambda: log.warning("beat: leadership lost; emitting nothing"),
                renew_every=renew_every(),
                retry_every=1.0,
            )
            self.leader.start()
        return self.leader

    def setup_schedule(self) -> None:
        super().setup_schedule()
        entries = {
            CYCLE_ENTRY: {
                "task": "jobdash.admission_cycle",
                "schedule": timedelta(seconds=settings.JOBDASH_TICK_SECONDS),
            },
            FOLD_ENTRY: {"task": "jobdash.usage_fold", "schedule": timedelta(seconds=FOLD_EVERY_SECONDS)},
        }
        if settings.JOBDASH_RETENTION_DAYS:
            # Daily at a quiet hour (UTC); the sweep's batches keep it from blocking anything anyway.
            entries[RETENTION_ENTRY] = {"task": "jobdash.retention_sweep", "schedule": crontab(minute=17, hour=3)}
        # (one merge: merge_inplace drops the entries the dict it is given lacks)
        self.merge_inplace(entries)

    def _elected(self, leadership) -> None:
        try:
            transitions.take_term(leadership.term, leadership.identity)
            self.app.send_task("jobdash.reconcile", kwargs={"term": leadership.term})
            log.warning("beat: elected leader %s with term %s", leadership.identity, leadership.term)
        finally:
            close_old_connections()

    def tick(self, *args, **kwargs):
        if not self._campaign().is_leader():
            return min(self.max_interval, 1.0)
        return super().tick(*args, **kwargs)

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        leadership = self.leader.leadership if self.leader else None
        if leadership is None:
            return None
        entry.kwargs = {**(entry.kwargs or {}), "term": leadership.term}
        logs.bind_term(leadership.term)
        log.info("beat: emit %s term=%s", entry.task, leadership.term)
        return super().apply_async(entry, producer=producer, advance=advance, **kwargs)

    def close(self) -> None:
        if self.leader is not None:
            self.leader.stop()
        super().close()
