"""The dispatcher's state changes. Each is a compare-and-set in one transaction with its
JobEvent (jobs.services.transition), so a second leader, a retry or a cancel racing with
the cycle can never move a job twice."""

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from jobdash.jobs.models import Fence, Job, JobEvent, State
from jobdash.jobs.services import transition

DISPATCHER = "dispatcher"


class StaleTerm(Exception):
    """A newer leader has taken over: this one must not release anything."""


def take_term(term: int, holder: str) -> None:
    """Record a new leadership. Terms only grow; a smaller one means we were deposed."""
    with transaction.atomic():
        fence, _ = Fence.objects.select_for_update().get_or_create(id=1)
        if term < fence.term:
            raise StaleTerm(f"term {term} is older than the recorded term {fence.term}")
        if term > fence.term or fence.holder != holder:
            Fence.objects.filter(id=1).update(term=term, holder=holder, since=timezone.now())


def current_term() -> int | None:
    return Fence.objects.filter(id=1).values_list("term", flat=True).first()


def claim(admissions: Iterable[tuple[int, list | None]], term: int) -> list[int]:
    """Queued -> Released for each (job id, placement), under the fence: the fence row is
    locked for the transaction, so a new leader's take_term waits for it or beats it."""
    now = timezone.now()
    claimed = []
    with transaction.atomic():
        recorded = Fence.objects.select_for_update().filter(id=1).values_list("term", flat=True).first()
        if recorded != term:
            raise StaleTerm(f"term {term} is not the recorded term {recorded}")
        for job_id, placement in admissions:
            moved = Job.objects.filter(pk=job_id, state=State.QUEUED).update(
                state=State.RELEASED, released_at=now, leader_term=term, placement=placement,
                position=None, reason="", message="", eta=None, backoff_until=None, tfjob_uid="",
            )
            if moved:
                claimed.append(job_id)
        JobEvent.objects.bulk_create(
            JobEvent(job_id=job_id, type="Released", message=f"released to the cluster (leader term {term})", actor=DISPATCHER)
            for job_id in claimed
        )
    return claimed


def created(job_id: int, uid: str) -> None:
    Job.objects.filter(pk=job_id, state__in=(State.RELEASED, State.RUNNING)).update(tfjob_uid=uid)


def requeue(job_id: int, *, note: str, backoff_until: datetime, count_attempt: bool) -> bool:
    job = Job.objects.filter(pk=job_id).values("attempts").first()
    if job is None:
        return False
    return transition(
        job_id, from_states=(State.RELEASED,), to_state=State.QUEUED, event="Requeued", note=note, actor=DISPATCHER,
        attempts=job["attempts"] + (1 if count_attempt else 0), backoff_until=backoff_until,
        released_at=None, placement=None, tfjob_uid="", reason="BackingOff", message=note,
    )


def running(job_id: int, note: str) -> bool:
    return transition(
        job_id, from_states=(State.RELEASED,), to_state=State.RUNNING, event="Running", note=note,
        actor=DISPATCHER, started_at=timezone.now(),
    )


def finish(job_id: int, state: str, note: str, *, started: bool) -> bool:
    now = timezone.now()
    fields = {"finished_at": now, "reason": "", "message": note if state == State.FAILED else ""}
    if started:
        fields["started_at"] = now
    return transition(
        job_id, from_states=(State.RELEASED, State.RUNNING), to_state=state, event=state, note=note,
        actor=DISPATCHER, **fields,
    )


def fail(job_id: int, note: str, from_states=(State.QUEUED, State.RELEASED, State.RUNNING)) -> bool:
    return transition(
        job_id, from_states=from_states, to_state=State.FAILED, event="Failed", note=note, actor=DISPATCHER,
        finished_at=timezone.now(), position=None, reason="", message=note, eta=None,
    )


def mark_released(job_id: int, term: int | None, note: str) -> bool:
    """A TFJob of ours exists while the row says Queued (the release committed in the
    cluster but not here): make the database agree with the cluster."""
    return transition(
        job_id, from_states=(State.QUEUED,), to_state=State.RELEASED, event="Released", note=note,
        actor=DISPATCHER, released_at=timezone.now(), leader_term=term, position=None, reason="", message="", eta=None,
    )


def backoff(base_seconds: float, attempts: int, cap_seconds: float = 600.0) -> datetime:
    return timezone.now() + timedelta(seconds=min(cap_seconds, base_seconds * 2 ** max(0, attempts)))
