"""The discrete-event replay: kubesim's cluster model on a ManualClock, queueing.plan() deciding.

What runs is the real code: every release is a TFJob created in kubesim through its API
(validation, quota admission), kubesim's training-operator creates the pods, its
scheduler binds them one at a time (not gang-aware, LeastAllocated), its kubelet starts
them after ``kubelet_delay_s`` and its work clock runs the job for the trace's duration
once the whole gang runs.  The replay reads the cluster the way the dispatcher's watch
cache does, from store events (a hook: an informer without lag), and builds each
cycle's ``Snapshot`` incrementally from that (see ``jobdash/dispatch/world.py`` for the
production version); it keeps ``PendingJob`` objects from arrival to release.

Time moves only by ``Cluster.advance``, from one event to the next: an arrival, a
controller deadline (a pod start, a job's end, an operator retry) or a cycle.  Cycles
follow the dispatcher's loop: a kick on every submission (not for ``seed``: the
article's leader only polls) and a tick ``tick_s`` after the previous cycle.  A tick
whose snapshot would be the previous one's (nothing changed in the cluster or the
queue, and no time threshold passed: a backoff ending, a start timeout, a head reaching
the reservation age, a promotion) would admit nothing, so it is skipped; the next cycle
lands on the same tick grid it would have in the loop.  Start timeouts take a released
job back and requeue it with exponential backoff like the tracker, Failed after
``max_attempts``.

``policy="none"`` is the cluster without jobdash: every job is created at submission.
"""

from __future__ import annotations

import gc
import heapq
import math
import sys
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kubesim.clock import ManualClock
from kubesim.cluster import Cluster
from kubesim.resources import NODES, PODS, RESOURCEQUOTAS, TFJOBS
from kubesim.tfjob import JOB_NAME_LABEL, REPLICA_INDEX_LABEL
from queueing import InFlightJob, NamespaceQuota, Node, PendingJob, RunningJob, Snapshot, plan
from queueing.eta import shape_key
from queueing.planner import DEFAULT_ETA_HORIZON_S
from queueing.policies import get_policy
from queueing.quantity import canonical
from queueing.reasons import Reason
from queueing.workload import PodSet, Workload

from .mapping import GPU, QUOTA_KEY, cluster_config, job_id_of, job_name, per_pod_requests, pods_of, tfjob_manifest, workload_of
from .oracle import OracleSjfPolicy
from .trace import TraceJob

INF = float("inf")
HOUR = 3600.0
NO_QUEUE = "none"
# Waiting for capacity: the first such job of a namespace is its head (planner._head_waits).
_HEAD_REASONS = frozenset({Reason.QUOTA_EXCEEDED, Reason.NO_NODE_FITS, Reason.RESERVED_FOR_OLDER_JOB})
_COUNT_TFJOBS = "count/tfjobs.kubeflow.org"

# Job states in the replay.
QUEUED, RELEASED, RUNNING, DONE, FAILED = "queued", "released", "running", "done", "failed"


@dataclass
class ReplayConfig:
    policy: str
    policy_options: dict[str, Any] = field(default_factory=dict)
    tick_s: float | None = None  # None: 10 s for seed (the article), else 2 s (JOBDASH_TICK_SECONDS)
    kick: bool | None = None  # a cycle at each submission; None: yes, except for seed
    start_timeout_s: float = 300.0  # JOBDASH_START_TIMEOUT_SECONDS
    max_attempts: int = 5  # JOBDASH_MAX_ATTEMPTS
    backoff_s: float = 10.0  # JOBDASH_BACKOFF_SECONDS, doubled per attempt
    backoff_cap_s: float = 600.0
    kubelet_delay_s: float = 1.0  # kubesim's default
    operator_max_backoff_s: float = 30.0  # kubesim's default
    eta_every_s: float | None = HOUR  # the first cycle of each such period also computes ETAs
    eta_horizon_s: float = DEFAULT_ETA_HORIZON_S
    eta_sample: int = 100  # ETAs kept per sampled cycle (spread over the queue)
    history_size: int = 20  # dispatch.world.HISTORY_SIZE
    history_window: int = 2000  # world.history() reads the last 2000 finished jobs
    pin: bool = False  # experiment: Workers restricted to the planned nodes (node affinity)
    drain_idle_s: float = 6 * HOUR  # no queue: stop once nothing ran or changed this long after the last arrival
    util_bucket_s: float = HOUR


class JobRecord:
    __slots__ = ("job", "gang", "per_pod_gpus", "gpus", "requests", "state", "attempts", "estimate",
                 "released_at", "first_released_at", "started_at", "finished_at", "placement", "pods",
                 "n_pods", "n_alive", "n_bound", "n_running", "bound_index", "inflight", "inflight_key",
                 "partial_node", "partial_quota", "partial_since", "partial_s", "ever_partial")

    def __init__(self, job: TraceJob):
        self.job = job
        self.gang, self.per_pod_gpus = pods_of(job.gpus)
        self.gpus = self.gang * self.per_pod_gpus
        self.requests = per_pod_requests(job.gpus)
        self.state = QUEUED
        self.attempts = 0
        self.estimate: float | None = None
        self.released_at: float | None = None
        self.first_released_at: float | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.placement: tuple = ()
        self.pods: dict[str, tuple[bool, str | None, bool, int]] = {}  # name -> (alive, node, running, index)
        self.n_pods = self.n_alive = self.n_bound = self.n_running = 0
        self.bound_index: set[int] = set()
        self.inflight: InFlightJob | None = None
        self.inflight_key: tuple | None = None
        self.partial_node = self.partial_quota = 0  # GPUs this job holds while its gang is incomplete
        self.partial_since: float | None = None
        self.partial_s = 0.0
        self.ever_partial = False


@dataclass
class ReplayResult:
    policy: str
    config: ReplayConfig
    start: float
    window_end: float
    end: float
    total_gpus: int
    jobs: list[JobRecord]
    util_buckets: list[float]  # busy GPU-seconds per bucket (GPUs of running gangs)
    held_buckets: list[float]  # GPU-seconds of bound pods per bucket
    partial_node_gpu_s: float
    partial_quota_gpu_s: float
    eta_samples: list[tuple[int, float, float]]  # (job id, predicted start, predicted at)
    eta_cycles: int
    eta_pending_seen: int
    eta_with_estimate: int
    stats: dict[str, Any]


def make_policy(name: str, **options: Any):
    if name == NO_QUEUE:
        return None
    if name == "sjf-oracle":
        return OracleSjfPolicy(**options)
    return get_policy(name, **options)


class Replay:
    def __init__(self, jobs: list[TraceJob], vc_nodes: dict[str, int], config: ReplayConfig,
                 start: float | None = None, window_end: float | None = None):
        self.jobs = jobs
        self.config = config
        self.policy = make_policy(config.policy, **config.policy_options)
        self.start = start if start is not None else (jobs[0].submit if jobs else 0.0)
        self.window_end = window_end if window_end is not None else (jobs[-1].submit if jobs else self.start)
        self.tick = config.tick_s if config.tick_s is not None else (10.0 if config.policy == "seed" else 2.0)
        self.kick = config.kick if config.kick is not None else config.policy != "seed"
        self.clock = ManualClock(self.start)
        self.cluster = Cluster(cluster_config(vc_nodes, self.start, start_delay_s=config.kubelet_delay_s,
                                              operator_max_backoff_s=config.operator_max_backoff_s), self.clock)
        self.cluster.store.hooks.append(self._on_event)
        # What the policy reads from the caller.
        self.oracle = isinstance(self.policy, OracleSjfPolicy)
        # Backfill reads every waiting job's estimate and the running jobs' expected ends.
        self.backfill = bool(getattr(self.policy, "backfill", False))
        self.uses_estimate = bool(getattr(self.policy, "uses_duration_estimate", False)) or self.backfill
        self.reservation_after = getattr(self.policy, "reservation_after_s", None)
        self.promote_after = getattr(self.policy, "promote_after_s", None)
        self.needs_running = bool(getattr(self.policy, "fair_share", False)) or self.backfill

        self.records: dict[int, JobRecord] = {}
        self.all_records: list[JobRecord] = []
        self.pending: dict[int, PendingJob] = {}
        self.inflight: dict[int, JobRecord] = {}
        self.running: dict[int, RunningJob] = {}
        # The cluster as the watch cache shows it.
        self.node_names = sorted((n["metadata"]["name"] for n in self.cluster.store.items(NODES)),
                                 key=lambda name: name)
        self.node_alloc: dict[str, dict[str, int]] = {name: {} for name in self.node_names}
        first = self.cluster.store.find(NODES, "", self.node_names[0]) if self.node_names else None
        self.allocatable = {name: canonical(name, value) for name, value in
                            ((first or {}).get("status") or {}).get("allocatable", {}).items()}
        self.total_gpus = self.allocatable.get(GPU, 0) * len(self.node_names)
        self.node_objs: dict[str, Node] = {}
        self.dirty_nodes: set[str] = set(self.node_names)
        self.nodes_tuple: tuple[Node, ...] = ()
        self.hard = {vc: nodes * 8 for vc, nodes in vc_nodes.items()}
        self.quota_used: dict[str, int] = {vc: 0 for vc in vc_nodes}
        self.quota_objs: dict[str, NamespaceQuota] = {}
        self.dirty_quotas: set[str] = set(vc_nodes)
        # Cycle scheduling.
        self.last_cycle = self.start
        self.changed_at: float | None = None  # first change since the last cycle
        self.timeouts: list[tuple[float, int, int]] = []  # (deadline, job id, attempt)
        self.backoffs: list[tuple[float, int]] = []
        self.promotions: list[tuple[float, int]] = []
        self.head_trigger: float | None = None
        # Backfill: per namespace, (expected end, job id) of its running jobs.  A running job
        # passing its expected end changes its namespace's shadow (it is then taken to end
        # any moment), so it is a time threshold like a head reaching the reservation age.
        self.expected_ends: dict[str, list[tuple[float, int]]] = {}
        self.shadow_trigger: float | None = None
        self.next_eta = self.start if config.eta_every_s else INF
        # Duration history: (namespace, shape) -> recent (finish number, run seconds).
        self.history: dict[tuple[str, str], deque] = {}
        self.finished_count = 0
        self.shapes: dict[int, str] = {}
        # Metrics.
        self.busy = 0  # GPUs of running gangs
        self.held = 0  # GPUs of bound pods
        self.partial_node = self.partial_quota = 0
        self.partial_node_gpu_s = self.partial_quota_gpu_s = 0.0
        self.metric_t = self.start
        self.util_buckets: list[float] = []
        self.held_buckets: list[float] = []
        self.last_progress = self.start
        self.eta_samples: list[tuple[int, float, float]] = []
        self.eta_cycles = self.eta_pending_seen = self.eta_with_estimate = 0
        self.stats: dict[str, Any] = {"cycles": 0, "eta_cycles": 0, "admitted": 0, "timeouts": 0, "gave_up": 0,
                                      "plan_s": 0.0, "eta_plan_s": 0.0, "snapshot_s": 0.0, "cluster_s": 0.0, "max_pending": 0,
                                      "queue_len_sum": 0, "skipped_ticks_note": "ticks with nothing new are skipped"}

    # -- the cluster as a watch cache sees it -------------------------------------------------

    def _on_event(self, rt, event) -> None:
        if rt is PODS:
            self._pod_event(event)
        elif rt is TFJOBS:
            self._tfjob_event(event)
        elif rt is RESOURCEQUOTAS:
            status = event.obj.get("status") or {}
            used = (status.get("used") or {}).get(QUOTA_KEY)
            if used is not None:
                ns = event.obj["metadata"]["namespace"]
                value = canonical(GPU, used)
                if self.quota_used.get(ns) != value:
                    self.quota_used[ns] = value
                    self.dirty_quotas.add(ns)

    def _changed(self, now: float) -> None:
        if self.changed_at is None:
            self.changed_at = now

    def _pod_event(self, event) -> None:
        obj = event.obj
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        job_id = job_id_of(labels.get(JOB_NAME_LABEL, ""))
        rec = self.records.get(job_id) if job_id is not None else None
        if rec is None:
            return
        name = meta["name"]
        old = rec.pods.get(name)
        if event.type == "DELETED":
            new = None
        else:
            phase = (obj.get("status") or {}).get("phase")
            alive = phase not in ("Succeeded", "Failed")
            node = (obj.get("spec") or {}).get("nodeName") if alive else None
            new = (alive, node, phase == "Running", int(labels.get(REPLICA_INDEX_LABEL, 0)))
        if old == new:
            return
        now = self.clock.now()
        self._changed(now)
        self._integrate(now)
        if old is not None:
            rec.n_pods -= 1
            rec.n_alive -= old[0]
            rec.n_running -= old[2]
            if old[1] is not None:
                rec.n_bound -= 1
                rec.bound_index.discard(old[3])
                self._charge(old[1], rec.requests, -1)
        if new is None:
            rec.pods.pop(name, None)
        else:
            rec.pods[name] = new
            rec.n_pods += 1
            rec.n_alive += new[0]
            rec.n_running += new[2]
            if new[1] is not None:
                rec.n_bound += 1
                rec.bound_index.add(new[3])
                self._charge(new[1], rec.requests, 1)
        self._partial(rec, now)
        if rec.state == RELEASED and rec.n_running >= rec.gang:
            self._started(rec, now)

    def _charge(self, node: str, requests: dict[str, int], sign: int) -> None:
        alloc = self.node_alloc[node]
        for key, amount in requests.items():
            alloc[key] = alloc.get(key, 0) + sign * amount
        self.held += sign * requests.get(GPU, 0)
        self.dirty_nodes.add(node)

    def _partial(self, rec: JobRecord, now: float) -> None:
        """GPUs a job holds while its gang is incomplete: bound pods hold nodes, created pods
        hold quota, and the job cannot make progress until every pod is bound."""
        partial = rec.state in (RELEASED,) and 0 < rec.n_alive and rec.n_bound < rec.gang
        node = rec.n_bound * rec.per_pod_gpus if partial else 0
        quota = rec.n_alive * rec.per_pod_gpus if partial else 0
        self.partial_node += node - rec.partial_node
        self.partial_quota += quota - rec.partial_quota
        rec.partial_node, rec.partial_quota = node, quota
        if partial and rec.partial_since is None:
            rec.partial_since = now
        elif not partial and rec.partial_since is not None:
            if now > rec.partial_since:  # not just the instant between a pod's create and its binding
                rec.partial_s += now - rec.partial_since
                rec.ever_partial = True
            rec.partial_since = None

    def _started(self, rec: JobRecord, now: float) -> None:
        rec.state = RUNNING
        rec.started_at = now
        self.inflight.pop(rec.job.id, None)
        rec.inflight = None
        self.busy += rec.gpus
        self.last_progress = now
        self._partial(rec, now)
        if self.policy is not None:
            expected_end = None
            if self.backfill:
                # The estimate when it starts (the dispatcher would store it with the job).
                estimate = self.estimate(rec.job.vc, rec.job.gpus)
                if estimate is not None:
                    expected_end = now + estimate
                    heapq.heappush(self.expected_ends.setdefault(rec.job.vc, []), (expected_end, rec.job.id))
            self.running[rec.job.id] = RunningJob(rec.job.id, rec.job.vc, workload_of(rec.job.gpus), started_at=now,
                                                  expected_end=expected_end)

    def _tfjob_event(self, event) -> None:
        obj = event.obj
        job_id = job_id_of(obj["metadata"]["name"])
        rec = self.records.get(job_id) if job_id is not None else None
        if rec is None:
            return
        now = self.clock.now()
        self._changed(now)
        if event.type != "MODIFIED" or rec.state != RUNNING:
            return
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "Succeeded" and condition.get("status") == "True":
                self._finished(rec, now)
                return

    def _finished(self, rec: JobRecord, now: float) -> None:
        self._integrate(now)
        rec.state = DONE
        rec.finished_at = now
        self.busy -= rec.gpus
        self.last_progress = now
        self.running.pop(rec.job.id, None)
        del self.records[rec.job.id]
        rec.pods = {}
        self.finished_count += 1
        key = (rec.job.vc, self._shape(rec.job.gpus))
        runs = self.history.get(key)
        if runs is None:
            runs = self.history[key] = deque(maxlen=self.config.history_size)
        runs.appendleft((self.finished_count, now - rec.started_at))

    # -- metrics over time --------------------------------------------------------------------

    def _integrate(self, now: float) -> None:
        t = self.metric_t
        if now <= t:
            return
        self.partial_node_gpu_s += self.partial_node * (now - t)
        self.partial_quota_gpu_s += self.partial_quota * (now - t)
        size = self.config.util_bucket_s
        busy, held = self.busy, self.held
        buckets, held_buckets = self.util_buckets, self.held_buckets
        while t < now:
            index = int((t - self.start) // size)
            while len(buckets) <= index:
                buckets.append(0.0)
                held_buckets.append(0.0)
            upto = min(now, self.start + (index + 1) * size)
            buckets[index] += busy * (upto - t)
            held_buckets[index] += held * (upto - t)
            t = upto
        self.metric_t = now

    # -- duration history (what world.history() gives the planner) -----------------------------

    def _shape(self, gpus: int) -> str:
        shape = self.shapes.get(gpus)
        if shape is None:
            shape = self.shapes[gpus] = shape_key(workload_of(gpus))
        return shape

    def _recent(self, runs) -> tuple[float, ...]:
        cut = self.finished_count - self.config.history_window
        return tuple(seconds for number, seconds in runs if number > cut)

    def estimate(self, vc: str, gpus: int) -> float | None:
        """eta.duration_of's history branch: the median of the namespace's recent runs of this shape."""
        runs = self.history.get((vc, self._shape(gpus)))
        recent = self._recent(runs) if runs else ()
        return float(statistics.median(recent)) if recent else None

    def _history_map(self) -> dict[tuple[str, str], tuple[float, ...]]:
        result = {}
        for key, runs in self.history.items():
            recent = self._recent(runs)
            if recent:
                result[key] = recent
        return result

    # -- arrivals, releases, take-backs --------------------------------------------------------

    def _submit(self, job: TraceJob, now: float) -> None:
        rec = JobRecord(job)
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
        if self.uses_estimate:
            return rec.estimate
        return None

    def _enqueue(self, rec: JobRecord, backoff_until: float | None) -> None:
        rec.state = QUEUED
        job = rec.job
        self.pending[job.id] = PendingJob(job.id, job.vc, 0, job.submit, workload_of(job.gpus), attempts=rec.attempts,
                                          backoff_until=backoff_until, expected_duration=self._expected(rec))
        if backoff_until is not None:
            heapq.heappush(self.backoffs, (backoff_until, job.id))

    def _create(self, rec: JobRecord, now: float, placement) -> None:
        rec.state = RELEASED
        rec.released_at = now
        if rec.first_released_at is None:
            rec.first_released_at = now
        rec.placement = tuple(placement or ())
        nodes = tuple(node for _, _, node in rec.placement) if self.config.pin and rec.placement else None
        self.cluster.create_tfjob(tfjob_manifest(rec.job.id, rec.job.vc, rec.job.gpus, rec.job.duration, nodes))
        if self.policy is not None:
            self.inflight[rec.job.id] = rec
            heapq.heappush(self.timeouts, (now + self.config.start_timeout_s, rec.job.id, rec.attempts))

    def _take_back(self, rec: JobRecord, now: float) -> None:
        """The tracker's start timeout: delete the TFJob (its pods go with it), requeue with backoff."""
        self.stats["timeouts"] += 1
        self.cluster.api.delete(TFJOBS, rec.job.vc, job_name(rec.job.id))
        self.inflight.pop(rec.job.id, None)
        rec.inflight = None
        rec.attempts += 1
        self._partial(rec, now)
        if rec.attempts >= self.config.max_attempts:
            self.stats["gave_up"] += 1
            rec.state = FAILED
            del self.records[rec.job.id]
            return
        backoff = min(self.config.backoff_cap_s, self.config.backoff_s * 2 ** max(0, rec.attempts - 1))
        self._enqueue(rec, now + backoff)

    # -- one admission cycle -------------------------------------------------------------------

    def _nodes(self) -> tuple[Node, ...]:
        if self.dirty_nodes:
            for name in self.dirty_nodes:
                alloc = {key: amount for key, amount in self.node_alloc[name].items() if amount}
                self.node_objs[name] = Node(name, self.allocatable, alloc, labels={"kubernetes.io/hostname": name})
            self.dirty_nodes.clear()
            self.nodes_tuple = tuple(self.node_objs[name] for name in self.node_names)
        return self.nodes_tuple

    def _quotas(self) -> dict[str, NamespaceQuota]:
        for ns in self.dirty_quotas:
            self.quota_objs[ns] = NamespaceQuota(ns, {QUOTA_KEY: self.hard[ns]}, {QUOTA_KEY: self.quota_used[ns]})
        self.dirty_quotas.clear()
        return self.quota_objs

    _outstanding_cache: dict[tuple[int, int], dict[str, int]] = {}

    def _outstanding(self, gpus: int, missing: int) -> dict[str, int]:
        """world._outstanding: the quota demand of the pods not created yet (the TFJob exists)."""
        key = (gpus, missing)
        found = self._outstanding_cache.get(key)
        if found is None:
            workload = workload_of(gpus)
            pod_sets = tuple(PodSet(ps.role, missing, ps.requests, ps.limits) for ps in workload.pod_sets)
            demand = Workload(workload.kind, workload.api_version, workload.name, workload.namespace,
                              pod_sets).quota_demand()
            demand.pop(_COUNT_TFJOBS, None)
            found = self._outstanding_cache[key] = {k: v for k, v in demand.items() if v}
        return found

    def _in_flight(self, rec: JobRecord) -> InFlightJob:
        key = (rec.n_pods, frozenset(rec.bound_index))
        if rec.inflight is None or rec.inflight_key != key:
            placements = tuple(p for p in rec.placement if p[1] not in rec.bound_index)
            rec.inflight = InFlightJob(rec.job.id, rec.job.vc, workload_of(rec.job.gpus), placements=placements,
                                       outstanding=self._outstanding(rec.job.gpus, rec.gang - rec.n_pods),
                                       released_at=rec.released_at or 0.0)
            rec.inflight_key = key
        return rec.inflight

    def _cycle(self, now: float) -> None:
        stats = self.stats
        stats["cycles"] += 1
        self.changed_at = None
        self.last_cycle = now
        with_eta = now >= self.next_eta
        began = time.perf_counter()
        snapshot = Snapshot(
            now=now,
            pending=tuple(self.pending.values()),
            in_flight=tuple(self._in_flight(rec) for rec in self.inflight.values()),
            running=tuple(self.running.values()) if (self.needs_running or with_eta) else (),
            quotas=self._quotas(),
            nodes=self._nodes(),
            node_fit=True,
            history=self._history_map() if with_eta else {},
        )
        planned_at = time.perf_counter()
        result = plan(snapshot, self.policy, eta_horizon_s=self.config.eta_horizon_s if with_eta else 0.0)
        done_at = time.perf_counter()
        stats["snapshot_s"] += planned_at - began
        stats["plan_s"] += done_at - planned_at
        if with_eta:
            stats["eta_plan_s"] += done_at - planned_at
        stats["max_pending"] = max(stats["max_pending"], len(snapshot.pending))
        stats["queue_len_sum"] += len(snapshot.pending)
        if with_eta:
            self._sample_etas(now, result)
            self.next_eta = (math.floor((now - self.start) / self.config.eta_every_s) + 1) * self.config.eta_every_s + self.start
        for admission in result.admissions:
            rec = self.records[admission.job_id]
            del self.pending[admission.job_id]
            self._create(rec, now, admission.placement)
        stats["admitted"] += len(result.admissions)
        if result.admissions:
            began = time.perf_counter()
            self.cluster.settle()
            stats["cluster_s"] += time.perf_counter() - began
        self._track(now)
        self._heads(result, now)

    def _sample_etas(self, now: float, result) -> None:
        stats = self.stats
        stats["eta_cycles"] += 1
        waiting = [status for status in result.pending.values() if not status.reason.never]
        self.eta_pending_seen += len(waiting)
        self.eta_with_estimate += sum(1 for status in waiting if status.eta is not None)
        with_eta = [status for status in waiting if status.eta is not None]
        step = max(1, len(with_eta) // self.config.eta_sample)
        for status in with_eta[::step]:
            self.eta_samples.append((status.job_id, status.eta, now))

    def _track(self, now: float) -> None:
        """Start timeouts (dispatch/tracker.py), checked once per cycle like the tracker."""
        timeouts = self.timeouts
        while timeouts and timeouts[0][0] <= now:
            _, job_id, attempt = heapq.heappop(timeouts)
            rec = self.records.get(job_id)
            if rec is not None and rec.state == RELEASED and rec.attempts == attempt:
                self._take_back(rec, now)

    def _heads(self, result, now: float) -> None:
        """The next instant a head's waiting time reaches the reservation age (planner._head_waits):
        the only way time alone changes a submission-ordered plan."""
        self.head_trigger = None
        self.shadow_trigger = None
        after = self.reservation_after
        if after is None and not self.backfill:
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
        if after is None:
            return
        triggers = [self.pending[job_id].submitted_at + after for _, job_id in heads.values() if job_id in self.pending]
        later = [t for t in triggers if t > now]
        self.head_trigger = min(later) if later else None

    def _next_trigger(self) -> float | None:
        """The earliest time threshold after the last cycle that can change its plan."""
        last = self.last_cycle
        candidates = []
        timeouts = self.timeouts  # stale: the job started (or was taken back) since
        while timeouts and (timeouts[0][0] <= last or timeouts[0][1] not in self.inflight
                            or self.inflight[timeouts[0][1]].attempts != timeouts[0][2]):
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
        if not self.pending and not self.inflight:
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
            t = min(next_arrival, next_cycle, INF if deadline is None else deadline)
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
            if self.policy is None:
                if kicked:
                    mark = time.perf_counter()
                    self.cluster.settle()
                    cluster_s += time.perf_counter() - mark
            elif (kicked and self.kick) or now >= next_cycle:
                self._cycle(now)
            if progress and now >= next_report:
                next_report += 86400.0
                print(f"# {self.config.policy}: day {(now - self.start) / 86400:.0f}, {index} submitted, "
                      f"{len(self.pending)} queued, {len(self.running)} running, "
                      f"{time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
        self._integrate(clock.now())
        end = clock.now()
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
            policy=self.config.policy, config=self.config, start=self.start, window_end=self.window_end, end=end,
            total_gpus=self.total_gpus, jobs=self.all_records, util_buckets=self.util_buckets,
            held_buckets=self.held_buckets, partial_node_gpu_s=self.partial_node_gpu_s,
            partial_quota_gpu_s=self.partial_quota_gpu_s, eta_samples=self.eta_samples,
            eta_cycles=self.stats["eta_cycles"], eta_pending_seen=self.eta_pending_seen,
            eta_with_estimate=self.eta_with_estimate, stats=self.stats,
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
