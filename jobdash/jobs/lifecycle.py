"""What entering each state means for a job's row: one table, read by every state change.

A state change is a compare-and-set (`services.compare_and_set` for one job,
`dispatch.transitions.move_many` and `claim` for many); each writes
`entering(state)` and then what is particular to that transition (its reason, message,
placement, ...). So a field that belongs to a state is cleared whenever a job leaves it,
whichever path moved it: no transition has to remember every field.

What belongs to which state:
- waiting (Queued only): position, reason, start range (eta, eta_late), backoff_until;
- a release (from Released on, kept once finished for the record): released_at,
  leader_term, placement, cards, scale, object_uid, borrowing;
- a run: started_at;
- leaving for a preemptor or a reclaim of its lent nodes (Running only): preempted_for,
  preempt_at, preempt_cause, reclaimed_by, shrink_to;
- an operator's requeue request (Released or Running only): requeue_requested_at;
- the end: finished_at.
`message` is the state's one sentence: why it waits, or why it failed or was cancelled.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.utils import timezone

from .models import State


class _Now:
    """Stands for the moment of the change (resolved by `entering`)."""

    def __repr__(self) -> str:
        return "NOW"


NOW: Any = _Now()

# A waiting job's fields: nothing of them is true once it has left the queue.
WAITING: Mapping[str, Any] = {
    "position": None,
    "reason": "",
    "message": "",
    "eta": None,
    "eta_late": None,
    "backoff_until": None,
}
# A release's fields: a job queued again keeps nothing of its last release.
RELEASE: Mapping[str, Any] = {
    "released_at": None,
    "leader_term": None,
    "placement": None,
    "cards": None,
    "scale": None,
    "object_uid": "",
    "borrowing": False,
}
# What only a Released or Running job can have asked for or been told.
IN_FLIGHT: Mapping[str, Any] = {
    "requeue_requested_at": None,
    "preempted_for": None,
    "preempt_at": None,
    "preempt_cause": "",
    "reclaimed_by": "",
    "shrink_to": None,
}

_FINISHED: Mapping[str, Any] = {**WAITING, **IN_FLIGHT, "finished_at": NOW}

ENTERING: Mapping[str, Mapping[str, Any]] = {
    # Back in the queue (a start timeout, a refusal for now, a preemption, an operator's
    # requeue): its place comes from the next cycle; the transition says why it waits.
    State.QUEUED: {**WAITING, **RELEASE, **IN_FLIGHT, "started_at": None, "finished_at": None},
    State.RELEASED: {**WAITING, "released_at": NOW, "object_uid": "", "preempted_by": None},
    State.RUNNING: {"started_at": NOW},
    State.SUCCEEDED: _FINISHED,
    State.FAILED: _FINISHED,
    State.CANCELLED: _FINISHED,
}


def entering(state: str, now: datetime | None = None, **particular: Any) -> dict[str, Any]:
    """The fields a row gets on entering `state` (NOW as `now`, default the current time),
    with the transition's `particular` ones over them."""
    moment = now or timezone.now()
    fields = {name: moment if value is NOW else value for name, value in ENTERING[state].items()}
    fields.update(particular)
    return fields
