"""Checkpoint reports (issue 48): a running job says it has written a checkpoint, through the
API (`POST /api/v1/jobs/<id>/checkpoints/`, the client's `checkpointed`, `jobdash
checkpointed`) or by annotating its own object with `jobdash.io/checkpointed-at` (read by
the dispatcher's tracker). Both go through record_checkpoint: a checkpoint of this run later than the last
one recorded puts the job's checkpoint count up by one and its time in `last_checkpoint_at`
(which so never moves back), with a `Checkpointed` event on its timeline, in one transaction."""

from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from . import roles, selectors
from .exceptions import Conflict, InvalidInput
from .models import Job, JobEvent, State
from .submission import actor_name

# A report's time may be this far ahead of jobdash's clock (the job's clock may run a little
# ahead), not more: a checkpoint is written before it is reported.
MAX_AHEAD_S = 300.0
EVENT = "Checkpointed"


def job_checkpointed(*, job_id: int, user, at: datetime | None = None) -> Job:
    """The job, Running, wrote a checkpoint at `at` (default: now). Who may act on the job may
    report it (roles.require_on_job: edit on one's own, admin on anyone's); a job that is not
    Running is a 409; a time more than MAX_AHEAD_S ahead is a 400 at `at`. Returns the job."""
    job = selectors.job_get_visible(user, job_id)
    roles.require_on_job(user, job, f"reporting a checkpoint of job {job.pk}")
    now = timezone.now()
    at = now if at is None else at
    if at > now + timedelta(seconds=MAX_AHEAD_S):
        raise InvalidInput.at("at", f"{stamp(at)} is in the future: a checkpoint is reported once it is written")
    actor = actor_name(user)
    note = f"checkpoint at {stamp(at)}, reported by {actor}"
    if at > now:  # (the job's clock runs ahead): written by now, so recorded as now, never in the future
        note += f"; {(at - now).total_seconds():.0f}s ahead of jobdash's clock, recorded at {stamp(now)}"
        at = now
    recorded = record_checkpoint(job.pk, at, actor, note)
    job.refresh_from_db(from_queryset=Job.objects.select_related("namespace"))
    if recorded:
        return job
    if job.state != State.RUNNING:
        raise Conflict(f"job {job.pk} is {job.state}: only a Running job reports checkpoints")
    if job.started_at is not None and at < job.started_at:
        raise InvalidInput.at(
            "at", f"{stamp(at)} is before this run started ({stamp(job.started_at)}): a checkpoint of an earlier run"
        )
    return job  # not later than the last one recorded: nothing new (a retry is answered alike)


def record_checkpoint(job_id: int, at: datetime, actor: str, note: str) -> bool:
    """The one write of a checkpoint, if the job is Running, `at` is within its run (not before
    it started) and later than the last one recorded (a report read again and again from the
    job's object, or a retried API call, counts once): `checkpoints` + 1, `last_checkpoint_at`
    = `at`, and a Checkpointed event saying `note`. Returns whether it was recorded."""
    rows = Job.objects.filter(pk=job_id, state=State.RUNNING).filter(
        Q(started_at__isnull=True) | Q(started_at__lte=at),
        Q(last_checkpoint_at__isnull=True) | Q(last_checkpoint_at__lt=at),
    )
    with transaction.atomic():
        recorded = rows.update(checkpoints=F("checkpoints") + 1, last_checkpoint_at=at)
        if recorded:
            JobEvent.objects.create(job_id=job_id, type=EVENT, message=note, actor=actor)
            _leave_now(job_id, actor)
    return bool(recorded)


def _leave_now(job_id: int, actor: str) -> None:
    """A job told to leave (preempted, or its lent nodes reclaimed) that has written its
    checkpoint leaves at once: its notice ends now, and the dispatcher's next pass suspends
    it and lets whoever waits for its room start, instead of at the end of the notice."""
    now = timezone.now()
    leaving = Job.objects.filter(pk=job_id, state=State.RUNNING, preempt_at__gt=now).filter(
        Q(preempted_for__isnull=False) | ~Q(reclaimed_by="")
    )
    if leaving.update(preempt_at=now):
        JobEvent.objects.create(
            job_id=job_id, type="NoticeEnded", message="its checkpoint is written: it leaves now", actor=actor
        )


def stamp(at: datetime) -> str:
    """RFC 3339 in UTC, to the second: 2025-06-01T18:00:00Z."""
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
