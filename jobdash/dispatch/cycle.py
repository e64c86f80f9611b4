"""The admission cycle, in numbered phases, each timed (after Kueue's schedule(); the
phase names are the keys of Cycle.phases and of jobdash_cycle_phase_seconds):

0. quiet     - nothing changed since a cycle whose plan did nothing: phases 1 to 10 are
               skipped, the mirror and events run only if they left writes (quiet.py)
1. snapshot  - database + watch cache -> queueing.Snapshot and the active jobs (snapshot_phase.build)
2. plan      - queueing.plan(): admissions, preemptions, and position/reason/ETA for every other job
3. release   - claim under the leader's term (release.start); the objects are then sent
               from the release threads while phases 4 to 7 run
4. preempt   - the plan's victims are told to leave after their grace period (preempt.mark), and
               the jobs on lent nodes that go back, at their notice (reclaim.mark)
5. statuses  - position/reason/message/ETA written back, only rows that changed (statuses.write_statuses)
6. track     - the cluster's news moves the active jobs on: running, finished, start
               timeout (tracker.track); claims stranded without their object are re-sent
               (reconcile.resend_stranded, and the whole reconcile every few cycles); a
               queued job of pods whose pods never came is failed (pod_groups)
7. replace   - gangs that lost nodes get their new placement, or are queued again (pinning.replace)
8. sent      - the outcomes of phase 3's sends recorded (release.Sending.finish), also when
               phases 5 to 7 failed
9. pin       - every gated pod of the active jobs, and of this cycle's releases whose pods
               exist already, is sent to its planned node (pinning.pin)
10. publish  - the quotas, nodes and our pods' phases seen, for the web pages (ClusterState)
11. mirror   - each Queued job's QueuedJob object made, updated or deleted, a deleted one's
               job cancelled (mirror.sync; at most `mirror_writes` writes a cycle)
12. events   - the outbox's state changes sent as Kubernetes Events (cluster_events.send;
               at most `events_per_cycle` a cycle; 11 and 12 share a write budget: queue_out.py)
Then one Cycle row records the cycle and its phase timings, for the status page.
"""

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

import queueing
from jobdash import logs, metrics
from jobdash.cluster.gateway import ClusterGateway, ObjectKey, PodInfo
from jobdash.jobs.models import Cycle

from . import (
    card_usage,
    cycle_cache,
    pinning,
    pod_groups,
    preempt,
    publish,
    quiet,
    reclaim,
    resize,
    snapshot_phase,
    statuses,
    tracker,
    transitions,
    workflow_holds,
)
from . import reconcile as reconcile_pass
from . import release as release_phase
from .active import ActiveJob
from .clock import Clock, WallClock
from .collector import CollectorPause
from .failures import FailureWatch
from .queue_out import QueueOut
from .statuses import write_statuses
from .table_stats import TableStatistics
from .team_usage import TeamUsage
from .write_budget import PUBLISH_SHARE

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
            preempt_within_namespace=settings.JOBDASH_PREEMPT_WITHIN_NAMESPACE,
            preemption_limit=settings.JOBDASH_PREEMPTION_LIMIT,
            pin=settings.JOBDASH_PLACEMENT == "gates",
            topology_levels=settings.JOBDASH_TOPOLOGY_LEVELS,
            mirror_writes=settings.JOBDASH_MIRROR_WRITES_PER_CYCLE,
            events_per_cycle=settings.JOBDASH_EVENTS_PER_CYCLE,
            publish_qps=settings.JOBDASH_PUBLISH_QPS,
            publish_burst=settings.JOBDASH_PUBLISH_BURST,
            usage_half_life_days=settings.JOBDASH_FAIR_HALF_LIFE_DAYS or None,
        )


@dataclass
class CycleResult:
    pending: int = 0
    admitted: int = 0
    released: dict = field(default_factory=dict)
    phases: dict = field(default_factory=dict)
    skipped: bool = False  # released nothing: another cycle claimed after this one's snapshot
    repaired: dict = field(default_factory=dict)  # stranded claims re-sent, objects adopted
    preempted: int = 0  # victims told to leave this cycle
    reclaim_notices: int = 0  # jobs on lent nodes told they leave when the nodes go back
    grown: int = 0  # elastic jobs grown into free capacity
    pinned: dict = field(default_factory=dict)  # gated pods sent to their planned nodes, ...
    mirrored: dict = field(default_factory=dict)  # QueuedJob objects created, updated, ...
    events: dict = field(default_factory=dict)  # Kubernetes Events sent, ...


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
        self.failures = FailureWatch(self.clock)  # its drivers' cycles, told once and recorded (failures.py)

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
        logs.bind_term(term)
        result = CycleResult()
        started = self.clock.now()  # the cycle's time: every phase stamps and compares with it
        clock = time.perf_counter()

        def lap(phase: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            result.phases[phase] = round((now - clock) * 1000, 2)
            clock = now

        config = self.config
        # 0. quiet: nothing changed since a cycle whose plan did nothing: no plan (quiet.py)
        looked = self.quiet.look(self.gateway, term)
        if self.quiet.quiet(started.timestamp(), looked, self.cache):
            return self._quiet_cycle(term, started, result, lap)
        self.quiet.forget()
        # 1. snapshot
        seen = transitions.claims_seen()
        observed = snapshot_phase.observe(
            self.gateway,
            self.cache,
            release_mode=config.release_mode,
            node_fit=config.node_fit,
            preemption_limit=config.preemption_limit,
            topology_levels=config.topology_levels,
            pin=config.pin,
            now=started.timestamp(),
            team_usage=self.team_usage,
        )
        result.pending = len(observed.pending)
        lap("snapshot")
        # 2. plan; start times are forecast only in the cycles that write every status
        everything = time.monotonic() - self._all_statuses_at >= self.status_interval(len(observed.pending))
        plan = queueing.plan(observed.snapshot, self.policy, forecasts=everything)
        result.admitted = len(plan.admissions)
        lap("plan")
        # 3. release
        claims = [transitions.Claim.of(a, plan.cards.get(a.job_id, ())) for a in plan.admissions]
        sending = None
        try:
            sending = release_phase.start(
                self.gateway,
                claims,
                term=term,
                mode=config.release_mode,
                concurrency=config.concurrency,
                backoff_seconds=config.backoff_s,
                seen=seen,
                now=started,
                pin=config.pin,
                workloads=self.cache.workloads_of(claim.job_id for claim in claims),
            )
        except transitions.StaleSnapshot as error:
            log.info("cycle: released nothing, %s", error)
            result.skipped = True
        lap("release")
        try:
            # 4. preempt: victims are told, and leave after their grace period (preempt.evict)
            if not result.skipped and plan.preemptions:
                waiting = {row.job.id: (row.job.namespace, row.job.workload.name) for row in observed.pending}
                result.preempted = preempt.mark(
                    self.gateway,
                    plan.preemptions,
                    active=observed.active,
                    waiting=waiting,
                    grace_s=config.preemption_grace_s,
                    term=term,
                    now=started,
                )
            if not result.skipped and any(p.shrink_to for p in plan.preemptions):  # elastic jobs giving back pods
                result.preempted += resize.mark(
                    plan.preemptions, observed.active, grace_s=config.preemption_grace_s, term=term, now=started
                )
            if not result.skipped and plan.resizes:  # elastic jobs growing into what nothing waiting can use
                result.grown = resize.grow(self.gateway, plan.resizes, observed.active, term=term)
            if observed.snapshot.lent:  # lent nodes going back: their jobs told, preempted at the reclaim
                result.reclaim_notices = reclaim.mark(
                    self.gateway, observed.snapshot.lent, observed.active, now=observed.snapshot.now, term=term
                )
            lap("preempt")
            # 5. statuses
            write_statuses(
                observed.pending,
                plan,
                shifts=everything,
                forecasted=everything,
                ranges=self.cache.learning.calibrator,
                forecasts=self.cache.learning.forecasts,
                now=observed.snapshot.now,
                overruns=statuses.overruns(observed.active, observed.snapshot.now),
                cache=self.cache,
            )
            if everything:
                self._all_statuses_at = time.monotonic()
            lap("statuses")
            # 6. track (the jobs active at the snapshot; those released since, from the next
            # cycle on), and repair what an interrupted release left behind
            tracked = self.track(
                term, observed.active, observed.active_pods, now=started, failed_nodes=observed.failed_nodes
            )
            pod_groups.fail_never_created(observed.never_created, term, started)
            workflow_holds.end(observed.never_met, term, started)  # never to be met, or too late
            result.repaired = self.repair(term, started)
            lap("track")
            # 7. replace: gangs that lost nodes placed anew, or queued again
            replaced = pinning.replace(
                self.gateway,
                plan,
                observed.active,
                observed.active_pods,
                observed.snapshot.replacements,
                observed.failed_nodes,
                mode=config.release_mode,
                term=term,
                now=started,
            )
            lap("replace")
        finally:
            # 8. sent: the objects sent in phase 3 were created meanwhile: their outcomes are recorded
            if sending is not None:
                result.released = sending.finish()
        lap("sent")
        # 9. pin: gated pods sent to their planned nodes, those of this cycle's releases too
        if config.pin:
            released = pinning.released(sending, plan, self.cache) if sending is not None else []
            result.pinned = pinning.pin(
                self.gateway,
                [*observed.active, *released],
                release_phase.sending_pool(config.concurrency),
                *replaced,
                nodes=observed.node_infos,
            )
        lap("pin")
        # 10. publish: quotas with reservations, nodes and our pods' phases
        shared_cards: dict[str, list[dict]] = {}
        sharing = {}
        if any(node.cards is not None for node in observed.snapshot.nodes):  # (clusters that share GPUs)
            infos = observed.node_infos
            sharing = {info.name: info.cards for info in infos if info.cards is not None}
            shared_cards = card_usage.card_rows(
                observed.snapshot.nodes,
                infos,
                observed.live_pods,
                publish.jobs_of_pods(observed.active, observed.active_pods),
            )
        publish.publish(
            observed.snapshot,
            publish.pod_phases(observed.active, observed.active_pods, sharing),
            publish.gpus_by_job(observed.active, observed.active_pods),
            shared_cards,
            observed.budgets,
        )
        metrics.set_off_plan(pinning.off_plan(observed.active, observed.active_pods))
        lap("publish")
        # 11. mirror: the queue as QueuedJob objects; 12. events: the outbox sent (queue_out)
        self.out.run(
            self.gateway,
            term=term,
            started=started,
            concurrency=config.concurrency,
            changed=True,
            lap=lap,
            result=result,
        )
        self.quiet.remember(
            looked,
            snapshot=observed.snapshot,
            plan=plan,
            policy=self.policy,
            active=observed.active,
            acted=quiet.acted(tracked, result.released, result.repaired, result.pinned) or bool(replaced[0]),
        )
        self._cycles += 1
        self._record(term, started, result, plan.policy)
        if result.admitted:
            log.info(
                "cycle: %d pending, %d admitted, %s; %s",
                result.pending,
                result.admitted,
                result.released,
                result.phases,
            )
        return result

    def _quiet_cycle(self, term: int, started: datetime, result: CycleResult, lap) -> CycleResult:
        """Nothing changed since a cycle whose plan did nothing (quiet.py): phases 1 to 10
        would decide and write the same. The mirror and the events finish what they left."""
        result.pending = self.quiet.pending
        lap("quiet")
        self.out.run(
            self.gateway,
            term=term,
            started=started,
            concurrency=self.config.concurrency,
            changed=False,
            lap=lap,
            result=result,
        )
        self._record(term, started, result, self.policy.name)
        return result

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
