"""The admission cycle: the leader's Dispatcher runs the table of phases (phases/table.py PHASES,
after Kueue's schedule(): numbered phases, each timed; the phase names are the keys of
Cycle.phases and of jobdash_cycle_phase_seconds), then one Cycle row records the cycle
and its phase timings, for the status page.

 0 quiet · 1 snapshot · 2 expect · 3 lost · 4 build · 5 plan · 6 release · 7 preempt
 · 8 statuses · 9 track · 10 replace · 11 sent · 12 pin · 13 publish · 14 mirror · 15 events

What each does, and which run in a quiet cycle or after a failure: phases/table.py (the docs'
table is drawn from it). The driver (Dispatcher._cycle) is the loop over that table.
"""

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

import queueing
from jobdash import logs, metrics
from jobdash.cluster.gateway import ClusterGateway, ObjectKey, PodInfo
from jobdash.dispatch import reconcile as reconcile_pass
from jobdash.dispatch.collector import CollectorPause
from jobdash.dispatch.context import CycleContext, CycleResult
from jobdash.dispatch.failures import FailureWatch
from jobdash.dispatch.phases import table, tracker
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.phases.clusters import ClusterWatch
from jobdash.dispatch.phases.queue_out import QueueOut
from jobdash.dispatch.phases.team_usage import TeamUsage
from jobdash.dispatch.state import cycle_cache, quiet
from jobdash.dispatch.state.clock import Clock, WallClock
from jobdash.dispatch.state.table_stats import TableStatistics
from jobdash.dispatch.state.write_budget import PUBLISH_SHARE
from jobdash.dispatch.writers import pinning
from jobdash.dispatch.writers import release as release_phase
from jobdash.jobs.models import Cycle
from queueing.defrag import DefragRules

__all__ = ["CycleResult", "DispatchSettings", "Dispatcher", "prune_cycles"]

log = logging.getLogger(__name__)
KEEP_CYCLES = 2000
PRUNE_EVERY = 100  # cycles between two prunings of the Cycle table

STATUS_ROWS_PER_INTERVAL = 1000


@dataclass(frozen=True)
class DispatchSettings:
    policy: str
    release_mode: str
    node_fit: bool
    start_timeout_s: float
    max_attempts: int
    backoff_s: float
    concurrency: int
    # Position/ETA-only changes are written at most this often; reasons and new jobs at once.
    status_interval_s: float = 0.0
    # A claim this old without its object is re-sent (every cycle); the whole of reconcile
    # (adopt objects of Queued jobs) runs every `reconcile_every` cycles.
    repair_after_s: float = 3.0
    reconcile_every: int = 5
    preemption_grace_s: float = 60.0
    max_notice_s: float = 600.0  # a victim's own checkpoint-on-notice, at most (issue 48)
    preempt_within_namespace: bool = False
    preemption_limit: int | None = None  # times a job may be preempted before it is no victim any more
    pin: bool = True  # every pod to the node the planner chose (JOBDASH_PLACEMENT=gates)
    topology_levels: tuple[str, ...] = ()  # node labels, the widest first
    mirror_writes: int = 200  # QueuedJob creates, updates and deletes a cycle
    events_per_cycle: int = 200  # Kubernetes Events sent a cycle
    publish_qps: float = 50.0  # ... and both together, a second on average (write_budget)
    publish_burst: int = 100
    publish_share: float = PUBLISH_SHARE  # of the leader's time, at most, for both
    usage_half_life_days: float | None = None  # fair share with memory (JOBDASH_FAIR_HALF_LIFE_DAYS)
    defrag: DefragRules | None = None  # moves that join scattered GPUs (JOBDASH_DEFRAG); None: off

    @classmethod
    def from_django(cls) -> "DispatchSettings":
        return cls(
            policy=settings.JOBDASH_POLICY,
            release_mode=settings.JOBDASH_RELEASE_MODE,
            node_fit=settings.JOBDASH_NODE_FIT,
            start_timeout_s=settings.JOBDASH_START_TIMEOUT_SECONDS,
            max_attempts=settings.JOBDASH_MAX_ATTEMPTS,
            backoff_s=settings.JOBDASH_BACKOFF_SECONDS,
            concurrency=settings.JOBDASH_RELEASE_CONCURRENCY,
            status_interval_s=settings.JOBDASH_STATUS_INTERVAL_SECONDS,
            repair_after_s=max(3.0, 2 * settings.JOBDASH_TICK_SECONDS),
            reconcile_every=settings.JOBDASH_RECONCILE_EVERY_CYCLES,
            preemption_grace_s=settings.JOBDASH_PREEMPTION_GRACE_SECONDS,
            max_notice_s=settings.JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS,
            preempt_within_namespace=settings.JOBDASH_PREEMPT_WITHIN_NAMESPACE,
            preemption_limit=settings.JOBDASH_PREEMPTION_LIMIT,
            pin=settings.JOBDASH_PLACEMENT == "gates",
            topology_levels=settings.JOBDASH_TOPOLOGY_LEVELS,
            mirror_writes=settings.JOBDASH_MIRROR_WRITES_PER_CYCLE,
            events_per_cycle=settings.JOBDASH_EVENTS_PER_CYCLE,
            publish_qps=settings.JOBDASH_PUBLISH_QPS,
            publish_burst=settings.JOBDASH_PUBLISH_BURST,
            usage_half_life_days=settings.JOBDASH_FAIR_HALF_LIFE_DAYS or None,
            defrag=DefragRules(
                limit_gpu_s=settings.JOBDASH_DEFRAG_MAX_LOST_GPU_HOURS * 3600,
                window_s=settings.JOBDASH_DEFRAG_WINDOW_SECONDS,
                max_movers=settings.JOBDASH_DEFRAG_MAX_MOVERS,
            )
            if settings.JOBDASH_DEFRAG
            else None,
        )


class Dispatcher:
    """Everything one leader does, on one gateway. Holds what cycles keep for the next (CycleCache)."""

    def __init__(self, gateway: ClusterGateway, config: DispatchSettings | None = None, clock: Clock | None = None):
        self.gateway = gateway
        self.config = config or DispatchSettings.from_django()
        self.clock = clock or WallClock()
        self.policy = queueing.get_policy(
            self.config.policy,
            preempt_lower_priority=self.config.preempt_within_namespace,
            usage_half_life_days=self.config.usage_half_life_days,
        )
        self.team_usage = TeamUsage(self.config.usage_half_life_days)  # past use, budgets (issue 37)
        self.cache = cycle_cache.CycleCache()
        self.sweep = tracker.Sweep()  # the tracker's memory of objects it need not look at again
        self.pins = pinning.Pins(release_phase.sending_pool(max(1, self.config.concurrency), "pin"))
        self._cycles = 0  # full cycles (the reconcile's count)
        self._recorded = 0  # Cycle rows written (the pruning's count)
        self._all_statuses_at = float("-inf")  # monotonic time of the last complete status write
        self.out = QueueOut(
            qps=self.config.publish_qps,
            burst=self.config.publish_burst,
            share=self.config.publish_share,
            mirror_writes=self.config.mirror_writes,
            events_per_cycle=self.config.events_per_cycle,
        )
        self.quiet = quiet.QuietWatch()  # whether a cycle may skip planning: nothing changed
        self.collector = CollectorPause()
        self.statistics = TableStatistics()
        self.clusters = ClusterWatch.of(gateway)  # with several clusters: their health (phases/clusters.py)
        self.one_cluster_recorded = False  # with one: the clusters recorded by a run with several forgotten
        self.failures = FailureWatch(self.clock)  # its drivers' cycles, told once and recorded (failures.py)

    def complete_round_due(self, queued: int) -> bool:
        """Whether this cycle writes every status and forecasts start times (a complete round)."""
        return time.monotonic() - self._all_statuses_at >= self.status_interval(queued)

    def complete_round_done(self) -> None:
        self._all_statuses_at = time.monotonic()

    def status_interval(self, queued: int) -> float:
        """How often position/ETA-only changes are written: `status_interval_s`, and once
        per that many seconds per STATUS_ROWS_PER_INTERVAL queued jobs beyond. A queue moving
        up shifts every row, so each such write is a statement over the whole queue: the
        rows written per second stay bounded instead of growing with the queue."""
        return self.config.status_interval_s * max(1.0, queued / STATUS_ROWS_PER_INTERVAL)

    @property
    def tracker_settings(self) -> tracker.TrackerSettings:
        c = self.config
        return tracker.TrackerSettings(c.release_mode, c.start_timeout_s, c.max_attempts, c.backoff_s)

    def reconcile(self, term: int) -> dict:
        return reconcile_pass.reconcile(
            self.gateway,
            term=term,
            mode=self.config.release_mode,
            backoff_seconds=self.config.backoff_s,
            concurrency=self.config.concurrency,
            now=self.clock.now(),
            pin=self.config.pin,
        )

    def repair(self, term: int, now: datetime | None = None) -> dict:
        """Continuous repair, not only at leadership start: stranded claims every cycle
        (cheap: the Released rows without an object's uid), the whole reconcile every
        `reconcile_every` cycles."""
        now = now or self.clock.now()
        # (leadership start runs the whole reconcile already: not again on the first cycle)
        if (self._cycles + 1) % max(1, self.config.reconcile_every) == 0:
            return reconcile_pass.reconcile(
                self.gateway,
                term=term,
                mode=self.config.release_mode,
                backoff_seconds=self.config.backoff_s,
                concurrency=self.config.concurrency,
                min_age_s=self.config.repair_after_s,
                settled=self.sweep.settled,
                active=self.sweep.active,
                now=now,
                pin=self.config.pin,
            )
        return reconcile_pass.resend_stranded(
            self.gateway,
            term=term,
            mode=self.config.release_mode,
            backoff_seconds=self.config.backoff_s,
            concurrency=self.config.concurrency,
            min_age_s=self.config.repair_after_s,
            now=now,
            pin=self.config.pin,
        )

    def track(
        self,
        term: int | None = None,
        jobs: list[ActiveJob] | None = None,
        pods: Mapping[ObjectKey, list[PodInfo]] | None = None,
        now: datetime | None = None,
        failed_nodes: frozenset[str] = frozenset(),
    ) -> dict:
        """`jobs`, `pods`: the active jobs and their pods as this cycle's snapshot read them
        (None: read them now); `now`: the cycle's time (None: the clock's)."""
        return tracker.track(
            self.gateway,
            self.tracker_settings,
            self.sweep,
            term=term,
            jobs=jobs,
            pods=pods,
            now=now or self.clock.now(),
            failed_nodes=failed_nodes,
        )

    def cycle(self, term: int) -> CycleResult:
        """One cycle under `term`. No lock: two cycles may run at once (a kick and a tick on
        two workers); the claim refuses the one whose snapshot is stale (StaleSnapshot),
        and the term refuses a deposed leader's (StaleTerm)."""
        with self.collector.paused():
            return self._cycle(term)

    def _cycle(self, term: int) -> CycleResult:
        """The table's phases in order (phases/table.py): a quiet cycle runs only those marked
        quiet; after a phase raised, only those marked finishing, then the error is raised
        (the first, or a finishing phase's with the first as its context, as a `finally`
        would), and no Cycle row is written."""
        logs.bind_term(term)
        ctx = CycleContext(self, term, started=self.clock.now())
        failure: BaseException | None = None
        for phase in table.PHASES:
            if not phase.runs(ctx, failed=failure is not None):
                continue
            try:
                phase.run(ctx)
            except BaseException as error:
                if failure is not None:
                    error.__context__ = failure
                failure = error
                continue
            if phase.timed(ctx):
                ctx.laps.lap(phase.name)
        if failure is not None:
            raise failure
        self._close(ctx)
        return ctx.result

    def _close(self, ctx: CycleContext) -> None:
        """After the phases: a full cycle is remembered (the next may be quiet), and every
        cycle recorded."""
        result = ctx.result
        if ctx.quiet:
            self._record(ctx.term, ctx.started, result, self.policy.name)
            return
        observed, plan = ctx.observed, ctx.plan
        assert ctx.seen is not None  # (phase 0 read it)
        acted = quiet.acted(ctx.tracked, result.released, result.repaired, result.pinned)
        self.quiet.remember(
            ctx.seen,
            snapshot=observed.snapshot,
            plan=plan,
            policy=self.policy,
            active=observed.active,
            acted=acted or bool(ctx.replaced.placements),
        )
        self._cycles += 1
        self._record(ctx.term, ctx.started, result, plan.policy)
        if result.admitted:
            log.info(
                "cycle: %d pending, %d admitted, %s; %s",
                result.pending,
                result.admitted,
                result.released,
                result.phases,
            )

    def _record(self, term: int, started: datetime, result: CycleResult, policy: str) -> None:
        """One Cycle row (the status page's), the phase metrics, and now and then the pruning."""
        metrics.observe_cycle(result.phases)
        Cycle.objects.create(
            started_at=started,
            duration_ms=sum(result.phases.values()),
            term=term,
            policy=policy,
            pending=result.pending,
            admitted=result.admitted,
            released=result.released.get("created", 0),
            phases=result.phases,
        )
        self._recorded += 1
        if self._recorded % PRUNE_EVERY == 0:
            prune_cycles()
        self.statistics.refresh()


def prune_cycles(keep: int | None = None) -> int:
    """Cycles are telemetry, not history: keep the most recent ones (KEEP_CYCLES)."""
    keep = KEEP_CYCLES if keep is None else keep
    boundary = list(Cycle.objects.order_by("-started_at").values_list("started_at", flat=True)[keep : keep + 1])
    if not boundary:
        return 0
    return Cycle.objects.filter(started_at__lte=boundary[0]).delete()[0]
