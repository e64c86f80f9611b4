"""The dispatcher's state changes. Each is a compare-and-set in one transaction with its
JobEvent (jobs.services.compare_and_set), so a second leader, a retry or a cancel racing with
the cycle can never move a job twice."""

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobdash.dispatch.writers import bulk
from jobdash.dispatch.writers.claims import Claim
from jobdash.jobs import lifecycle
from jobdash.jobs.models import Fence, Job, LostWork, State
from jobdash.jobs.services import compare_and_set
from queueing.cluster_request import released_words

__all__ = ["Claim"]  # (claim()'s argument, at hand where claim is)

DISPATCHER = "dispatcher"


class StaleTerm(Exception):
    """A newer leader has taken over: this one must not release anything."""


class StaleSnapshot(Exception):
    """Another cycle claimed jobs after this one's snapshot: its plan may spend quota that
    is gone. It releases nothing; the next cycle plans again."""


def hold_term(term: int | None) -> None:
    """Inside a transaction: lock the fence row and check that `term` still leads, so the
    write that follows commits only under it (a newer leader's take_term waits for this
    transaction or has already won, and then this raises). None: no check (tests)."""
    if term is None:
        return
    recorded = Fence.objects.select_for_update().filter(id=1).values_list("term", flat=True).first()
    if recorded != term:
        raise StaleTerm(f"term {term} is not the recorded term {recorded}")


def claims_seen() -> int:
    """The fence's claim counter, read before a cycle's snapshot (see claim)."""
    return Fence.objects.filter(id=1).values_list("claims", flat=True).first() or 0


def take_term(term: int, holder: str) -> None:
    """Record a new leadership. Terms only grow; a smaller one means we were deposed."""
    with transaction.atomic():
        fence, _ = Fence.objects.select_for_update().get_or_create(id=1)
        if term < fence.term:
            raise StaleTerm(f"term {term} is older than the recorded term {fence.term}")
        if term > fence.term or fence.holder != holder:
            Fence.objects.filter(id=1).update(term=term, holder=holder, since=timezone.now())


def current_term() -> int | None:
    from jobdash.jobs.cluster_selectors import leading_term

    return leading_term()


def claim(
    claims: Iterable[Claim],
    term: int,
    *,
    seen: int | None = None,
    now: datetime | None = None,
) -> list[int]:
    """Queued -> Released for each claim, under the fence: the fence row is
    locked for the transaction, so a new leader's take_term waits for it or beats it.
    With `seen` (claims_seen() before the cycle's snapshot) nothing is claimed if another
    claim happened since (StaleSnapshot). The rows still Queued are locked and moved
    together (bulk.update_rows), in the order of `claims`."""
    now = now or timezone.now()
    wanted = {one.job_id: one.columns() for one in claims}
    with transaction.atomic():
        fence = Fence.objects.select_for_update().filter(id=1).values_list("term", "claims").first()
        recorded, counted = fence if fence else (None, 0)
        if recorded != term:
            raise StaleTerm(f"term {term} is not the recorded term {recorded}")
        if seen is not None and counted != seen:
            raise StaleSnapshot(f"{counted - seen} claim(s) since this cycle's snapshot")
        queued = set(bulk.lock_in_states(Job, wanted, (State.QUEUED,)))
        claimed = [job_id for job_id in wanted if job_id in queued]
        if claimed:
            Fence.objects.filter(id=1).update(claims=F("claims") + 1)
        bulk.update_rows(
            Job,
            [(job_id, *wanted[job_id]) for job_id in claimed],
            ["placement", "borrowing", "cards", "scale", "cluster"],
            constants=dict(state=State.RELEASED, **lifecycle.entering(State.RELEASED, now, leader_term=term)),
        )
        bulk.insert_events(
            (
                job_id,
                "Released",
                f"released to {released_words(wanted[job_id][4])} (leader term {term})",
                DISPATCHER,
                wanted[job_id][4],
            )
            for job_id in claimed
        )
    return claimed


def created(job_id: int, uid: str) -> None:
    Job.objects.filter(pk=job_id, state__in=(State.RELEASED, State.RUNNING)).update(object_uid=uid)


def created_many(uids: dict[int, str]) -> None:
    """`created` for many jobs in one UPDATE. (The tracker may have seen a job's object
    run and finish before its creation was recorded: a finished job gets its uid too.)"""
    states = (State.RELEASED, State.RUNNING, State.SUCCEEDED, State.FAILED)
    bulk.update_rows(Job, uids.items(), ["object_uid"], only_states=states)


def move_many(
    moves: Iterable[tuple[int, str]],
    *,
    from_states,
    to_state: str,
    event: str,
    term: int | None = None,
    now: datetime | None = None,
    **fields,
) -> list[int]:
    """jobs.services.compare_and_set for many jobs at once: each (job id, note) moves only if it
    is still in one of `from_states`, and each job that moves gets its JobEvent, in the same
    transaction; the rows get what entering `to_state` means (lifecycle.ENTERING), then
    `fields`. Three statements instead of four per job: the rows still in `from_states`
    are locked (in id order, so two batches cannot deadlock), updated, and their events
    inserted. Returns the ids that moved."""
    notes = dict(moves)
    if not notes:
        return []
    changes = {"state": to_state, **lifecycle.entering(to_state, now, **fields)}
    with transaction.atomic(savepoint=False):
        hold_term(term)
        ids = bulk.lock_in_states(Job, notes, from_states)
        if ids:
            bulk.update_rows(Job, [(job_id,) for job_id in ids], constants=changes)
            # An elastic job admitted with fewer pods says how many when it runs (usage bills them).
            scales = bulk.scales(ids) if event == "Running" else {}
            bulk.insert_events((job_id, event, notes[job_id], DISPATCHER) for job_id in ids if job_id not in scales)
            bulk.insert_sized_events((job_id, event, notes[job_id], DISPATCHER, scales[job_id]) for job_id in scales)
    return ids


def _fenced_compare_and_set(job_id: int, term: int | None, *, lost: LostWork | None = None, **change) -> bool:
    """`lost`: saved in the same transaction when the change is made (usage.lost_work)."""
    with transaction.atomic():
        hold_term(term)
        changed = compare_and_set(job_id, **change)
        if changed and lost is not None:
            lost.save()
        return changed


def _back_to_queue(
    job_id: int,
    term: int | None,
    *,
    from_states,
    note: str,
    backoff_until: datetime | None,
    reason: str = "BackingOff",
    event: str = "Requeued",
    **more,
) -> bool:
    return _fenced_compare_and_set(
        job_id,
        term,
        from_states=from_states,
        to_state=State.QUEUED,
        event=event,
        note=note,
        actor=DISPATCHER,
        backoff_until=backoff_until,
        reason=reason,
        message=note,
        **more,
    )


def replaced(
    placements: dict[int, Any], notes: dict[int, str], term: int | None = None, cards: dict[int, Any] | None = None
) -> list[int]:
    """New placements of gangs that lost nodes (and the cards of their pods on shared GPUs),
    each with its `Replaced` event; only of jobs still Released or Running."""
    if not placements:
        return []
    cards = cards or {}
    with transaction.atomic():
        hold_term(term)
        ids = bulk.lock_in_states(Job, placements, (State.RELEASED, State.RUNNING))
        bulk.update_rows(
            Job,
            [(job_id, [list(pod) for pod in placements[job_id]], cards.get(job_id)) for job_id in ids],
            ["placement", "cards"],
        )
        bulk.insert_events((job_id, "Replaced", notes[job_id], DISPATCHER) for job_id in ids)
    return ids


def requeue(
    job_id: int,
    *,
    note: str,
    backoff_until: datetime,
    count_attempt: bool,
    term: int | None = None,
    now: datetime | None = None,
) -> bool:
    counted: dict[str, Any] = {"attempts": F("attempts") + 1} if count_attempt else {}
    return _back_to_queue(
        job_id,
        term,
        from_states=(State.RELEASED,),
        note=note,
        backoff_until=backoff_until,
        now=now,
        cluster="",  # (its object is gone: planned anew, in any cluster)
        **counted,
    )


def retry(
    job_id: int,
    *,
    note: str,
    backoff_until: datetime,
    failure: dict[str, Any],
    term: int | None = None,
    now: datetime | None = None,
) -> bool:
    """A job whose failure its retry policy retries (issue 36): Released or Running -> Queued
    in its old place (submitted_at kept), one more retry counted, the failure kept, predicted
    again (its history has grown since)."""
    return _back_to_queue(
        job_id,
        term,
        from_states=(State.RELEASED, State.RUNNING),
        note=note,
        backoff_until=backoff_until,
        event="Retrying",
        now=now,
        retries=F("retries") + 1,
        failure=failure,
        predicted_duration_s=None,
        predicted_p90_s=None,
        predicted_tail_s=None,
        prediction_source="",
    )


def end_queued(job_id: int, note: str, *, reason: str, term: int | None = None, now: datetime | None = None) -> bool:
    """A queued job that can never start, or must not start any more: Cancelled, `reason` on its row."""
    return _fenced_compare_and_set(
        job_id,
        term,
        from_states=(State.QUEUED,),
        to_state=State.CANCELLED,
        event="Cancelled",
        note=f"{reason}: {note}",
        actor=DISPATCHER,
        now=now,
        reason=reason,
        message=note,
    )


def requeue_on_request(
    job_id: int, *, note: str, backoff_until: datetime, term: int | None = None, now: datetime | None = None
) -> bool:
    """An operator's requeue (jobs.services.job_requeue) once its object has been taken back:
    Released or Running -> Queued, attempts unchanged (the job did nothing wrong)."""
    return _back_to_queue(
        job_id,
        term,
        from_states=(State.RELEASED, State.RUNNING),
        note=note,
        backoff_until=backoff_until,
        now=now,
    )


def running_many(moves: Iterable[tuple[int, str]], term: int | None = None, *, at: datetime | None = None) -> list[int]:
    """Released -> Running for many (job id, note) at once, started `at` (default: now)."""
    return move_many(moves, from_states=(State.RELEASED,), to_state=State.RUNNING, event="Running", term=term, now=at)


def finish_many(
    finishes: Iterable[tuple[int, str, str, bool]], term: int | None = None, now: datetime | None = None
) -> list[int]:
    """Released/Running -> Succeeded/Failed for many (job id, state, note, started) at
    once: one batch per kind of change (a failure's note is also its row's message;
    `started`: it was never seen Running, so it started when it finished)."""
    now = now or timezone.now()
    groups: dict[tuple[str, bool, str], list[tuple[int, str]]] = {}
    for job_id, state, note, started in finishes:
        groups.setdefault((state, started, note if state == State.FAILED else ""), []).append((job_id, note))
    moved = []
    with transaction.atomic():
        for (state, started, message), moves in groups.items():
            # (never seen Running: it started when it finished)
            fields: dict[str, object] = {"started_at": now} if started else {}
            moved += move_many(
                moves,
                from_states=(State.RELEASED, State.RUNNING),
                to_state=state,
                event=state,
                term=term,
                now=now,
                message=message,
                **fields,
            )
    return moved


def fail(
    job_id: int,
    note: str,
    from_states=(State.QUEUED, State.RELEASED, State.RUNNING),
    term: int | None = None,
    now: datetime | None = None,
    event: str = "Failed",
    **more: Any,
) -> bool:
    """`event`: Refused when the cluster refused the job's object for good; `more`: fields of
    the row particular to this failure (its classified `failure`, a `reason`)."""
    return _fenced_compare_and_set(
        job_id,
        term,
        from_states=from_states,
        to_state=State.FAILED,
        event=event,
        note=note,
        actor=DISPATCHER,
        now=now,
        message=note,
        **more,
    )


def mark_released(job_id: int, term: int | None, note: str, now: datetime | None = None) -> bool:
    """An object of ours exists while the row says Queued (the release committed in the
    cluster but not here): make the database agree with the cluster."""
    return _fenced_compare_and_set(
        job_id,
        term,
        from_states=(State.QUEUED,),
        to_state=State.RELEASED,
        event="Released",
        note=note,
        actor=DISPATCHER,
        now=now,
        leader_term=term,
    )


def preempting(
    victim: int,
    preemptor: int,
    *,
    leave_at: datetime,
    note: str,
    preemptor_note: str,
    term: int | None,
    shrink_to: Mapping[str, int] | None = None,
    cause: str = "",
) -> bool:
    """A running job is to make room for `preemptor`: it keeps running until `leave_at` (its
    grace period), then leaves, or, with `shrink_to` (an elastic job's partial victim), gives
    back its extra pods and runs on with those (resize.py). A victim already leaving for a
    job that no longer needs it (spare) keeps its time and makes room for `preemptor`
    instead. `cause`: why (queueing.preemption). Events on both jobs' timelines."""
    event = "Shrinking" if shrink_to else "Preempting"
    with transaction.atomic():
        hold_term(term)
        victims = Job.objects.filter(pk=victim, state=State.RUNNING)
        moved = victims.filter(preempted_for__isnull=True).update(
            preempted_for=preemptor,
            preempt_at=leave_at,
            preempt_cause=cause,
            shrink_to=dict(shrink_to) if shrink_to else None,
        )
        if not moved:
            moved = (
                victims.filter(preempted_for__isnull=False)
                .exclude(preempted_for=preemptor)
                .update(preempted_for=preemptor, preempt_cause=cause)
            )
        if moved:
            bulk.insert_events(
                [(victim, event, note, DISPATCHER), (preemptor, "Preempting", preemptor_note, DISPATCHER)]
            )
    return bool(moved)


def preemption_called_off(victim: int, note: str, term: int | None) -> bool:
    with transaction.atomic():
        hold_term(term)
        moved = Job.objects.filter(pk=victim, state=State.RUNNING, preempted_for__isnull=False).update(
            preempted_for=None, preempt_at=None, preempt_cause=""
        )
        if moved:
            bulk.insert_events([(victim, "PreemptionCalledOff", note, DISPATCHER)])
    return bool(moved)


def preempted(
    victim: int,
    preemptor: int | None,
    note: str,
    term: int | None,
    now: datetime | None = None,
    event: str = "Preempted",
    lost: LostWork | None = None,
    moved: bool = False,
) -> bool:
    """Running -> Queued after the grace period, keeping its place (its submission time):
    its reason says for whom (no one: its lent nodes went back, event "Reclaimed"), until
    the next cycle says what it waits for. Not an attempt. `lost`: what the stop throws
    away, counted in the same transaction (usage.lost_work); `moved`: it leaves to be placed
    again at once elsewhere (defragmentation), which moved_at records."""
    return _fenced_compare_and_set(
        victim,
        term,
        lost=lost,
        from_states=(State.RUNNING,),
        to_state=State.QUEUED,
        event=event,
        note=note,
        actor=DISPATCHER,
        now=now,
        reason=event,
        message=note,
        preempted_by=preemptor,
        preemptions=F("preemptions") + 1,
        **({"moved_at": now or timezone.now()} if moved else {}),
    )


def backoff(base_seconds: float, attempts: int, cap_seconds: float = 600.0, now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=min(cap_seconds, base_seconds * 2 ** max(0, attempts)))


def reclaim_notice(
    job_id: int,
    pool: str,
    *,
    leave_at: datetime,
    note: str,
    term: int | None,
    shrink_to: Mapping[str, int] | None = None,
) -> bool:
    """A running job on a lent pool that goes back at `leave_at`: it runs on until then (the
    notice is its grace period) and is preempted then, or, an elastic job whose pods there
    are all extra, shrinks to `shrink_to` then. Once per job: the first notice stands."""
    with transaction.atomic():
        hold_term(term)
        moved = Job.objects.filter(pk=job_id, state=State.RUNNING, preempt_at__isnull=True).update(
            reclaimed_by=pool, preempt_at=leave_at, shrink_to=dict(shrink_to) if shrink_to else None
        )
        if moved:
            bulk.insert_events([(job_id, "ReclaimNotice", note, DISPATCHER)])
    return bool(moved)


def resized(
    job_id: int, counts: Mapping[str, int], placement: list | None, note: str, term: int | None, event: str = "Resized"
) -> bool:
    """A running elastic job now runs `counts` of its pods (grown, or shrunk after its grace
    period), on `placement`; whatever preemption was under way for it is over."""
    with transaction.atomic():
        hold_term(term)
        moved = Job.objects.filter(pk=job_id, state=State.RUNNING).update(
            scale=dict(counts), placement=placement, shrink_to=None, preempted_for=None, preempt_at=None
        )
        if moved:
            bulk.insert_sized_events([(job_id, event, note, DISPATCHER, counts)])
    return bool(moved)
