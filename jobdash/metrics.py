"""Prometheus metrics: every `jobdash_*` family, the database collector, `/metrics` and the
dispatcher's own HTTP port (docs/operations.md, "Metrics and logs").

Two places export them:
- the web app's `/metrics` (`metrics_view`, answered by `MetricsEndpoint` before the host
  check): the job and queue gauges, read from the database at each scrape (`JobsCollector`,
  right under gunicorn too since nothing is kept in memory), and what the web process
  itself observed; under gunicorn with PROMETHEUS_MULTIPROC_DIR set, every worker's
  values (prometheus_client's multiprocess mode);
- the dispatcher's processes (the Celery worker and beat, `run_dispatcher`, `run_embedded`)
  and the webhook's listener: `serve()` on JOBDASH_METRICS_PORT (0: off).

The call sites in the dispatcher, the leader loop and the webhook are one line each: the
`observe_*` / `count_*` / `set_*` helpers below.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

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

# The database families (JobsCollector); queued jobs no cycle has looked at yet have no reason.
NO_REASON_YET = "New"


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


def set_leader(instance: str, term: int | None, leading: bool) -> None:
    """Called by the leader loop when this process takes (term) or loses leadership."""
    LEADER.labels(instance).set(1 if leading else 0)
    if term is not None:
        LEADER_TERM.labels(instance).set(term)


def observe_review(kind: str, allowed: bool, seconds: float) -> None:
    WEBHOOK_REVIEW.labels(kind or "unknown", "true" if allowed else "false").observe(seconds)


# --- the database families ---


class JobsCollector(Collector):
    """`jobdash_jobs` and `jobdash_queue_length`, one GROUP BY each per scrape. A (namespace,
    kind) that has jobs shows every state, zeros included, so a series does not vanish when
    its last job moves on."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.db.models import Count

        from jobdash.jobs.models import Job, State

        jobs = GaugeMetricFamily(
            "jobdash_jobs", "Jobs in the database by namespace, kind and state.", labels=["namespace", "kind", "state"]
        )
        counts: dict[tuple[str, str], dict[str, int]] = {}
        rows = Job.objects.values_list("namespace__name", "kind", "state").annotate(n=Count("id")).order_by()
        for namespace, kind, state, n in rows:
            counts.setdefault((namespace, kind), dict.fromkeys(State.values, 0))[state] = n
        for (namespace, kind), by_state in sorted(counts.items()):
            for state, n in by_state.items():
                jobs.add_metric([namespace, kind, state], n)
        yield jobs
        queue = GaugeMetricFamily(
            "jobdash_queue_length",
            f"Queued jobs by namespace and the reason they wait (reason={NO_REASON_YET}: no cycle has planned them yet).",
            labels=["namespace", "reason"],
        )
        queued = (
            Job.objects.filter(state=State.QUEUED)
            .values_list("namespace__name", "reason")
            .annotate(n=Count("id"))
            .order_by()
        )
        merged: dict[tuple[str, str], int] = {}
        for namespace, reason, n in queued:
            key = (namespace, reason or NO_REASON_YET)
            merged[key] = merged.get(key, 0) + n
        for (namespace, reason), n in sorted(merged.items()):
            queue.add_metric([namespace, reason], n)
        yield queue


class _Union(Collector):
    def __init__(self, *collectors: Any):
        self.collectors = collectors

    def collect(self) -> Iterator[Any]:
        for collector in self.collectors:
            yield from collector.collect()


def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def process_registry() -> CollectorRegistry:
    """This process's metrics, or under PROMETHEUS_MULTIPROC_DIR every process's of the
    directory (a registry made per scrape, as prometheus_client's multiprocess mode asks)."""
    if not multiprocess():
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def web_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Union(process_registry(), JobsCollector()))
    return registry


# --- /metrics on the web app ---


def _token_refusal(request: HttpRequest) -> HttpResponse | None:
    token = getattr(settings, "JOBDASH_METRICS_TOKEN", "")
    if not token:
        return None
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        response = HttpResponse("a bearer token is required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="jobdash metrics"'
        return response
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return HttpResponse("wrong token\n", status=403, content_type="text/plain")
    return None


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format; no login (operators scrape from inside the cluster), a
    bearer token when JOBDASH_METRICS_TOKEN is set."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    refused = _token_refusal(request)
    if refused is not None:
        return refused
    try:
        body = generate_latest(web_registry())
    except DatabaseError as error:
        log.warning("metrics: the database is unavailable: %s", error)
        return HttpResponse("the database is unavailable\n", status=503, content_type="text/plain")
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


class MetricsEndpoint:
    """Answers `/metrics` before the rest of the middleware: a scrape by the pod's address
    (Prometheus' Host header) is not refused by ALLOWED_HOSTS, and needs no session or CSRF."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == "/metrics":
            return metrics_view(request)
        return self.get_response(request)


# --- the HTTP port of the dispatcher's processes and the webhook's ---

_served: dict[int, Any] = {}  # pid -> the server, one per process
_serve_lock = threading.Lock()


def serve(port: int | None = None, addr: str = "0.0.0.0") -> Any | None:
    """Export this process's metrics (under PROMETHEUS_MULTIPROC_DIR: its directory's) on
    `port`, by default JOBDASH_METRICS_PORT, where 0 means off (an explicit 0: an ephemeral
    port, for tests). Once per process; a port already taken (another worker of the same
    pod got it first) is logged and skipped. Returns the server (server_address has the
    port) or None."""
    if port is None:
        port = settings.JOBDASH_METRICS_PORT
        if not port:
            return None
    with _serve_lock:
        if os.getpid() in _served:
            return _served[os.getpid()]
        try:
            server, _ = start_http_server(port, addr=addr, registry=process_registry())
        except OSError as error:
            log.info("metrics: not serving on port %s in this process: %s", port, error)
            return None
        _served[os.getpid()] = server
        log.info("metrics: serving on %s:%s", addr, server.server_address[1])
        return server


def gunicorn_child_exit(server: Any, worker: Any) -> None:
    """For gunicorn.conf.py (`child_exit = jobdash.metrics.gunicorn_child_exit`) under
    PROMETHEUS_MULTIPROC_DIR: a dead worker's live gauges leave with it."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        mp.mark_process_dead(worker.pid)
