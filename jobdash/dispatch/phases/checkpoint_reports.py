"""Checkpoints a running job reports on its own object (issue 48), part of phase 9 (track).

A job that writes a checkpoint may say so by annotating its own object (whatever its kind)
with `jobdash.io/checkpointed-at: <RFC 3339 time>`; the watch cache keeps the annotation
(gateway.JobObject.checkpointed_at), so a new value wakes the leader. Each pass records it
through the API's own write (jobs.services.record_checkpoint), under the leader's term and
only when it is later than the last checkpoint recorded: the same annotation read in every
pass, or by the next leader, counts once. A value that is not a time, or lies further in
the future than a clock's drift explains, is ignored with a warning (once per value), never
a failed cycle. A job of plain Pods has no object of its own to annotate.
"""

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import transaction

from jobdash import logs
from jobdash.cluster import gateway as gw
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.checkpoints import MAX_AHEAD_S, stamp
from queueing.checkpoint_options import CHECKPOINTED_AT, checkpointed_at

log = logging.getLogger(__name__)

ACTOR = "cluster"
_SEEN: dict[int, str] = {}  # job id -> the annotation's value last looked at, recorded or ignored


def read(job: ActiveJob, info: gw.JobObject, now: datetime, term: int | None) -> str:
    """The Running job's object's report, recorded if it is new: "checkpointed", "ignored"
    (not a time, or in the future), or "" (none, or nothing new)."""
    value = info.checkpointed_at
    if not value or _SEEN.get(job.id) == value:
        return ""
    try:
        at = datetime.fromtimestamp(checkpointed_at(value), UTC)
        if at > now + timedelta(seconds=MAX_AHEAD_S):
            raise ValueError(f"{stamp(at)} is in the future (now {stamp(now)})")
    except ValueError as error:
        log.warning(
            "job %s: the %s annotation of its %s is ignored: %s",
            job.id,
            CHECKPOINTED_AT,
            job.kind,
            error,
            extra=logs.job(job.id, job.namespace),
        )
        _SEEN[job.id] = value
        return "ignored"
    note = f"checkpoint at {stamp(at)}, from its {job.kind}'s {CHECKPOINTED_AT} annotation"
    with transaction.atomic():
        transitions.hold_term(term)
        recorded = services.record_checkpoint(job.id, at, ACTOR, note)
    _SEEN[job.id] = value
    return "checkpointed" if recorded else ""


def forget(active: Iterable[int]) -> None:
    """Drop what was seen of jobs no longer Released or Running."""
    keep = set(active)
    for job_id in [job_id for job_id in _SEEN if job_id not in keep]:
        del _SEEN[job_id]
