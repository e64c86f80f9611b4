"""The admission cycle, in numbered phases, each timed (after Kueue's schedule()):

1. snapshot  - database + watch cache -> queueing.Snapshot (snapshot_phase.build)
2. plan      - queueing.plan(): admissions, and position/reason/ETA for every other job
3. release   - claim under the leader's term, create or unsuspend (release.start): the
               objects are sent from the release threads while phases 4 and 5 run, and
               their outcomes recorded after them (sent);
               preempt: victims are told to leave after their grace period (preempt.mark)
4. statuses  - write position/reason/message/ETA back, only rows that changed
5. track     - the cluster's news moves jobs on: running, finished, start timeout (tracker.track);
               claims stranded without their object are re-sent (reconcile.resend_stranded,
               and the whole reconcile every few cycles)
6. publish   - the quotas, nodes and our pods' phases seen, for the web pages (ClusterState)
Then one Cycle row records the cycle and its phase timings, for the status page.
"""

import logging
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import queueing
from jobdash import logs, metrics
from jobdash.cluster.gateway import ClusterGateway
from jobdash.jobs.models import Cycle, Job, State
from queueing.eta_calibration import ForecastSamples, StartCalibrator
from queueing.reasons import same_wait

from . import bulk, cycle_cache, preempt, publish, snapshot_phase, tracker, transitions
from . import reconcile as reconcile_pass
from . import release as release_phase
from .collector import CollectorPause
from .table_stats import TableStatistics

log = logging.getLogger(__name__)
KEEP_CYCLES = 2000
PRUNE_EVERY = 100  # cycles between two prunings of the Cycle table


STATUS_ROWS_PER_INTERVAL = 1000
FIRST_RANGE = ("eta_first_at", "eta_first", "eta_first_late", "eta_first_forecast")


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


def _as_datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)


class Dispatcher:
    """Everything one leader does, on one gateway. Holds what cycles keep for the next (CycleCache)."""

    def __init__(self, gateway: ClusterGateway, config: DispatchSettings | None = None):
        self.gateway = gateway
        self.config = config or DispatchSettings.from_django()
        self.policy = queueing.get_policy(
            self.config.policy, preempt_lower_priority=self.config.preempt_within_namespace
        )
        self.cache = cycle_cache.CycleCache()
        self.sweep = tracker.Sweep()  # the tracker's memory of objects it need not look at again
        self._cycles = 0
        self._all_statuses_at = float("-inf")  # monotonic time of the last complete status write
        self.collector = CollectorPause()
        self.statistics = TableStatistics()

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
        )

    def repair(self, term: int) -> dict:
        """Continuous repair, not only at leadership start: stranded claims every cycle
        (cheap: the Released rows without an object's uid), the whole reconcile every
        `reconcile_every` cycles."""
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
            )
        return reconcile_pass.resend_stranded(
            self.gateway,
            term=term,
            mode=self.config.release_mode,
            backoff_seconds=self.config.backoff_s,
            concurrency=self.config.concurrency,
            min_age_s=self.config.repair_after_s,
        )

    def track(self, term: int | None = None, jobs: list[dict] | None = None) -> dict:
        """`jobs`: the active jobs as this cycle's snapshot read them (None: read them now)."""
        return tracker.track(self.gateway, self.tracker_settings, self.sweep, term=term, jobs=jobs)

    def cycle(self, term: int) -> CycleResult:
        """One cycle under `term`. No lock: two cycles may run at once (a kick and a tick on
        two workers); the claim refuses the one whose snapshot is stale (StaleSnapshot),
        and the term refuses a deposed leader's (StaleTerm)."""
        with self.collector.paused():
            return self._cycle(term)

    def _cycle(self, term: int) -> CycleResult:
        logs.bind_term(term)
        result = CycleResult()
        started = timezone.now()
        clock = time.perf_counter()

        def lap(phase: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            result.phases[phase] = round((now - clock) * 1000, 2)
            clock = now

        # 1. snapshot
        seen = transitions.claims_seen()
        observed = snapshot_phase.build(
            self.gateway, self.cache, release_mode=self.config.release_mode, node_fit=self.config.node_fit
        )
        result.pending = len(observed.pending)
        lap("snapshot")
        # 2. plan; start times are forecast only in the cycles that write every status
        everything = time.monotonic() - self._all_statuses_at >= self.status_interval(len(observed.pending))
        plan = queueing.plan(observed.snapshot, self.policy, forecasts=everything)
        result.admitted = len(plan.admissions)
        lap("plan")
        # 3. release
        admissions = [
            (a.job_id, [list(p) for p in a.placement] if a.placement else None, a.borrowing) for a in plan.admissions
        ]
        sending = None
        try:
            sending = release_phase.start(
                self.gateway,
                admissions,
                term=term,
                mode=self.config.release_mode,
                concurrency=self.config.concurrency,
                backoff_seconds=self.config.backoff_s,
                seen=seen,
            )
        except transitions.StaleSnapshot as error:
            log.info("cycle: released nothing, %s", error)
            result.skipped = True
        # (3b) preempt: victims are told and leave after their grace period (preempt.evict)
        if not result.skipped:
            result.preempted = preempt.mark(
                self.gateway, plan.preemptions, grace_s=self.config.preemption_grace_s, term=term
            )
        lap("release")
        try:
            # 4. statuses
            write_statuses(
                observed.pending,
                plan,
                shifts=everything,
                forecasted=everything,
                ranges=self.cache.learning.calibrator,
                forecasts=self.cache.learning.forecasts,
                now=observed.snapshot.now,
                overruns=observed.overruns,
                cache=self.cache,
            )
            if everything:
                self._all_statuses_at = time.monotonic()
            lap("statuses")
            # 5. track (the jobs active at the snapshot; those released since, from the next
            # cycle on), and repair what an interrupted release left behind
            self.track(term, observed.active)
            result.repaired = self.repair(term)
            lap("track")
        finally:
            # (3c) the objects sent in phase 3 were created meanwhile: their outcomes are recorded
            if sending is not None:
                result.released = sending.finish()
        lap("sent")
        # 6. publish: quotas with reservations, nodes and our pods' phases
        publish.publish(observed.snapshot, publish.active_pod_phases(self.gateway, observed.active_pods))
        lap("publish")
        metrics.observe_cycle(result.phases)
        Cycle.objects.create(
            started_at=started,
            duration_ms=sum(result.phases.values()),
            term=term,
            policy=plan.policy,
            pending=result.pending,
            admitted=result.admitted,
            released=result.released.get("created", 0),
            phases=result.phases,
        )
        self._cycles += 1
        if self._cycles % PRUNE_EVERY == 0:
            prune_cycles()
        self.statistics.refresh()
        if result.admitted:
            log.info(
                "cycle: %d pending, %d admitted, %s; %s",
                result.pending,
                result.admitted,
                result.released,
                result.phases,
            )
        return result


def write_statuses(
    rows: list[cycle_cache.PendingRow],
    plan,
    *,
    shifts: bool = True,
    forecasted: bool = True,
    ranges: StartCalibrator | None = None,
    forecasts: ForecastSamples | None = None,
    now: float | None = None,
    overruns: Mapping[str, list[str]] | None = None,
    cache: cycle_cache.CycleCache | None = None,
) -> int:
    """Position, reason, message and start range of every job still waiting; only changed
    rows are written, and a changed reason leaves an event on the job's timeline.

    The plan's forecast becomes a likely start and a late bound (`ranges`: the leader's
    StartCalibrator; None: the forecast as is, no bound). A job's first range is kept with
    the raw forecast (what a new leader's calibration learns from when it starts; this one's
    learns from the forecasts sampled into `forecasts` all along the wait); a job still waiting
    past its first late bound says so, and names the running jobs of its namespace that ran
    past their own (`overruns`). A job seen for the first time has its run-time prediction
    stored with its status.

    `shifts=False` skips rows whose only change is their position, message or start range
    (a queue of thousands moves up as its heads are admitted, and rewriting every row each
    cycle costs more than the rest of the cycle), or a move between reasons that all wait
    for room (`same_wait`: under load jobs flip between them from cycle to cycle); a job
    without a position yet, its first range and any other change of reason are always
    written. A `Waiting` event marks a change of what the job waits for, not such flips.

    `forecasted=False`: the plan made no forecasts; a row keeps its last start range.

    `cache`: the leader's CycleCache the rows come from. A row is then written only if it is
    still the version that was read (else the next cycle reads it again and decides again),
    and the cache learns what was written, so that the next snapshot does not read it back."""
    now = time.time() if now is None else now
    overruns = overruns or {}
    # Per job the fields to write: a new job's status, first range and prediction in one row
    # update (each update of a row is a new version of it, with its index entries).
    updates: dict[int, dict[str, object]] = defaultdict(dict)
    admitted: set[int] = set()  # their predictions are written in any state
    events = []
    changed = 0
    for row in rows:
        status = plan.pending.get(row.job.id)
        if row.prediction is not None:  # (an admitted job keeps it too: its run is measured against it)
            p = row.prediction
            updates[row.job.id].update(
                predicted_duration_s=p.median_s, predicted_p90_s=p.p90_s, prediction_source=p.source
            )
        if status is None:
            admitted.add(row.job.id)
            continue  # admitted this cycle
        forecast = status.eta
        if (
            not shifts
            and row.position is not None
            and (forecast is None or row.eta_first_at is not None)
            and same_wait(status.reason, row.reason)
        ):
            # Nothing of it is written this cycle (below, it would be skipped): only its
            # forecast is sampled, without building its range and message.
            if forecast is not None and forecasts is not None:
                forecasts.note(row.job.id, now, forecast)
            continue
        eta = late = None
        if not forecasted:
            eta, late = row.eta, row.eta_late
        elif forecast is not None:
            eta, late = ranges.range(now, forecast) if ranges is not None else (forecast, None)
            if forecasts is not None:
                forecasts.note(row.job.id, now, forecast)
            if row.eta_first_at is None:
                first = map(_as_datetime, (now, eta, late, forecast))
                updates[row.job.id].update(zip(FIRST_RANGE, first, strict=True))
        reason = str(status.reason)
        message = status.message
        if forecasted and forecast is None and status.eta_note:
            message = f"{message.rstrip('.')}. Start time unknown: {status.eta_note}."
        if row.eta_first_late is not None and now > row.eta_first_late:
            message = f"{message.rstrip('.')}. {_past_late_bound(row.eta_first_late, overruns.get(row.job.namespace))}"
        same = _same(eta, row.eta) and _same(late, row.eta_late)
        if (status.position, reason, message) == (row.position, row.reason, row.message) and same:
            continue
        if not shifts and same_wait(reason, row.reason) and row.position is not None:
            continue
        updates[row.job.id].update(
            position=status.position, reason=reason, message=message, eta=_as_datetime(eta), eta_late=_as_datetime(late)
        )
        changed += 1
        if not same_wait(reason, row.reason):
            events.append((row.job.id, "Waiting", f"{reason}: {status.message}", "dispatcher"))
    if forecasts is not None:
        forecasts.forget(now)
    # One statement per set of fields written (a handful: new jobs, moved jobs, admitted ones).
    groups: dict[tuple[tuple[str, ...], bool], list[tuple]] = defaultdict(list)
    for job_id, fields in updates.items():
        names = tuple(sorted(fields))
        groups[names, job_id in admitted].append((job_id, *(fields[name] for name in names)))
    versions: dict[int, str] = {}
    with transaction.atomic():
        for (names, any_state), values in groups.items():
            if any_state:  # a job admitted this cycle keeps its prediction, in any state
                bulk.update_rows(Job, values, names)
                continue
            # Statuses only of rows still Queued: a job cancelled or released meanwhile keeps its
            # state's fields.
            read = {job_id: cache.version(job_id) for job_id, *_ in values} if cache is not None else {}
            if read and None not in read.values():
                at_version = [(job_id, read[job_id], *rest) for job_id, *rest in values]
                versions.update(bulk.update_versioned_rows(Job, at_version, names, only_states=(State.QUEUED,)))
            else:
                bulk.update_rows(Job, values, names, only_states=(State.QUEUED,))
        bulk.insert_events(events)
    if cache is not None and versions:
        cache.written(versions, updates)
    return changed


def _same(a: float | None, b: float | None) -> bool:
    return (a is None) == (b is None) and (a is None or b is None or abs(a - b) < 1.0)


def _past_late_bound(late: float, overruns: list[str] | None) -> str:
    given = _as_datetime(late)
    assert given is not None
    said = f"Past its late bound ({given:%Y-%m-%d %H:%M} UTC)"
    if overruns:
        shown = "; ".join(overruns[:3]) + (f"; and {len(overruns) - 3} more" if len(overruns) > 3 else "")
        return f"{said}: running jobs here ran longer than expected: {shown}."
    return f"{said}: no running job here ran past its bound; jobs ahead of it, or of higher priority, took the room."


def prune_cycles(keep: int | None = None) -> int:
    """Cycles are telemetry, not history: keep the most recent ones (KEEP_CYCLES)."""
    keep = KEEP_CYCLES if keep is None else keep
    boundary = list(Cycle.objects.order_by("-started_at").values_list("started_at", flat=True)[keep : keep + 1])
    if not boundary:
        return 0
    return Cycle.objects.filter(started_at__lte=boundary[0]).delete()[0]
