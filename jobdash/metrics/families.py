"""The jobdash_* families the processes observe themselves, and the one-line helpers the
dispatcher, the leader loop and the webhook call (`metrics.observe_cycle(...)`, re-exported
by the package). The database families are collectors.py's; exposition.py serves both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from prometheus_client import Counter, Gauge, Histogram

# --- the families (names and labels are a contract: the Grafana dashboard reads them) ---

MINUTES = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400)
ADMISSION_WAIT = Histogram(
    "jobdash_admission_wait_seconds",
    "Seconds from a job's submission to its release to the cluster, observed at each release "
    "(a job released again after a requeue or a preemption counts again, from its submission).",
    ["namespace", "kind"],
    buckets=MINUTES,
)
START_LATENCY = Histogram(
    "jobdash_start_latency_seconds",
    "Seconds from a job's release to all of its pods running, observed when the tracker marks it Running.",
    ["namespace", "kind"],
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600),
)
CYCLE_PHASE = Histogram(
    "jobdash_cycle_phase_seconds",
    "Seconds each phase of each admission cycle took (snapshot, plan, release, preempt, statuses, track, sent, publish).",
    ["phase"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
RELEASES = Counter(
    "jobdash_releases",
    "Jobs sent to the cluster by outcome: created (or unsuspended), requeued (a refusal for now), "
    "failed (a permanent refusal), fenced (a newer leader owns the job).",
    ["outcome"],
)
PREEMPTIONS = Counter(
    "jobdash_preemptions",
    "Running jobs told to leave to make room for another (victims marked), by the victim's namespace.",
    ["namespace"],
)
REPLACEMENTS = Counter(
    "jobdash_replacements",
    "Gangs whose pods lost their planned nodes (failed, cordoned before they ran, gone) and were placed again.",
)
OFF_PLAN = Gauge(
    "jobdash_pods_off_plan",
    "Pods of released and running jobs bound to a node their job's placement does not name (should be 0), "
    "as the leader's last cycle saw them.",
    multiprocess_mode="max",
)
LEADER = Gauge(
    "jobdash_leader",
    "1 while this process (instance: the election's holder name, host:pid) leads, else 0.",
    ["instance"],
    multiprocess_mode="max",
)
LEADER_TERM = Gauge(
    "jobdash_leader_term",
    "The term of this process's current or last leadership (the fencing token).",
    ["instance"],
    multiprocess_mode="max",
)
WEBHOOK_REVIEW = Histogram(
    "jobdash_webhook_review_seconds",
    "Seconds the admission webhook took to decide one AdmissionReview, by the object's kind "
    "and whether it was allowed.",
    ["kind", "allowed"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
START_ESTIMATE_ERROR = Histogram(
    "jobdash_start_estimate_error_seconds",
    "Absolute error of a job's first likely start (eta_first): |actual start - eta_first| in "
    "seconds, observed when it starts (jobs never preempted). Early and late count alike; "
    "jobdash_start_within_late_bound_total says whether starts kept to their 90 % late bound.",
    ["namespace"],
    buckets=(10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400),
)
WITHIN_LATE_BOUND = Counter(
    "jobdash_start_within_late_bound",
    "Jobs that started with a first 90 % late bound (eta_first_late): within=true if they "
    "started by it, false if after.",
    ["namespace", "within"],
)


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else (end - start).total_seconds()


# --- the helpers the dispatcher, the leader loop and the webhook call ---


def observe_released(job_ids: Iterable[int]) -> None:
    """Admission waits of jobs just claimed (release.start)."""
    ids = list(job_ids)
    if not ids:
        return
    from jobdash.jobs.models import Job

    rows = Job.objects.filter(pk__in=ids).values_list("namespace__name", "kind", "submitted_at", "released_at")
    for namespace, kind, submitted_at, released_at in rows:
        wait = _seconds(submitted_at, released_at)
        if wait is not None:
            ADMISSION_WAIT.labels(namespace, kind).observe(max(0.0, wait))


class StartedJob(Protocol):
    """What observe_started reads of a job (the dispatcher's ActiveJob): times in seconds
    since the epoch."""

    @property
    def namespace(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def preemptions(self) -> int: ...
    @property
    def released_at(self) -> float | None: ...
    @property
    def eta_first(self) -> float | None: ...
    @property
    def eta_first_late(self) -> float | None: ...


def observe_started(jobs: Iterable[StartedJob], started_at: datetime) -> None:
    """Start latency, and the first start estimate's error, of jobs the tracker just marked
    Running at `started_at` (their times in seconds since the epoch)."""
    started = started_at.timestamp()
    for job in jobs:
        namespace, first, first_late = job.namespace, job.eta_first, job.eta_first_late
        if job.released_at is not None:
            START_LATENCY.labels(namespace, job.kind).observe(max(0.0, started - job.released_at))
        if job.preemptions:
            continue  # a preempted job's first estimate was for its first start
        if first is not None:
            START_ESTIMATE_ERROR.labels(namespace).observe(abs(started - first))
        if first_late is not None:
            WITHIN_LATE_BOUND.labels(namespace, "true" if started <= first_late else "false").inc()


def observe_cycle(phases_ms: Mapping[str, float]) -> None:
    """A cycle's phase timings (CycleResult.phases, in milliseconds)."""
    for phase, ms in phases_ms.items():
        CYCLE_PHASE.labels(phase).observe(ms / 1000.0)


def count_releases(outcomes: Mapping[str, int]) -> None:
    """A cycle's release counts by outcome (release.Sending.finish)."""
    for outcome, count in outcomes.items():
        if count:
            RELEASES.labels(outcome).inc(count)


def count_preemption(namespace: str) -> None:
    PREEMPTIONS.labels(namespace).inc()


def count_replacements(count: int) -> None:
    if count:
        REPLACEMENTS.inc(count)


def set_off_plan(count: int) -> None:
    OFF_PLAN.set(count)


def set_leader(instance: str, term: int | None, leading: bool) -> None:
    """Called by the leader loop when this process takes (term) or loses leadership."""
    LEADER.labels(instance).set(1 if leading else 0)
    if term is not None:
        LEADER_TERM.labels(instance).set(term)


def observe_review(kind: str, allowed: bool, seconds: float) -> None:
    WEBHOOK_REVIEW.labels(kind or "unknown", "true" if allowed else "false").observe(seconds)
