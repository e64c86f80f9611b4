"""The discrete-event replay: kubesim's cluster model on a ManualClock, queueing.plan() deciding.

What runs is the real code: every release is a TFJob created in kubesim through its API
(validation, quota admission), kubesim's training-operator creates the pods, its
scheduler binds them one at a time (not gang-aware, LeastAllocated), its kubelet starts
them after ``kubelet_delay_s`` and its work clock runs the job for the trace's duration
once the whole gang runs.  By default (``ReplayConfig.pin``, issue #31) a release is the
dispatcher's: the TFJob's templates are held by the placement gate, so its pods are
created gated, and each cycle sends every gated pod to its planned node by a pod patch
(pinning.py); the scheduler then binds it there.  With ``pin=False`` (``--no-pin``) the
scheduler alone places the pods, as every replay before #31 did.  The replay reads the cluster the way the dispatcher's watch
cache does, from store events (a hook: an informer without lag), and builds each
cycle's ``Snapshot`` incrementally from that (see ``jobdash/dispatch/snapshot_phase.py`` for the
production version); it keeps ``PendingJob`` objects from arrival to release.

Time moves only by ``Cluster.advance``, from one event to the next: an arrival, a
controller deadline (a pod start, a job's end, an operator retry) or a cycle.  Cycles
(cycle.py) follow the dispatcher's loop: a kick on every submission (not for ``seed``: the
article's leader only polls) and a tick ``tick_s`` after the previous cycle.  A tick
whose snapshot would be the previous one's (nothing changed in the cluster or the
queue, and no time threshold passed: a backoff ending, a start timeout, a head reaching
the reservation age, a promotion) would admit nothing, so it is skipped; the next cycle
lands on the same tick grid it would have in the loop.  Start timeouts take a released
job back and requeue it with exponential backoff like the tracker, Failed after
``max_attempts``.

``policy="none"`` is the cluster without jobdash: every job is created at submission.

Quota (``ReplayConfig.quota``, issue #15): ``fixed`` gives each VC its share (VC nodes x 8
GPUs) as its ResourceQuota.  ``borrow`` and ``elastic`` make that share the VC's guarantee
and its ResourceQuota (the ceiling) the whole cluster, one cohort for all VCs; ``borrow``
never preempts (``Snapshot.preemption_limit=0``), ``elastic`` does as the dispatcher does:
a victim of ``plan().preemptions`` keeps running ``grace_s`` (``RunningJob.preempted_for``),
then its TFJob is suspended through kubesim's API (its pods go, kubesim keeps the work
up to its last checkpoint) and it is queued again with its submission time; its next
release unsuspends the same TFJob.  If the preemptor was admitted or is gone by then,
the preemption is called off.

Durations and start times (issue #16, ``ReplayConfig.estimator``).  ``old``: a job's
estimate is the median of its VC's last runs of its GPU count (``history.py``), taken at
submission for the queue and at its start for backfill's expected end.  ``new``, as the
dispatcher does it: queueing's ``DurationPredictor`` predicts at submission (the median
is ``PendingJob.expected_duration`` and, from its start, the running job's expected end)
and learns each job's run time when it finishes; in the cycles that forecast start
times, a running job's ``likely_end`` is its likely whole duration given how long it has
run (``likely_total``).  Either way each sampled forecast goes through a
``StartCalibrator`` (a likely start and a 90% late bound), which learns from each job's
first forecast once that job starts.
"""

from __future__ import annotations

import gc
import heapq
import sys
import time
from collections.abc import Iterable
from typing import Any

from kubesim.clock import ManualClock
from kubesim.cluster import Cluster
from kubesim.resources import NODES
from queueing import NamespaceQuota, Node, PendingJob, RunningJob
from queueing.eta_calibration import ForecastSamples, StartCalibrator
from queueing.policies import get_policy
from queueing.policy import Policy
from queueing.predictor import DurationPredictor, JobFeatures
from queueing.quantity import canonical

from .checkpoints import Checkpoints
from .cycle import AdmissionCycles
from .elastic_jobs import ElasticJobs
from .history import DurationHistory
from .lending import Lending, night_pool
from .lost_cluster import LostCluster
from .mapping import GPU, GPUS_PER_NODE, cluster_config, job_name, pods_of, tfjob_manifest
from .multi_cluster import MultiCluster
from .oracle import OracleSjfPolicy
from .pinning import Pinning
from .preemption import Preemptions
from .records import (  # noqa: F401 (the replay's data, importable from here as before)
    BORROW,
    DONE,
    ELASTIC,
    FAILED,
    FIXED,
    HOUR,
    INF,
    NEW_ESTIMATOR,
    NO_QUEUE,
    QUEUED,
    RELEASED,
    RUNNING,
    JobRecord,
    ReplayConfig,
    ReplayResult,
)
from .trace import TraceJob
from .usage_memory import UsageMemory
from .watch_cache import WatchCache


def make_policy(name: str, **options: Any) -> Policy | None:
    if name == NO_QUEUE:
        return None
    if name == "sjf-oracle":
        return OracleSjfPolicy(**options)
    return get_policy(name, **options)


class Replay(
    LostCluster, MultiCluster, WatchCache, AdmissionCycles, Preemptions, Pinning, Lending, ElasticJobs, Checkpoints
):
    def __init__(
        self,
        jobs: list[TraceJob],
        vc_nodes: dict[str, int],
        config: ReplayConfig,
        start: float | None = None,
        window_end: float | None = None,
        learned: Iterable[TraceJob] = (),
    ):
        self.jobs = jobs
        self.config = config
        self.policy = make_policy(config.policy, **config.policy_options)
        self.start = start if start is not None else (jobs[0].submit if jobs else 0.0)
        self.window_end = window_end if window_end is not None else (jobs[-1].submit if jobs else self.start)
        self.tick = config.tick_s if config.tick_s is not None else (10.0 if config.policy == "seed" else 2.0)
        self.kick = config.kick if config.kick is not None else config.policy != "seed"
        self.clock = ManualClock(self.start)
        # Each VC's share; with elastic quota it is the guarantee and the ceiling is the cluster.
        share = {vc: nodes * GPUS_PER_NODE for vc, nodes in vc_nodes.items()}
        self.elastic = config.quota != FIXED and self.policy is not None
        cluster_gpus = sum(share.values())
        kubesim_config = cluster_config(
            vc_nodes,
            self.start,
            start_delay_s=config.kubelet_delay_s,
            operator_max_backoff_s=config.operator_max_backoff_s,
            quota_gpus={vc: cluster_gpus for vc in vc_nodes} if self.elastic else None,
            checkpoint_s=config.checkpoint_s,
            clusters=config.clusters,
        )
        if config.lent:  # (issue 35) kubesim lends the night pool on its clock
            capacity = kubesim_config["nodes"][0]["capacity"]
            kubesim_config["lent_pools"] = [night_pool(vc_nodes, config.lent, config.lent_notice_s, capacity)]
        self.cluster = Cluster(kubesim_config, self.clock)
        self.cluster.store.hooks.append(self._on_event)
        # What the policy reads from the caller (with no queue, nothing: every job is created at submission).
        policy = self.policy
        self.oracle = isinstance(policy, OracleSjfPolicy)
        # Backfill reads every waiting job's estimate and the running jobs' expected ends.
        self.backfill = policy is not None and policy.backfill
        self.uses_estimate = (policy is not None and policy.uses_duration_estimate) or self.backfill
        self.reservation_after = None if policy is None else policy.reservation_after_s
        self.hold_after = policy.hold_after_s if policy is not None and self.backfill else None
        self.promote_after = None if policy is None else policy.promote_after_s
        # Preemption picks its victims among the running jobs.
        self.preempts = (self.elastic and config.quota == ELASTIC) or config.defrag_gpu_h is not None
        self.needs_running = (policy is not None and policy.fair_share) or self.backfill or self.preempts

        self.records: dict[int, JobRecord] = {}
        self.all_records: list[JobRecord] = []
        self.pending: dict[int, PendingJob] = {}
        self.inflight: dict[int, JobRecord] = {}
        self.running: dict[int, RunningJob] = {}
        # The cluster as the watch cache shows it.
        self.node_names = sorted(
            (n["metadata"]["name"] for n in self.cluster.store.items(NODES)), key=lambda name: name
        )
        self.node_alloc: dict[str, dict[str, int]] = {name: {} for name in self.node_names}
        self.node_labels: dict[str, dict[str, str]] = {
            n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in self.cluster.store.items(NODES)
        }
        self.gated_jobs: set[int] = set()  # released jobs with pods held by the placement gate
        self.foreign_pods: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}  # pods not of a job
        first = self.cluster.store.find(NODES, "", self.node_names[0]) if self.node_names else None
        self.allocatable = {
            name: canonical(name, value)
            for name, value in ((first or {}).get("status") or {}).get("allocatable", {}).items()
        }
        self.total_gpus = self.allocatable.get(GPU, 0) * sum(vc_nodes.values())  # (lent nodes not told)
        self.node_objs: dict[str, Node] = {}
        self.dirty_nodes: set[str] = set(self.node_names)
        self.nodes_tuple: tuple[Node, ...] = ()
        self.hard = {vc: cluster_gpus for vc in vc_nodes} if self.elastic else share
        self.guaranteed = share if self.elastic else {}
        # Victims in their grace period: (deadline, victim id, preemptor id).
        self.graces: list[tuple[float, int, int]] = []
        self.quota_used: dict[str, int] = {vc: 0 for vc in vc_nodes}
        self.quota_objs: dict[str, NamespaceQuota] = {}
        self.dirty_quotas: set[str] = set(vc_nodes)
        # Cycle scheduling.
        self.last_cycle = self.start
        self.changed_at: float | None = None  # first change since the last cycle
        self.timeouts: list[tuple[float, int, int]] = []  # (deadline, job id, release number)
        self.backoffs: list[tuple[float, int]] = []
        self.promotions: list[tuple[float, int]] = []
        self.head_trigger: float | None = None
        # Backfill: per namespace, (expected end, job id) of its running jobs.  A running job
        # passing its expected end changes its namespace's shadow (it is then taken to end
        # any moment), so it is a time threshold like a head reaching the reservation age.
        self.expected_ends: dict[str, list[tuple[float, int]]] = {}
        self.shadow_trigger: float | None = None
        self.next_eta = self.start if config.eta_every_s else INF
        self.durations = DurationHistory(config.history_size, config.history_window)
        # The new estimator (issue #16); None: the old one (self.durations) alone.
        tail = config.lent_coverage
        self.predictor = DurationPredictor(tail_coverage=tail) if config.estimator == NEW_ESTIMATOR else None
        self.job_features: dict[tuple[str, int], JobFeatures] = {}
        # What a leader learns on its first cycle: the jobs that finished before (predictions.BOOTSTRAP).
        for job in learned:
            self.durations.record(job.vc, job.gpus, job.duration)
            if self.predictor is not None:
                self.predictor.observe(self.features(job.vc, job.gpus), job.duration)
        # Start ranges: the calibrator, and the forecasts each waiting job was given until it starts
        # (sampled as the dispatcher samples them: jobdash/dispatch/predictions.py).
        self.calibrator = StartCalibrator()
        self.forecasts = ForecastSamples()
        # Metrics.
        self.busy = 0  # GPUs of running gangs
        self.held = 0  # GPUs of bound pods
        self.partial_node = self.partial_quota = 0
        self.partial_node_gpu_s = self.partial_quota_gpu_s = 0.0
        self.metric_t = self.start
        self.util_buckets: list[float] = []
        self.held_buckets: list[float] = []
        self.last_progress = self.start
        self.eta_samples: list[tuple[int, float, float, float, float]] = []
        # Per sample, with config.eta_oracle: the starts forecast knowing every run time, and the queued jobs' only.
        self.eta_oracle: list[tuple[float | None, float | None]] = []
        self.eta_cycles = self.eta_pending_seen = self.eta_with_estimate = self.eta_with_note = 0
        self.stats: dict[str, Any] = {
            "cycles": 0,
            "eta_cycles": 0,
            "admitted": 0,
            "timeouts": 0,
            "gave_up": 0,
            "plan_s": 0.0,
            "eta_plan_s": 0.0,
            "snapshot_s": 0.0,
            "cluster_s": 0.0,
            "max_pending": 0,
            "queue_len_sum": 0,
            "likely_end_s": 0.0,
            "calibration_observed": 0,
            # Pinned placement (issue #31): pods sent to their planned nodes, pods bound to a
            # node beyond what their job's placement plans there, gated pods beyond the plan,
            # gangs placed again (lost slots) and taken back for want of room, pods deleted.
            "ungated": 0,
            "off_plan": 0,
            "beyond_plan": 0,
            "replaced": 0,
            "evicted": 0,
            "stranded_pods_deleted": 0,
            "pin_s": 0.0,
            "skipped_ticks_note": "ticks with nothing new are skipped",
        }
        self._init_preemptions()
        self._init_lending(vc_nodes)
        self.memory = UsageMemory(getattr(self.policy, "usage_half_life_days", None))
        self._init_elastic()
        self._init_checkpoints()
        self._init_clusters()  # (and the lost cluster's: lost_cluster.py)

    def estimate(self, vc: str, gpus: int) -> float | None:
        """The old no-oracle duration estimate: the median of the namespace's recent runs of this shape."""
        return self.durations.estimate(vc, gpus)

    def features(self, vc: str, gpus: int) -> JobFeatures:
        """What the predictor knows of a trace job at submission (the trace has no user or name)."""
        found = self.job_features.get((vc, gpus))
        if found is None:
            found = self.job_features[(vc, gpus)] = JobFeatures(
                namespace=vc, kind="TFJob", gpus=gpus, pods=pods_of(gpus)[0]
            )
        return found

    # -- arrivals, releases, take-backs --------------------------------------------------------

    def _submit(self, job: TraceJob, now: float) -> None:
        rec = JobRecord(job, self._is_elastic(job), *self._checkpoints_of(job))
        if self.predictor is not None:
            rec.prediction = self.predictor.predict(self.features(job.vc, job.gpus))
            rec.estimate = rec.prediction.median_s
        else:
            rec.estimate = self.estimate(job.vc, job.gpus)
        self.records[job.id] = rec
        self.all_records.append(rec)
        if self.policy is None:
            self._create(rec, now, None)
            return
        self._enqueue(rec, backoff_until=None)
        if self.promote_after is not None:
            heapq.heappush(self.promotions, (job.submit + self.promote_after, job.id))
        self._changed(now)

    def _expected(self, rec: JobRecord) -> float | None:
        if self.oracle:
            return rec.job.duration
        if self.uses_estimate or self.predictor is not None:  # (the dispatcher gives every job its prediction)
            return rec.estimate
        return None

    def _enqueue(self, rec: JobRecord, backoff_until: float | None) -> None:
        rec.state = QUEUED
        job = rec.job
        self.pending[job.id] = PendingJob(
            job.id,
            job.vc,
            0,
            job.submit,
            rec.workload,
            attempts=rec.attempts,
            backoff_until=backoff_until,
            expected_duration=self._expected(rec),
            preempted_by=rec.preempted_by,
            # The 90 % bound, for lent nodes (the dispatcher's queued jobs carry it).
            bound=self._run_bound(rec),
        )
        if backoff_until is not None:
            heapq.heappush(self.backoffs, (backoff_until, job.id))

    def _create(self, rec: JobRecord, now: float, placement, counts=None) -> None:
        rec.state = RELEASED
        rec.released_at = now
        rec.releases += 1
        if rec.first_released_at is None:
            rec.first_released_at = now
        rec.placement = tuple(placement or ())
        rec.preempted_by = None  # (the dispatcher's claim clears it)
        # Held only with a placement to send its pods to (release.py: seed plans none).
        pin = self.config.pin and self.policy is not None and bool(rec.placement)
        if rec.elastic:  # (elastic_jobs.py) with the Workers admitted
            self._elastic_create(rec, counts, pin)
        elif rec.suspended:  # preempted before: its TFJob is still there, suspended
            if pin:
                self._hold_object(rec)
            self._set_suspend(rec, False)
        else:
            manifest = tfjob_manifest(
                rec.job.id, rec.job.vc, rec.job.gpus, rec.job.duration, self._object_annotations(rec)
            )
            self.cluster.create_tfjob(self._held(manifest, rec) if pin else manifest)
        if self.policy is not None:
            self.inflight[rec.job.id] = rec
            heapq.heappush(self.timeouts, (now + self.config.start_timeout_s, rec.job.id, rec.releases))

    def _set_suspend(self, rec: JobRecord, suspend: bool) -> None:
        """Patch the TFJob's runPolicy.suspend, as the dispatcher's gateway does (the operator
        deletes the pods of a suspended job and creates them again once it is resumed);
        pinned, a suspended job's templates are then restored (holding.suspended)."""
        rec.suspended = suspend
        body: dict[str, Any] = {"spec": {"runPolicy": {"suspend": suspend}}}
        self.cluster.api.patch(rec.kind, rec.job.vc, job_name(rec.job.id), "application/merge-patch+json", body)
        if suspend and self.config.pin and self.policy is not None:
            self._restore_object(rec)

    def _take_back(self, rec: JobRecord, now: float, count_attempt: bool = True) -> None:
        """The tracker's start timeout: delete the TFJob (its pods go with it), requeue with
        backoff; a job resumed after a preemption is suspended again instead (unsuspend mode).
        ``count_attempt=False``: a gang evicted for want of room for its lost pods
        (transitions.node_failed), queued again at once without counting an attempt."""
        if count_attempt:
            self.stats["timeouts"] += 1
        if rec.preemptions and (rec.attempts + 1 < self.config.max_attempts or not count_attempt):
            self._set_suspend(rec, True)
        else:
            self.cluster.api.delete(rec.kind, rec.job.vc, job_name(rec.job.id))
            rec.suspended = False
            if rec.elastic:
                self._elastic_deleted(rec)
        self.inflight.pop(rec.job.id, None)
        rec.inflight = None
        self.gated_jobs.discard(rec.job.id)
        if not count_attempt:
            self._partial(rec, now)
            self._enqueue(rec, backoff_until=None)
            return
        rec.attempts += 1
        self._partial(rec, now)
        if rec.attempts >= self.config.max_attempts:
            self.stats["gave_up"] += 1
            rec.state = FAILED
            del self.records[rec.job.id]
            return
        backoff = min(self.config.backoff_cap_s, self.config.backoff_s * 2 ** max(0, rec.attempts - 1))
        self._enqueue(rec, now + backoff)

    # -- the loop ------------------------------------------------------------------------------

    def run(self, progress: bool = False) -> ReplayResult:
        """Replay every job.  The cyclic garbage collector is off meanwhile (as plan() does):
        the replay's millions of objects (kubesim's stored dicts, mostly) are acyclic, and
        its full passes over them cost about a tenth of the run."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._run(progress)
        finally:
            if collecting:
                gc.enable()

    def _run(self, progress: bool) -> ReplayResult:
        began = time.perf_counter()
        cpu_began = time.process_time()
        next_report = self.start + 86400.0
        jobs, count, index = self.jobs, len(self.jobs), 0
        controllers = self.cluster.controllers
        clock = self.clock
        cluster_s = 0.0
        while True:
            now = clock.now()
            next_arrival = jobs[index].submit if index < count else INF
            next_cycle = self._next_cycle() if self.policy is not None else INF
            deadline = controllers.next_deadline()
            next_grace = self.graces[0][0] if self.graces else INF
            next_tide = self._next_tide()
            t = min(next_arrival, next_cycle, INF if deadline is None else deadline, next_grace, next_tide)
            if t == INF:
                break
            if index >= count and self._drained(t):
                break
            if t > now:
                mark = time.perf_counter()
                self.cluster.advance(t - now)
                cluster_s += time.perf_counter() - mark
                now = clock.now()
            kicked = False
            while index < count and jobs[index].submit <= now:
                mark = time.perf_counter()
                self._submit(jobs[index], now)
                if self.policy is None:
                    cluster_s += time.perf_counter() - mark
                index += 1
                kicked = True
            if now >= next_grace:
                self._graces(now)
            if now >= next_tide:
                self._tide(now)
            if self.policy is None:
                if kicked:
                    mark = time.perf_counter()
                    self.cluster.settle()
                    cluster_s += time.perf_counter() - mark
            elif (kicked and self.kick) or now >= next_cycle:
                self._cycle(now)
            if progress and now >= next_report:
                next_report += 86400.0
                print(
                    f"# {self.config.policy}{'' if self.config.quota == FIXED else '+' + self.config.quota}: day {(now - self.start) / 86400:.0f}, {index} submitted, "
                    f"{len(self.pending)} queued, {len(self.running)} running, "
                    f"{time.perf_counter() - began:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        self._integrate(clock.now())
        end = clock.now()
        self._end_lost_cluster(end)
        for rec in self.all_records:
            if rec.partial_since is not None and end > rec.partial_since:
                rec.partial_s += end - rec.partial_since
                rec.ever_partial = True
        self.stats["cluster_s"] += cluster_s
        self.stats["runtime_s"] = time.perf_counter() - began
        self.stats["cpu_s"] = time.process_time() - cpu_began
        self.stats["controller_steps"] = controllers.steps
        self.stats["tick_s"] = self.tick
        self.stats["kick"] = self.kick
        return ReplayResult(
            policy=self.config.policy,
            config=self.config,
            start=self.start,
            window_end=self.window_end,
            end=end,
            total_gpus=self.total_gpus,
            jobs=self.all_records,
            util_buckets=self.util_buckets,
            held_buckets=self.held_buckets,
            partial_node_gpu_s=self.partial_node_gpu_s,
            partial_quota_gpu_s=self.partial_quota_gpu_s,
            eta_samples=self.eta_samples,
            eta_cycles=self.stats["eta_cycles"],
            eta_pending_seen=self.eta_pending_seen,
            eta_with_estimate=self.eta_with_estimate,
            stats=self.stats,
            eta_with_note=self.eta_with_note,
            eta_oracle=self.eta_oracle,
        )

    def _drained(self, t: float) -> bool:
        """After the last arrival: nothing runs and nothing has started or ended for
        ``drain_idle_s`` (only the operator's retries against a full quota, or waiting jobs
        no cycle can admit): whatever is left is stuck for good."""
        if self.busy > 0:
            return False
        if not self.records:
            return True
        return t - max(self.last_progress, self.jobs[-1].submit if self.jobs else self.start) > self.config.drain_idle_s
