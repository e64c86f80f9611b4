"""Where each job that waits stands after a cycle's admissions (planner.py, phases 5 and 6).

Its 1-based place in its namespace's queue, the reason it shows (a preempted job's wraps
the one it waits for now), the queues the start-time forecast plays forward, and, once the
forecast is in, its PendingStatus.  Both loop once per waiting job, up to a hundred
thousand of them: hence identity tests and no call per job.
"""

from __future__ import annotations

from collections.abc import Mapping

from .cycle_state import CycleState
from .reasons import Outcome, PendingStatus, Reason
from .snapshot import PendingJob

# Compared by identity: hashing an Enum member calls Python code, an identity test does not.
_NEVER_QUOTA, _NEVER_NODES = Reason.NEVER_FITS_QUOTA, Reason.NEVER_FITS_NODES
_AFTER, _NEVER_AFTER = Reason.WAITING_FOR_DEPENDENCY, Reason.DEPENDENCY_NEVER_SATISFIED
# PendingStatus(...) without the Python-level __new__ of a NamedTuple: one per queued job.
_new_status = tuple.__new__
# Outcomes a preempted job's reason wraps: it waits for room, as before it was preempted.
_ROOM = frozenset(
    {
        Reason.QUOTA_EXCEEDED,
        Reason.NO_NODE_FITS,
        Reason.RESERVED_FOR_OLDER_JOB,
        Reason.CANNOT_BORROW,
        Reason.OUTLASTS_LENT_POOL,
    }
)

# A waiting job, its place in its namespace's queue, and the reason it shows.
Standing = tuple[PendingJob, int, Outcome]
# Per namespace, the (rank, job) of the jobs the forecast plays forward, in queue order.
Queues = dict[str, list[tuple[int, PendingJob]]]


def positions(state: CycleState, by_rank: bool) -> tuple[list[Standing], Queues]:
    """Phase 5: each waiting job's standing, and the queues of those that can wait.  The
    waiting were recorded in queue order unless there were several passes (``by_rank``)."""
    recorded = sorted(state.waiting, key=lambda entry: entry[0]) if by_rank else state.waiting
    counts: dict[str, int] = {}
    waiting = []
    queues: Queues = {}
    preempting = state.preempting
    for rank, job, outcome in recorded:
        namespace = job.namespace
        position = counts[namespace] = counts.get(namespace, 0) + 1
        if preempting and job.id in preempting:
            outcome = preempting[job.id]
        elif job.preempted_by is not None and outcome[0] in _ROOM:
            outcome = (
                Reason.PREEMPTED,
                {
                    "preemptor": job.preempted_by,
                    "waits_for": outcome[0].value,
                    "detail": outcome[1],
                },
            )
        waiting.append((job, position, outcome))
        reason = outcome[0]  # (a dependent is not played forward: it starts when its dependencies end)
        if (
            reason is not _NEVER_QUOTA
            and reason is not _NEVER_NODES
            and reason is not _AFTER
            and reason is not _NEVER_AFTER
        ):
            queue = queues.get(namespace)
            if queue is None:
                queues[namespace] = [(rank, job)]
            else:
                queue.append((rank, job))
    return waiting, queues


def statuses(
    waiting: list[Standing], starts: Mapping[int, float], notes: Mapping[int, str], otherwise: str
) -> dict[int, PendingStatus]:
    """Phase 6, once the forecast is in: every waiting job's status.  ``otherwise``: the note
    of a job the forecast gave neither a start nor a note of its own."""
    found = {}
    for job, position, outcome in waiting:
        eta = starts.get(job.id)
        if eta is not None:
            note = ""
        elif outcome[0] is _NEVER_QUOTA or outcome[0] is _NEVER_NODES:
            note = "waiting will not help"
        else:
            note = notes.get(job.id, otherwise)
        found[job.id] = _new_status(PendingStatus, (job.id, job.namespace, position, outcome[0], outcome[1], eta, note))
    return found
