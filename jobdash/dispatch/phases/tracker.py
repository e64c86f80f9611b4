"""Follow released jobs in the cluster until they finish, from the gateway's watch cache.

- Released -> Running once every pod of the gang runs (a controller's Running condition
  alone is not enough: the training-operator sets it as soon as one Worker runs);
- -> Succeeded / Failed from the object's status, as its kind's adapter reads it;
- an object deleted behind our back -> Failed, after a direct read confirms it (the cache
  may lag a create);
- start timeout: Released but not Running for too long -> taken back (deleted, or
  re-suspended in unsuspend mode), requeued with exponential backoff, Failed after the
  attempt limit. This breaks a node-level deadlock the planner did not foresee;
- cancelled jobs: their object is deleted;
- requeue requested by an operator (jobs.services.job_requeue): taken back like a start
  timeout, then Queued again with a short backoff, attempts unchanged;
- preempted jobs whose grace period is over: queued again, objects suspended (preempt.evict);
  elastic jobs giving back their extra pods: scaled down (resize.apply);
- a running job's checkpoint, reported on its object (jobdash.io/checkpointed-at), recorded
  (checkpoint_reports.py).
"""

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from jobdash import logs, metrics
from jobdash.cluster import gateway as gw
from jobdash.cluster import kinds, pod_jobs
from jobdash.dispatch.phases import checkpoint_reports, resize, retries
from jobdash.dispatch.phases.active import ActiveJob, read_active
from jobdash.dispatch.writers import bulk, holding, preempt, transitions
from jobdash.jobs.models import Job, State
from queueing.failures import UNKNOWN

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrackerSettings:
    release_mode: str
    start_timeout_s: float
    max_attempts: int
    backoff_s: float


FULL_SWEEP_EVERY_S = 60.0
UNREAD_WAIT_S = 10.0  # a failed job's pods still running in the cache: how long their word is awaited
_UNREAD: dict[int, float] = {}  # job id -> when its failure was first seen unread (monotonic)


@dataclass
class Sweep:
    """What the sweep for objects of cancelled jobs keeps between passes, so that a pass
    looks at what changed, not at every object the cluster keeps (finished objects stay until
    someone removes them: thousands).

    Every live object whose job is neither active (Released, Running) nor finished for good
    is in `watch`, or comes up in the pass as changed (the watch cache's journal) or as its
    job having left the active jobs. A pass over every live object every FULL_SWEEP_EVERY_S
    (and the first) forgets the settled jobs whose objects are gone and covers what a gap in
    that chain would miss."""

    settled: set[int] = field(default_factory=set)  # Succeeded or Failed: final, no more look
    active: set[int] = field(default_factory=set)  # the last pass's Released and Running jobs
    watch: set[int] = field(default_factory=set)  # live objects of jobs in other states
    full_at: float = float("-inf")  # monotonic time of the last pass over every live object


def _gone(gateway: gw.ClusterGateway, key: gw.ObjectKey, job_id: int) -> bool:
    try:
        return gateway.read_job_object(key).job_id != job_id
    except gw.NotFound:
        return True


def track(
    gateway: gw.ClusterGateway,
    config: TrackerSettings,
    sweep: Sweep | None = None,
    *,
    term: int | None = None,
    jobs: list[ActiveJob] | None = None,
    pods: Mapping[gw.ObjectKey, list[gw.PodInfo]] | None = None,
    now: datetime | None = None,
    failed_nodes: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """One pass. `sweep`, kept by the caller between passes, is what the sweep for objects
    of cancelled jobs remembers (Sweep); without it the pass looks at every object.

    `jobs`: the active jobs as the cycle's snapshot read them, and `pods` their pods; a job
    released since is followed from the next pass on, and each move is a compare-and-set,
    so a job read a little earlier never moves a job that has moved meanwhile. None: read
    them now. `now`: the cycle's time (default: the current time). `failed_nodes`: the nodes
    that failed (a failed job placed there lost its node: retries.classify)."""
    now = now or timezone.now()
    counts: dict[str, int] = defaultdict(int)
    if jobs is None:
        jobs = read_active({})
    if pods is None:
        pods = gateway.pods_of_jobs(job.key for job in jobs)
    moves = _Moves(term, now)
    for job in jobs:
        try:
            counts[
                _follow(
                    gateway,
                    config,
                    job,
                    gateway.job_object(job.key),
                    pods.get(job.key, ()),
                    now,
                    moves,
                    term,
                    failed_nodes,
                )
            ] += 1
        except gw.GatewayError as error:  # the cluster is unwell: try again next time
            log.warning("tracking job %s: %s", job.id, error, extra=logs.job(job.id, job.namespace))
            counts["errors"] += 1
    moves.apply()
    checkpoint_reports.forget(job.id for job in jobs)
    counts["cleaned"] = _delete_cancelled(gateway, sweep or Sweep(), term, active={job.id for job in jobs})
    for outcome, count in preempt.evict(gateway, term=term, now=now).items():
        if count:
            counts[outcome] += count
    if shrunk := resize.apply(gateway, term=term, now=now):
        counts["shrunk"] += shrunk
    return dict(counts)


class _Moves:
    """The common transitions of one pass (started, finished), written together at its end:
    each is still a compare-and-set with its event, but one batch costs a few statements
    instead of a transaction per job."""

    def __init__(self, term: int | None, now: datetime):
        self.term = term
        self.now = now
        self.running: list[tuple[int, str]] = []
        self.finished: list[tuple[int, str, str, bool]] = []
        self.jobs: dict[int, ActiveJob] = {}  # the jobs in `running`

    def start(self, job: ActiveJob, note: str) -> None:
        self.running.append((job.id, note))
        self.jobs[job.id] = job

    def apply(self) -> None:
        if not (self.running or self.finished):
            return
        now = self.now
        # One transaction, the term checked once for all of its batches.
        with transaction.atomic():
            transitions.hold_term(self.term)
            started = transitions.running_many(self.running, at=now)
            transitions.finish_many(self.finished, now=now)
        metrics.observe_started((self.jobs[job_id] for job_id in started), now)


def _follow(
    gateway: gw.ClusterGateway,
    config: TrackerSettings,
    job: ActiveJob,
    info: gw.JobObject | None,
    pods: Iterable[gw.PodInfo],
    now: datetime,
    moves: _Moves,
    term: int | None = None,
    failed_nodes: frozenset[str] = frozenset(),
) -> str:
    job_id, state, what, key = job.id, job.state, job.kind, job.key
    pods = list(pods)
    if info is not None and kinds.objects_are_pods(job.kind_key):
        info = pod_jobs.with_total(info, pods, job.gang)
    if info is None or info.job_id != job_id:
        if not job.object_uid:
            return "creating"  # release in progress, or interrupted: reconcile finishes it
        if not _gone(gateway, key, job_id):
            return "cache-lag"
        note = f"the {what} was deleted outside jobdash"
        transitions.fail(job_id, note, from_states=(State.RELEASED, State.RUNNING), term=term, now=now)
        return "deleted"
    if info.phase == "Succeeded":
        moves.finished.append((job_id, State.SUCCEEDED, f"the {what} succeeded", state == State.RELEASED))
        return "succeeded"
    if info.phase == "Failed":  # retried, or Failed saying why (retries.py)
        failure = retries.classify(job, info.message, pods, failed_nodes)
        if failure.cls == UNKNOWN and any(not pod.terminated and not pod.deleting for pod in pods):
            # The object's watch may run ahead of its pods': their word comes in a pass or two.
            # (Not for ever: a kind that leaves its pods running after a failure ends unread.)
            first = _UNREAD.setdefault(job_id, time.monotonic())
            if time.monotonic() - first < UNREAD_WAIT_S:
                return "cache-lag"
        _UNREAD.pop(job_id, None)
        return retries.failed(gateway, job, failure, now, term)
    if job.requeue_requested_at is not None and not kinds.can_take_back(job.kind_key):
        return _end_instead_of_take_back(gateway, job, now, term)
    if job.requeue_requested_at is not None:
        # The job's transition first, under the term (a deposed leader stops here), then
        # the object. A short backoff, as after a start timeout: a deleted object may still
        # be going away.
        if transitions.requeue_on_request(
            job_id,
            note="taken back from the cluster and queued again, as requested",
            backoff_until=transitions.backoff(config.backoff_s, 0, now=now),
            term=term,
            now=now,
        ):
            holding.taken_back(gateway, key, config.release_mode, term)
        return "requeued"
    if state == State.RUNNING:
        checkpoint_reports.read(job, info, now, term)
        limit = retries.past_deadline(job, now)
        return "running" if limit is None else retries.stop(gateway, job, limit, now, term)
    return _starting(gateway, config, job, pods, now, moves, term)


def _starting(
    gateway: gw.ClusterGateway,
    config: TrackerSettings,
    job: ActiveJob,
    pods: list[gw.PodInfo],
    now: datetime,
    moves: _Moves,
    term: int | None,
) -> str:
    """A Released job: started once its kind's start rule holds; past the start timeout,
    taken back and queued again with a backoff (Failed after the attempt limit)."""
    job_id, key = job.id, job.key
    gang = job.gang
    if kinds.started(job.kind_key, job.workload, pods):
        moves.start(job, "its pod is running" if gang == 1 else f"all {gang} pods are running")
        return "started"
    waited = now.timestamp() - job.released_at if job.released_at is not None else 0.0
    if waited < config.start_timeout_s:
        return "starting"
    if not kinds.can_take_back(job.kind_key):
        return _end_instead_of_take_back(gateway, job, now, term)
    pulled = retries.image_pull(pods)
    if pulled is not None:  # (waiting longer for an image that cannot be pulled will not help)
        return retries.failed(gateway, job, pulled, now, term)
    attempts = job.attempts + 1
    running = sum(1 for pod in pods if pod.phase == "Running" and not pod.deleting)
    note = f"only {running} of {gang} pod{'' if gang == 1 else 's'} running after {waited:.0f}s (attempt {attempts} of {config.max_attempts})"
    # The job's transition first, under the term; then the object is taken back.
    if attempts >= config.max_attempts:
        if transitions.fail(job_id, f"gave up: {note}", from_states=(State.RELEASED,), term=term, now=now):
            holding.taken_back(gateway, key, config.release_mode, term)
        return "gave-up"
    if transitions.requeue(
        job_id,
        note=f"taken back: {note}",
        backoff_until=transitions.backoff(config.backoff_s, attempts - 1, now=now),
        count_attempt=True,
        term=term,
        now=now,
    ):
        holding.taken_back(gateway, key, config.release_mode, term)
    return "timed-out"


def _end_instead_of_take_back(gateway: gw.ClusterGateway, job: ActiveJob, now: datetime, term: int | None) -> str:
    """A kind that cannot be taken back and released again (capabilities.JobNotTakenBack: a
    plain Pod) ends where another would be requeued: Failed, its objects deleted (the job's
    transition first, under the term)."""
    why = "a requeue was requested" if job.requeue_requested_at is not None else "it did not start in time"
    note = f"{why}, but {kinds.not_taken_back(job.kind_key)}: it ends here"
    if transitions.fail(job.id, note, from_states=(State.RELEASED, State.RUNNING), term=term, now=now):
        holding.taken_back(gateway, job.key, "create", term)
    return "ended"


def _delete_cancelled(gateway: gw.ClusterGateway, sweep: Sweep, term: int | None = None, *, active: set[int]) -> int:
    """`active`: the jobs this pass found Released or Running (one cancelled since is the
    next pass's: it has left them then)."""
    changed = gateway.changed_job_ids()
    now = time.monotonic()
    if changed is None or now - sweep.full_at >= FULL_SWEEP_EVERY_S:
        candidates = gateway.live_job_ids()
        sweep.settled.intersection_update(candidates)  # forget objects that are gone
        sweep.full_at = now
    else:
        candidates = changed | sweep.watch | (sweep.active - active)
    sweep.active = active
    objects = gateway.job_objects_of(candidates.difference(active, sweep.settled))  # the live ones
    sweep.watch = set(objects)
    if not objects:
        return 0
    finished = Job.objects.filter(
        bulk.pk_among(objects), state__in=(State.CANCELLED, State.SUCCEEDED, State.FAILED)
    ).values_list("id", "state")
    cancelled = []
    for job_id, state in finished:
        if state == State.CANCELLED:
            cancelled.append(job_id)  # watched until its object is deleting or gone
        else:
            sweep.settled.add(job_id)
            sweep.watch.discard(job_id)
    for job_id in cancelled:
        gateway.delete_job_object(objects[job_id].key, term)
    return len(cancelled)
