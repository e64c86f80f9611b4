"""The replay's plain data: its configuration, one record per job, and the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesim.resources import PYTORCHJOBS, TFJOBS
from queueing import InFlightJob, Workload
from queueing.planner import DEFAULT_ETA_HORIZON_S
from queueing.predictor import Prediction

from .mapping import elastic_workload_of, per_pod_requests, pods_of, workload_of
from .trace import TraceJob

INF = float("inf")
HOUR = 3600.0
NO_QUEUE = "none"

# Job states in the replay.
QUEUED, RELEASED, RUNNING, DONE, FAILED = "queued", "released", "running", "done", "failed"
# A grace event's preemptor for a job on a lent pool that leaves before its reclaim (checkpoints.py).
RECLAIM_NOTICE = -1

# Quota modes (issue #15).  fixed: each VC's ResourceQuota is its share (VC nodes x 8 GPUs)
# and that is all it gets.  borrow: the share is the VC's guarantee, the ResourceQuota (the
# ceiling) is the whole cluster, every VC lends to one cohort, and nothing is preempted.
# elastic: the same, and a VC within its guarantee reclaims what borrowers hold (preemption).
FIXED, BORROW, ELASTIC = "fixed", "borrow", "elastic"
QUOTA_MODES = (FIXED, BORROW, ELASTIC)
COHORT = "philly"

# Duration estimators (issue #16).  old: the median of the VC's last 20 runs of the same GPU
# count (history.DurationHistory), the figure the planner's history gives.  new: queueing's
# DurationPredictor (most specific history with enough runs, fed each job's run time when it
# finishes), and running jobs' likely ends given how long they have run (likely_total).
OLD_ESTIMATOR, NEW_ESTIMATOR = "old", "new"
ESTIMATORS = (OLD_ESTIMATOR, NEW_ESTIMATOR)
TAIL_COVERAGE = 0.99  # the run-time bound lent nodes are admitted by (JOBDASH_LENT_COVERAGE's default)
DEFAULT_CHECKPOINT_S = 1800.0  # kubesim's default checkpoint interval, and --checkpoint-every's
# Issue 49 (multi_cluster.py): with several clusters, one plan over them all (plan) or one
# planner per cluster, the first to admit a job winning it (first-admits, MultiKueue-like).
PLAN, FIRST_ADMITS = "plan", "first-admits"
DISPATCH_MODES = (PLAN, FIRST_ADMITS)


def run_label(
    policy: str,
    pin: bool = True,
    options: list[str] | None = None,
    quota: str = FIXED,
    grace: float = 60.0,
    limit: int = 3,
    factor: float = 1,
    estimator: str = NEW_ESTIMATOR,
    lent: float = 0.0,
    tide_blind: bool = False,
    bound_factor: float = 1.0,
    lent_coverage: float = TAIL_COVERAGE,
    elastic: float = 0.0,
    declared: bool = False,
    checkpointing: float = 0.0,
    checkpoint_every: float = 1800.0,
    checkpoint_blind: bool = False,
    defrag: float | None = None,
    defrag_movers: int = 8,
    clusters: int = 0,
    dispatch: str = PLAN,
) -> str:
    """A run's name, which is also its cache file's: ``priority``, ``priority+elastic``,
    ``fifo@x3``, ``priority+elastic[grace=300,limit=1]@x3``, ``priority+old-est`` (the
    old duration estimator; the new one is the default and goes unnamed),
    ``priority+no-pin+elastic@x3`` (issue #31: the scheduler alone places the pods; pinned
    placement, the dispatcher's default, goes unnamed, as ``none`` has no placement),
    ``priority+no-pin+elastic+ckpt0.5-blind@x3`` (issue 48: half the jobs checkpoint, the
    planner not told; ``[every=600]`` when not every 1800 s), ``priority+elastic+c2-first-admits@x3``
    (issue 49: the nodes in 2 clusters, a planner per cluster; ``+c2``: one plan over both)."""
    unpinned = not pin and policy != NO_QUEUE
    text = f"{policy}{'+no-pin' if unpinned else ''}" + (f"[{','.join(options)}]" if options else "")
    if quota != FIXED:
        text += f"+{quota}"
        knobs = []
        if quota == ELASTIC:  # (borrowing alone never preempts)
            knobs += [f"grace={grace:g}"] if grace != 60.0 else []
            knobs += [f"limit={limit}"] if limit != 3 else []
        text += f"[{','.join(knobs)}]" if knobs else ""
    if estimator != NEW_ESTIMATOR:
        text += f"+{estimator}-est"
    if lent:  # (issue 35) nodes lent each night; -blind: the planner is not told
        text += f"+lent{lent:g}{'-blind' if tide_blind else ''}"
        knobs = [f"cover={lent_coverage:g}"] if lent_coverage != TAIL_COVERAGE else []
        knobs += [f"bound={bound_factor:g}x"] if bound_factor != 1 else []
        text += f"[{','.join(knobs)}]" if knobs else ""
    if elastic:  # (issue 35) this share of the multi-GPU jobs are elastic PyTorchJobs
        text += f"+elastic{elastic:g}"
    if declared:  # (issue 48) every job declares its checkpoints (kubesim's interval)
        text += "+ckpt"
    if checkpointing:  # (issue 48) this share of the jobs checkpoints, the others never; -blind: not told
        text += f"+ckpt{checkpointing:g}{'-blind' if checkpoint_blind else ''}"
        text += f"[every={checkpoint_every:g}]" if checkpoint_every != DEFAULT_CHECKPOINT_S else ""
    if defrag is not None:  # (issue 48) moves that join scattered GPUs, at most this many GPU-hours lost a gang
        text += f"+defrag{defrag:g}" + (f"[movers={defrag_movers}]" if defrag_movers != 8 else "")
    if clusters:  # (issue 49) the nodes split in clusters; -first-admits: a planner per cluster
        text += f"+c{clusters}" + (f"-{dispatch}" if dispatch != PLAN else "")
    if factor != 1:
        text += f"@x{factor:g}"
    return text


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
    eta_oracle: bool = False  # also forecast each sampled cycle with the true run times (true_forecast.py)
    history_size: int = 20  # dispatch.snapshot_phase.HISTORY_SIZE
    history_window: int = 2000  # snapshot_phase.history() reads the last 2000 finished jobs
    # Pinned placement (issue #31, the dispatcher's default): templates held by the placement
    # gate, each gated pod sent to its planned node; False: the cluster's scheduler alone.
    pin: bool = True
    drain_idle_s: float = 6 * HOUR  # no queue: stop once nothing ran or changed this long after the last arrival
    util_bucket_s: float = HOUR
    quota: str = FIXED  # one of QUOTA_MODES
    grace_s: float = 60.0  # JOBDASH_PREEMPTION_GRACE_SECONDS: a victim runs this long before it is suspended
    preemption_limit: int = 3  # a job preempted this often is no longer a victim (elastic)
    # kubesim's default checkpoint interval: the work kept when a job is suspended
    checkpoint_s: float = DEFAULT_CHECKPOINT_S
    # Issue 48: every job declares that interval (jobdash.io/checkpoint-every), so the planner
    # chooses victims by the work since their last checkpoint; False: checkpoint-blind.
    checkpoints_declared: bool = False
    # Issue 48 (checkpoints.py): this share of the jobs (by a hash of the job id) checkpoints every
    # checkpoint_every_s (kubesim.io/checkpoint-seconds set on them: kubesim keeps their work and
    # reports each checkpoint on the object), the others never ("0": a stop loses the whole run);
    # 0: every job at kubesim's default, nothing reported (as before).  The checkpointing jobs
    # declare it to the planner and leave a notice at their next checkpoint, unless
    # checkpoint_blind: the planner is told nothing and notices last their whole time.
    checkpointing: float = 0.0
    checkpoint_every_s: float = DEFAULT_CHECKPOINT_S
    checkpoint_blind: bool = False
    # Issue 48 (queueing/defrag.py): moves, at most defrag_gpu_h GPU-hours lost by the movers of
    # one gang, a job moved at most once in defrag_window_s (JOBDASH_DEFRAG_*); None: off.
    defrag_gpu_h: float | None = None
    defrag_window_s: float = 3600.0
    defrag_movers: int = 8  # the most jobs moved for one gang (JOBDASH_DEFRAG_MAX_MOVERS)
    estimator: str = NEW_ESTIMATOR  # one of ESTIMATORS: the no-oracle duration estimate (issue #16)
    # Issue 35 (lending.py): this share of the nodes is lent each night 22:00-08:00 UTC, besides
    # the cluster; tide_blind: the planner is not told they are lent (the baseline).
    lent: float = 0.0
    tide_blind: bool = False
    lent_notice_s: float = 1800.0  # the lender's notice (JOBDASH_LENT_NOTICE_SECONDS)
    # The bound a queued job carries: its run time's conformal quantile at this coverage
    # (JOBDASH_LENT_COVERAGE), times lent_bound_factor.
    lent_coverage: float = TAIL_COVERAGE
    lent_bound_factor: float = 1.0
    # This share of the multi-GPU jobs (by a hash of the job id) are elastic PyTorchJobs
    # (elastic_jobs.py): 1-GPU Workers, minimum half of them, maximum all.
    elastic: float = 0.0
    # Issue 49 (multi_cluster.py): the nodes split into this many clusters of whole racks
    # (0: not split, no cluster label), and how jobs go to them: one plan (PLAN) or a
    # planner per cluster, the first that admits winning (FIRST_ADMITS).
    clusters: int = 0
    dispatch: str = PLAN
    # Issue 49, part 6 (lost_cluster.py): this cluster ("" none) silent from lose_at_s after
    # the replay's start for lose_for_s.
    lose_cluster: str = ""
    lose_at_s: float = 0.0
    lose_for_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.quota not in QUOTA_MODES:
            raise ValueError(f"quota must be one of {', '.join(QUOTA_MODES)}, got {self.quota!r}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {self.estimator!r}")
        if not 0 <= self.lent <= 1:
            raise ValueError(f"lent must be a share of the nodes, 0..1, got {self.lent!r}")
        if self.lent and self.quota != FIXED:
            raise ValueError("lent nodes are replayed with fixed quotas only")
        if self.lent and self.policy == NO_QUEUE:
            raise ValueError("lent nodes need a queue (a policy other than none)")
        if not 0 < self.lent_coverage < 1:
            raise ValueError(f"lent_coverage must lie strictly between 0 and 1, got {self.lent_coverage!r}")
        if not self.lent_bound_factor > 0:
            raise ValueError(f"lent_bound_factor must be positive, got {self.lent_bound_factor!r}")
        if not 0 <= self.elastic <= 1:
            raise ValueError(f"elastic must be a share of the multi-GPU jobs, 0..1, got {self.elastic!r}")
        if self.elastic and self.policy == NO_QUEUE:
            raise ValueError("elastic jobs need a queue (a policy other than none)")
        if self.elastic and self.quota == ELASTIC:  # (Preemption.shrink_to is not replayed yet)
            raise ValueError("elastic jobs are replayed with fixed or borrowing quotas only")
        if self.tide_blind and not self.lent:
            raise ValueError("tide_blind needs lent nodes (lent > 0)")
        if not 0 <= self.checkpointing <= 1:
            raise ValueError(f"checkpointing must be a share of the jobs, 0..1, got {self.checkpointing!r}")
        if not 0 < self.checkpoint_every_s < INF:
            raise ValueError(f"checkpoint_every_s must be positive, got {self.checkpoint_every_s!r}")
        if self.checkpoint_blind and not self.checkpointing:
            raise ValueError("checkpoint_blind needs jobs that checkpoint (checkpointing > 0)")
        if self.checkpointing and self.checkpoints_declared:
            raise ValueError(
                "checkpoints_declared (every job at kubesim's interval) or checkpointing (a share), not both"
            )
        if self.dispatch not in DISPATCH_MODES:
            raise ValueError(f"dispatch must be one of {', '.join(DISPATCH_MODES)}, got {self.dispatch!r}")
        if self.clusters < 0 or (self.dispatch != PLAN and not self.clusters):
            raise ValueError(f"clusters must be 0 (not split) or more, and given for {FIRST_ADMITS}")
        if self.clusters and (not self.pin or self.policy == NO_QUEUE or self.lent or self.elastic):
            # (kubesim is one cluster: unpinned pods could bind across; lent nodes and elastic
            # jobs' growth are not given clusters)
            raise ValueError("clusters need pinned placement and a queue, without lent nodes or elastic jobs")
        if self.lose_cluster and (not self.clusters or self.lose_at_s < 0 or not self.lose_for_s > 0):
            raise ValueError("lose_cluster needs clusters, lose_at_s >= 0 and lose_for_s > 0")


class JobRecord:
    __slots__ = (
        "job",
        "gang",
        "per_pod_gpus",
        "gpus",
        "requests",
        "state",
        "attempts",
        "estimate",
        "prediction",
        "released_at",
        "first_released_at",
        "started_at",
        "finished_at",
        "placement",
        "pods",
        "n_pods",
        "n_alive",
        "n_bound",
        "n_running",
        "n_gated",
        "bound_nodes",
        "inflight",
        "inflight_key",
        "partial_node",
        "partial_quota",
        "partial_since",
        "partial_s",
        "ever_partial",
        "releases",
        "run_started_at",
        "run_s",
        "requeued_s",
        "suspended_at",
        "suspended",
        "borrowing",
        "preemptions",
        "preempted_for",
        "preempt_at",
        "preempted_by",
        "lost_s",
        "lent_gpus",
        "kind",
        "workload",
        "elastic",
        "admitted",
        "work_left",
        "segments",
        "kept_s",
        "extras",
        "extras_since",
        "grown",
        "checkpoint_s",
        "declared_every_s",
        "checkpointed_at",
        "checkpoint_seen",
        "lost_reclaim_s",
        "lost_move_s",
        "lost_cluster_s",
        "moved_at",
        "preempt_cause",
        "cluster",
    )

    def __init__(
        self,
        job: TraceJob,
        elastic: bool = False,
        checkpoint_s: float | None = None,
        declared_every_s: float | None = None,
    ):
        self.job = job
        # An elastic job (elastic_jobs.py): a PyTorchJob of 1-GPU Workers; ``gang`` is the
        # Workers it runs now (``admitted`` at its release, more once grown, fewer once shrunk).
        self.elastic = elastic
        self.gang, self.per_pod_gpus = (job.gpus, 1) if elastic else pods_of(job.gpus)
        self.gpus = self.gang * self.per_pod_gpus
        self.requests = per_pod_requests(self.per_pod_gpus)
        self.kind = PYTORCHJOBS if elastic else TFJOBS
        # Checkpoints (issue 48, checkpoints.py): ``checkpoint_s`` the interval set on its
        # object for kubesim (None: kubesim's default, not set; 0: never), ``declared_every_s``
        # the one it tells the planner (None: nothing; its workload then says nothing either);
        # ``checkpointed_at`` the last jobdash.io/checkpointed-at read from its object (None:
        # none this run) and ``checkpoint_seen`` when the replay saw it (the clock's time).
        self.checkpoint_s = checkpoint_s
        self.declared_every_s = declared_every_s
        self.checkpointed_at: float | None = None
        self.checkpoint_seen: float | None = None
        workloads = elastic_workload_of if elastic else workload_of
        self.workload = workloads(job.gpus, declared_every_s)
        self.admitted = self.gang
        # Work accounting of an elastic job: work = duration x GPUs (pod-seconds), done at one
        # pod-second per Worker-second.  ``work_left``: what is left at the start of kubesim's
        # current run (``segments``: (since, Workers) of that run; None while its gang is not
        # whole); ``kept_s``: kubesim's kept work then (WorkClock.progress).
        self.work_left = job.duration * job.gpus
        self.segments: list[tuple[float, int]] | None = None
        self.kept_s = 0.0
        # Its running Workers above ``admitted`` (grown), and those of them on lent nodes, since.
        self.extras = (0, 0)
        self.extras_since = 0.0
        self.grown = False
        self.state = QUEUED
        self.attempts = 0
        self.estimate: float | None = None
        self.prediction: Prediction | None = None  # the new estimator's, at submission
        self.released_at: float | None = None
        self.first_released_at: float | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.placement: tuple = ()
        # name -> (alive, node it is bound to, running, index, gated, node it is selected for)
        self.pods: dict[str, tuple[bool, str | None, bool, int, bool, str]] = {}
        self.n_pods = self.n_alive = self.n_bound = self.n_running = 0
        self.n_gated = 0  # alive pods still held by the placement gate
        self.bound_nodes: dict[str, int] = {}  # node -> this job's alive pods bound there
        self.inflight: InFlightJob | None = None
        self.inflight_key: tuple | None = None
        self.partial_node = self.partial_quota = 0  # GPUs this job holds while its gang is incomplete
        self.partial_since: float | None = None
        self.partial_s = 0.0
        self.ever_partial = False
        # Preemption (elastic quota).  ``started_at`` is the first start; a preempted job runs
        # again from ``run_started_at``.  ``run_s``: seconds its gang ran, all runs told (work
        # lost included); ``requeued_s``: seconds it waited again after being suspended;
        # ``lost_s``: run seconds thrown away (since the last checkpoint) by its preemptions.
        self.releases = 0  # times released (a start timeout counts for one release)
        self.run_started_at: float | None = None
        self.run_s = 0.0
        self.requeued_s = 0.0
        self.suspended_at: float | None = None
        self.suspended = False  # its TFJob exists, suspended: the next release unsuspends it
        self.borrowing = False  # admitted beyond its namespace's guarantee
        self.preemptions = 0
        self.preempted_for: int | None = None  # in its grace period, leaving for this job
        self.preempt_at: float | None = None  # ... until then
        self.preempted_by: int | None = None  # the job it was last preempted for
        self.lost_s = 0.0
        self.lost_reclaim_s = 0.0  # ... of it by lent pools' reclaims (the rest: preemptions)
        self.lost_move_s = 0.0  # ... of it by moves (defragmentation)
        self.lost_cluster_s = 0.0  # ... of it by a lost cluster's jobs started again elsewhere (lost_cluster.py)
        self.moved_at: float | None = None  # when it was last moved
        self.preempt_cause = ""  # why it leaves for preempted_for (queueing.preemption)
        self.lent_gpus = 0  # GPUs of its current run on lent nodes (issue 35)
        self.cluster = ""  # the cluster of its release's pods (issue 49, multi_cluster.py)

    @property
    def in_flight_workload(self) -> Workload:
        """Its workload as released: an elastic job's with the Workers it runs now."""
        if self.elastic and self.gang != self.job.gpus:
            return self.workload.with_counts({"Worker": self.gang})
        return self.workload

    @property
    def wait_s(self) -> float | None:
        """Queueing delay: submission to the first start, plus every wait after a preemption."""
        if self.started_at is None:
            return None
        return self.started_at - self.job.submit + self.requeued_s


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
    # (job id, the forecast's start, forecast at, likely start, late bound): the forecast
    # through the StartCalibrator as it stood then
    eta_samples: list[tuple[int, float, float, float, float]]
    eta_cycles: int
    eta_pending_seen: int
    eta_with_estimate: int
    stats: dict[str, Any]
    eta_with_note: int = 0  # waiting jobs with no ETA but a note saying why
    # Per eta sample, the start the same forecast gives knowing every run time, and knowing the
    # waiting jobs' only (config.eta_oracle: true_forecast.py).
    eta_oracle: list[tuple[float | None, float | None]] = field(default_factory=list)
