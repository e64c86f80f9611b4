"""Retries that know why a job failed, and the maximum run time (issue 36).

When a job's object fails, its failure is classified from its pods as the cluster reports
them (queueing/failures.py: node lost, evicted, preempted, image pull, out of memory, an exit
code), or as a lost node when its planned node failed and its pods are gone with it. Its retry
policy (queueing/job_options.py: a limit, the classes and exit codes retried, a back-off)
decides: retried, it goes back to the queue in its old place (its submission time is its
place, and it keeps it) after the back-off, its failed object deleted (the release makes it
anew), its prediction made again; else it is Failed with the failure on its row and in its
timeline, saying why it was not retried. A job that has run its maximum run time is stopped
and Failed (DeadlineExceeded), never retried.
"""

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from jobdash.cluster import gateway as gw
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import JobEvent, State
from queueing.failures import (
    EXIT_CODE,
    IMAGE_PULL,
    NODE_LOST,
    Failure,
    backoff_s,
    deadline_exceeded,
    job_failure,
    node_lost,
    retriable,
)
from queueing.job_options import JobOptions

log = logging.getLogger(__name__)


def classify(job: ActiveJob, message: str, pods: Iterable[gw.PodInfo], failed_nodes: frozenset[str]) -> Failure:
    """The job's failure: the most telling of its pods'; a lost node if none says, but a node
    the plan put it on failed (the taint manager deleted its pods there, and their word with
    them: only a watch that saw them go saw why)."""
    found = [pod.failure for pod in pods if pod.failure is not None]
    if not found:
        for role, index, node in job.placement:
            if node in failed_nodes:
                return node_lost(f"{role.lower()} {index}", node)
        moved = _replaced_since_release(job.id)
        if moved is not None:  # (its pods lost their node this run, and were placed again: pinning.replace)
            return Failure(NODE_LOST, f"NodeLost: {moved}")
    return job_failure(found, message)


def _replaced_since_release(job_id: int) -> str | None:
    """The note of the job's last Replaced event since its last release, if any."""
    events = JobEvent.objects.filter(job_id=job_id, type__in=("Released", "Replaced")).order_by("-id")
    last = events.values_list("type", "message").first()
    return last[1] if last is not None and last[0] == "Replaced" else None


def image_pull(pods: Iterable[gw.PodInfo]) -> Failure | None:
    """A pod stuck on an image that cannot be pulled (waiting longer will not help)."""
    for pod in pods:
        if pod.failure is not None and pod.failure.cls == IMAGE_PULL:
            return pod.failure
    return None


def _why_not(options: JobOptions, failure: Failure, retries: int) -> str:
    policy = options.retry
    if policy.limit == 0:
        return ""
    if retries >= policy.limit:
        return f"; not retried: its {policy.limit} retries are spent"
    if failure.cls == EXIT_CODE and policy.exit_codes:
        codes = ",".join(str(code) for code in sorted(policy.exit_codes))
        return f"; not retried: its retry-exit-codes are {codes}"
    return f"; not retried: {failure.cls} is not in its retry-on ({','.join(sorted(policy.on)) or 'nothing'})"


def failed(gateway: gw.ClusterGateway, job: ActiveJob, failure: Failure, now: datetime, term: int | None) -> str:
    """Retry the job or end it, as its policy says of this failure."""
    options = JobOptions.from_json(job.options)
    if retriable(options.retry, failure, job.retries):
        until = now + timedelta(seconds=backoff_s(options.retry, job.retries))
        note = f"attempt {job.retries + 2} of {options.retry.limit + 1} after {failure.message}"
        if transitions.retry(job.id, note=note, backoff_until=until, failure=failure.to_json(), term=term, now=now):
            _delete(gateway, job, term)
        return "retrying"
    note = f"the {job.kind} failed: {failure.message}{_why_not(options, failure, job.retries)}"
    states = (State.RELEASED, State.RUNNING)
    if transitions.fail(job.id, note, from_states=states, term=term, now=now, failure=failure.to_json()):
        if failure.cls == IMAGE_PULL:  # (its object still waits on the image: nothing of it will run)
            _delete(gateway, job, term)
    return "failed"


def past_deadline(job: ActiveJob, now: datetime) -> float | None:
    """Its maximum run time, if it has run that long."""
    limit = JobOptions.max_run_of(job.options)
    if limit is None or job.started_at is None or now.timestamp() - job.started_at < limit:
        return None
    return limit


def stop(gateway: gw.ClusterGateway, job: ActiveJob, limit: float, now: datetime, term: int | None) -> str:
    """Stopped at its maximum run time: Failed, its object deleted."""
    failure = deadline_exceeded(limit)
    note = f"{failure.message}: stopped"
    if transitions.fail(
        job.id, note, from_states=(State.RUNNING,), term=term, now=now, failure=failure.to_json(), reason=failure.cls
    ):
        _delete(gateway, job, term)
    return "deadline"


def _delete(gateway: gw.ClusterGateway, job: ActiveJob, term: int | None) -> None:
    try:
        gateway.delete_job_object(job.key, term)
    except gw.NotFound:
        pass
