"""Celery tasks: each only calls the dispatcher. The gateway (and its watch cache) lives
once per worker process and is started on first use."""

import logging
import logging.config
import os
import threading

import redis
from celery import shared_task, signals
from django.conf import settings

from jobdash import logs, metrics
from jobdash.cluster.factory import gateway_from_settings
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.failures import CycleFailed
from jobdash.dispatch.writers import idle_bound, transitions

log = logging.getLogger(__name__)
_lock = threading.Lock()
_dispatcher: Dispatcher | None = None
KICK_KEY = "jobdash:kick"


def dispatcher() -> Dispatcher:
    global _dispatcher
    with _lock:
        if _dispatcher is None:
            gateway = gateway_from_settings()
            # Cluster news (a pod finished, a quota changed) asks for a cycle, debounced.
            gateway.start(on_event=lambda event: _kick_quietly(), timeout=60)
            _dispatcher = Dispatcher(gateway)
            idle_bound.bound_paused_transactions()
        return _dispatcher


@shared_task(name="jobdash.admission_cycle", ignore_result=True)
def admission_cycle(term: int | None = None) -> dict:
    """Emitted by the leader's beat with its term; kicks carry none and use the recorded one."""
    term = term or transitions.current_term()
    if not term:
        return {"skipped": "no leader has recorded a term yet"}
    running = dispatcher()
    try:
        with running.failures.watch(term):
            result = running.cycle(term)
    except CycleFailed as failed:  # logged once and recorded: no traceback from Celery every tick
        return {"failed": str(failed)}
    return {"skipped": result.skipped, "pending": result.pending, "admitted": result.admitted, **result.released}


@shared_task(name="jobdash.reconcile", ignore_result=True)
def reconcile(term: int) -> dict:
    logs.bind_term(term)
    return dispatcher().reconcile(term)


@signals.setup_logging.connect
def _logging(loglevel=None, **kwargs) -> None:
    """The worker and beat log as the settings say (JOBDASH_LOG_FORMAT), not in Celery's format."""
    logging.config.dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger().setLevel(loglevel)


# JOBDASH_METRICS_PORT: with PROMETHEUS_MULTIPROC_DIR the worker's main process serves every
# pool process's metrics; without, the pool process that runs the cycles serves its own
# (the deployment runs one: --concurrency 1).
@signals.worker_init.connect
def _metrics_in_main(**kwargs) -> None:
    if metrics.multiprocess():
        metrics.serve()


@signals.worker_process_init.connect
def _metrics_in_pool_process(**kwargs) -> None:
    if not metrics.multiprocess():
        metrics.serve()


def _kick_quietly() -> None:
    try:
        kick_cycle()
    except Exception as error:  # the broker being away must not kill the watch thread
        log.warning("could not kick a cycle: %s", error)


_clients: dict[tuple[int, str], redis.Redis] = {}


def _redis(url: str) -> redis.Redis:
    """One client (and connection pool) per process and URL: a new client per kick opened
    a new TCP connection for every submission."""
    key = (os.getpid(), url)  # a forked child must not share its parent's sockets
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = redis.Redis.from_url(url, socket_timeout=1)
    return client


def kick_cycle() -> bool:
    """Send one cycle for a burst of changes: the first kick in a debounce window sends a
    task due at the window's end; the others find the key set and do nothing."""
    window = settings.JOBDASH_KICK_DEBOUNCE_SECONDS
    if not _redis(settings.CELERY_BROKER_URL).set(KICK_KEY, "1", nx=True, px=max(1, int(window * 1000))):
        return False
    admission_cycle.apply_async(countdown=window)
    return True


@shared_task(name="jobdash.retention_sweep", ignore_result=True)
def retention_sweep(term: int | None = None) -> dict:
    """Daily, emitted by the leader's beat (JOBDASH_RETENTION_DAYS; 0: not scheduled)."""
    from jobdash.usage import retention

    return retention.sweep().as_dict()
