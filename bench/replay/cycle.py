"""Admission cycles in the replay: the snapshot built incrementally from the watch cache,
queueing.plan(), the releases, the tracker's start timeouts, and when the next cycle is due.

Cycles follow the dispatcher's loop: a kick on every submission (not for ``seed``: the
article's leader only polls) and a tick ``tick_s`` after the previous cycle.  A tick whose
snapshot would be the previous one's (nothing changed in the cluster or the queue, and no
time threshold passed: a backoff ending, a start timeout, a head reaching the reservation
age, a promotion, a running job passing its expected end under backfill) would admit
nothing, so it is skipped; the next cycle lands on the same tick grid it would have in
the loop.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time

from queueing import InFlightJob, NamespaceQuota, Node, RunningJob, Snapshot, plan
from queueing.defrag import DefragRules
from queueing.reasons import Reason
from queueing.workload import PodSet, Workload

from .mapping import QUOTA_KEY, TOPOLOGY_LEVELS
from .records import COHORT, INF, RELEASED, JobRecord
from .true_forecast import true_duration_etas

# Waiting for capacity: the first such job of a namespace is its head (planner._head_waits).
_HEAD_REASONS = frozenset({Reason.QUOTA_EXCEEDED, Reason.NO_NODE_FITS, Reason.RESERVED_FOR_OLDER_JOB})


class AdmissionCycles:
    """Mixed into ``engine.Replay``, whose ``__init__`` sets the state these methods keep."""

    # Every forecasting cycle's forecasts, when asked for (calibration_log: the calibrator
    # alone replayed over them, a new leader's bootstrap taken from them).
    forecast_log: list | None = None

    def _nodes(self) -> tuple[Node, ...]:
        if self.dirty_nodes or len(self.nodes_tuple) != len(self.node_names):  # (a lent node deleted)
            for name in self.dirty_nodes:
                alloc = {key: amount for key, amount in self.node_alloc[name].items() if amount}
                self.node_objs[name] = Node(
                    name, self.allocatable, alloc, labels=self.node_labels[name], unschedulable=name in self.cordoned
                )
            self.dirty_nodes.clear()
            self.nodes_tuple = tuple(self.node_objs[name] for name in self.node_names)
        return self.nodes_tuple

    def _quotas(self) -> dict[str, NamespaceQuota]:
        for ns in self.dirty_quotas:
            if self.elastic:  # the VC's share is its guarantee; one cohort lends what is idle
                self.quota_objs[ns] = NamespaceQuota(
                    ns,
                    {QUOTA_KEY: self.hard[ns]},
                    {QUOTA_KEY: self.quota_used[ns]},
                    guaranteed={QUOTA_KEY: self.guaranteed[ns]},
                    cohort=COHORT,
                )
            else:
                self.quota_objs[ns] = NamespaceQuota(ns, {QUOTA_KEY: self.hard[ns]}, {QUOTA_KEY: self.quota_used[ns]})
        self.dirty_quotas.clear()
        return self.quota_objs

    _outstanding_cache: dict[tuple[str, int, int], dict[str, int]] = {}

    def _outstanding(self, rec: JobRecord, missing: int) -> dict[str, int]:
        """snapshot_phase._outstanding: the quota demand of the pods not created yet (the job's object exists)."""
        key = (rec.kind.plural, rec.job.gpus, missing)
        found = self._outstanding_cache.get(key)
        if found is None:
            workload = rec.workload
            pod_sets = tuple(PodSet(ps.role, missing, ps.requests, ps.limits) for ps in workload.pod_sets)
            demand = Workload(
                workload.kind, workload.api_version, workload.name, workload.namespace, pod_sets
            ).quota_demand()
            found = self._outstanding_cache[key] = {k: v for k, v in demand.items() if v and not k.startswith("count/")}
        return found

    def _in_flight(self, rec: JobRecord, lost: frozenset = frozenset()) -> InFlightJob:
        """The released job as the snapshot shows it: its planned pods no node has charged yet
        (a bound pod takes a slot on its own node, else one by count, as
        snapshot_phase._unbound_placements), less the slots it lost (placed anew by the plan)."""
        key = (rec.n_pods, tuple(sorted(rec.bound_nodes.items())), rec.placement)
        if lost:
            rec.inflight = None
        if rec.inflight is None or rec.inflight_key != key:
            placements = tuple(p for p in self._unbound(rec) if p not in lost)
            rec.inflight = InFlightJob(
                rec.job.id,
                rec.job.vc,
                rec.in_flight_workload,
                placements=placements,
                outstanding=self._outstanding(rec, rec.gang - rec.n_pods),
                released_at=rec.released_at or 0.0,
            )
            rec.inflight_key = None if lost else key
        return rec.inflight

    @staticmethod
    def _unbound(rec: JobRecord) -> tuple:
        if not rec.bound_nodes:
            return rec.placement
        bound = dict(rec.bound_nodes)
        unbound = []
        for slot in rec.placement:
            if bound.get(slot[2], 0) > 0:
                bound[slot[2]] -= 1
            else:
                unbound.append(slot)
        elsewhere = sum(bound.values())  # pods bound off the plan take slots by count
        return tuple(unbound[elsewhere:])

    def _cycle(self, now: float) -> None:
        stats = self.stats
        with_eta = self._cycle_begins(now)
        began = time.perf_counter()
        if with_eta and self.predictor is not None:
            running = self._running_likely(now)
        elif self.needs_running or with_eta:
            running = tuple(self.running.values())
        else:
            running = ()
        lost = self._lost()
        snapshot = self._snapshot(now, tuple(self.pending.values()), self._nodes(), running, lost, with_eta)
        result = self._plan(snapshot, with_eta, began)
        if with_eta:
            self._sample_etas(now, result, snapshot)
            self.next_eta = (
                math.floor((now - self.start) / self.config.eta_every_s) + 1
            ) * self.config.eta_every_s + self.start
        for admission in result.admissions:
            self._release(admission, now)
        if result.admissions:
            began = time.perf_counter()
            self.cluster.settle()
            stats["cluster_s"] += time.perf_counter() - began
        if result.resizes:  # (elastic_jobs.py) running elastic jobs grow
            self._grow(result.resizes, now)
        if self.preempts:
            if result.preemptions:
                self._mark_victims(result.preemptions, now)
            self._note_preempting(result)
        self._track(now)
        if result.replacements or result.evictions:
            self._replace(result, lost, now)
        self._pin()  # this cycle's releases too: their pods exist once the cluster settled
        self._heads(result, now)

    def _cycle_begins(self, now: float) -> bool:
        """A cycle is counted and the loop's clock of cycles reset; whether it forecasts."""
        self.stats["cycles"] += 1
        self.changed_at = None
        self.last_cycle = now
        return now >= self.next_eta

    def _snapshot(
        self,
        now: float,
        pending: tuple,
        nodes: tuple[Node, ...],
        running: tuple,
        lost: tuple,
        with_eta: bool,
        clusters: tuple | None = None,
    ):
        """The cycle's Snapshot of these pending jobs, nodes, running jobs and lost slots
        (every released job is in flight: its pods planned on nodes not given charge nothing),
        and of these clusters (None: the replay's, multi_cluster.py)."""
        lost_slots = {replacement.job_id: frozenset(replacement.lost) for replacement in lost}
        return Snapshot(
            now=now,
            pending=pending,
            in_flight=tuple(
                self._in_flight(rec, lost_slots.get(rec.job.id, frozenset())) for rec in self.inflight.values()
            ),
            running=running,
            quotas=self._quotas(),
            nodes=nodes,
            node_fit=True,
            history=self.durations.as_map() if with_eta else {},
            # Borrowing without reclaim: no running job is ever a victim.
            preemption_limit=None if not self.elastic else self.config.preemption_limit if self.preempts else 0,
            topology_levels=TOPOLOGY_LEVELS,
            replacements=lost,
            lent=self._lent(),
            usage=self.memory.usage(now),
            defrag=None
            if self.config.defrag_gpu_h is None
            else DefragRules(
                self.config.defrag_gpu_h * 3600, self.config.defrag_window_s, max_movers=self.config.defrag_movers
            ),
            clusters=self.plan_clusters if clusters is None else clusters,  # (one cluster: none of it runs)
        )

    def _plan(self, snapshot: Snapshot, with_eta: bool, began: float):
        """plan() over the snapshot, timed (``began``: when the snapshot began)."""
        stats = self.stats
        planned_at = time.perf_counter()
        # Start times are forecast only in the hourly cycles (the dispatcher's complete rounds,
        # plan(forecasts=...)): the forecast plays every queue forward from the running jobs'
        # ends, and decides nothing.
        result = plan(snapshot, self.policy, eta_horizon_s=self.config.eta_horizon_s, forecasts=with_eta)
        done_at = time.perf_counter()
        stats["snapshot_s"] += planned_at - began
        stats["plan_s"] += done_at - planned_at
        if with_eta:
            stats["eta_plan_s"] += done_at - planned_at
        stats["max_pending"] = max(stats["max_pending"], len(snapshot.pending))
        stats["queue_len_sum"] += len(snapshot.pending)
        return result

    def _release(self, admission, now: float) -> None:
        """An admission: the job leaves the queue and is created (held, to be pinned), its
        pods checked to lie in one cluster (multi_cluster.py)."""
        rec = self.records[admission.job_id]
        del self.pending[admission.job_id]
        rec.borrowing = admission.borrowing
        self.stats["borrowing_admitted"] += admission.borrowing
        self._in_one_cluster(rec, admission)
        self._create(rec, now, admission.placement, admission.counts)
        self._admitted(rec, now)
        self.stats["admitted"] += 1

    def _running_likely(self, now: float) -> tuple[RunningJob, ...]:
        """The running jobs, each with its likely end given how long it has run (the new
        estimator, for the start-time forecast; only in the cycles that forecast)."""
        began = time.perf_counter()
        likely_total, features, records = self.predictor.likely_total, self.features, self.records
        replace = dataclasses.replace
        running = []
        for job in self.running.values():
            rec = records[job.id]
            total = likely_total(features(rec.job.vc, rec.job.gpus), now - job.started_at)
            running.append(job if total is None else replace(job, likely_end=job.started_at + total))
        self.stats["likely_end_s"] += time.perf_counter() - began
        return tuple(running)

    def _sample_etas(self, now: float, result, snapshot: Snapshot) -> None:
        """Every waiting job's forecast goes through the calibrator as it stands now and is
        noted with the range it gave (the calibrator learns from them once the job starts, or
        as it outwaits them: ``StartCalibrator.update``); a sample of them, spread over the
        queue, is kept: (job, forecast start, now, likely start, late bound), with the start
        the same forecast gives knowing every run time (``eta_oracle``) if asked for."""
        stats = self.stats
        stats["eta_cycles"] += 1
        waiting = [status for status in result.pending.values() if not status.reason.never]
        self.eta_pending_seen += len(waiting)
        with_eta = [status for status in waiting if status.eta is not None]
        self.eta_with_estimate += len(with_eta)
        self.eta_with_note += sum(1 for status in waiting if status.eta is None and status.eta_note)
        self.calibrator.update(now, self.forecasts)  # (what the waits so far say, before the ranges)
        note, records, start_range = self.forecasts.note, self.records, self.calibrator.range
        shown = {}
        for status in with_eta:
            shown[status.job_id] = start_range(now, status.eta, status.namespace)
            if records[status.job_id].started_at is None:  # (not a job requeued after a preemption: as the dispatcher)
                note(status.job_id, now, status.eta, namespace=status.namespace, shown=shown[status.job_id])
        if self.forecast_log is not None:
            ids = [status.job_id for status in with_eta]
            fresh = [records[job].started_at is None for job in ids]
            self.forecast_log.append((now, ids, [status.eta for status in with_eta], fresh))
        step = max(1, len(with_eta) // self.config.eta_sample)
        sampled = with_eta[::step]
        known = queued_known = {}
        if self.config.eta_oracle and sampled:
            horizon = self.config.eta_horizon_s
            known = true_duration_etas(snapshot, self.policy, records, horizon)
            queued_known = true_duration_etas(snapshot, self.policy, records, horizon, running_known=False)
        for status in sampled:
            likely, late = shown[status.job_id]
            self.eta_samples.append((status.job_id, status.eta, now, likely, late))
            if self.config.eta_oracle:
                self.eta_oracle.append((known.get(status.job_id), queued_known.get(status.job_id)))

    def _track(self, now: float) -> None:
        """Start timeouts (dispatch/phases/tracker.py), checked once per cycle like the tracker."""
        timeouts = self.timeouts
        while timeouts and timeouts[0][0] <= now:
            _, job_id, release = heapq.heappop(timeouts)
            rec = self.records.get(job_id)
            if rec is not None and rec.state == RELEASED and rec.releases == release:
                self._take_back(rec, now)

    def _heads(self, result, now: float) -> None:
        """The next instant a head's waiting time reaches the reservation age or the hold age
        (planner._head_waits), or a running job in its namespace passes its expected end
        (its shadow changes): the only ways time alone changes a submission-ordered plan."""
        self.head_trigger = None
        self.shadow_trigger = None
        ages = [age for age in (self.reservation_after, self.hold_after) if age is not None]
        if not ages and not self.backfill:
            return
        heads: dict[str, tuple[int, int]] = {}
        for status in result.pending.values():
            if status.reason in _HEAD_REASONS:
                best = heads.get(status.namespace)
                if best is None or status.position < best[0]:
                    heads[status.namespace] = (status.position, status.job_id)
        if self.backfill:
            ends = []
            for namespace in heads:
                heap = self.expected_ends.get(namespace)
                while heap and (heap[0][0] <= now or heap[0][1] not in self.running):
                    heapq.heappop(heap)
                if heap:
                    ends.append(heap[0][0])
            self.shadow_trigger = min(ends) if ends else None
        triggers = [
            self.pending[job_id].submitted_at + age
            for _, job_id in heads.values()
            if job_id in self.pending
            for age in ages
        ]
        later = [t for t in triggers if t > now]
        self.head_trigger = min(later) if later else None

    def _next_trigger(self) -> float | None:
        """The earliest time threshold after the last cycle that can change its plan."""
        last = self.last_cycle
        candidates = []
        timeouts = self.timeouts  # stale: the job started (or was taken back) since
        while timeouts and (
            timeouts[0][0] <= last
            or timeouts[0][1] not in self.inflight
            or self.inflight[timeouts[0][1]].releases != timeouts[0][2]
        ):
            heapq.heappop(timeouts)
        if timeouts:
            candidates.append(timeouts[0][0])
        pending = self.pending
        for heap in (self.backoffs, self.promotions):  # stale: the job is no longer queued
            while heap and (heap[0][0] <= last or heap[0][1] not in pending):
                heapq.heappop(heap)
            if heap:
                candidates.append(heap[0][0])
        for trigger in (self.head_trigger, self.shadow_trigger):
            if trigger is not None and trigger > last:
                candidates.append(trigger)
        return min(candidates) if candidates else None

    def _next_cycle(self) -> float:
        if not self.pending and not self.inflight and not self._may_grow():
            return INF
        due = self.changed_at
        trigger = self._next_trigger()
        if trigger is not None and (due is None or trigger < due):
            due = trigger
        if due is None:
            return INF
        last = self.last_cycle
        ticks = max(1, math.ceil((due - last) / self.tick - 1e-9))
        return last + ticks * self.tick
