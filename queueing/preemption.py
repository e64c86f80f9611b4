"""Which running jobs to preempt for a waiting one: few, cheap, and never more than needed.

Two causes.  *Reclaim*: a job that fits its namespace's guaranteed share waits on
nodes that borrowers of its cohort hold (elastic.py).  *Priority*: in a namespace
whose policy allows it, a job waits on lower-priority jobs of its own namespace.

Candidates are taken lowest priority first, then those that lose the least work
(lost_work.py: GPU-seconds since their last checkpoint, reported or declared; the whole
run if none, so without checkpoints the most recently started first): the shortest run
of them that lets the waiting job fit; then any victim the job could do without is put
back, until none can be: with more room never making a fit fail, no proper subset of the
victims would have been enough.  A job inside its minimum run time is no candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .lost_work import gpu_seconds_lost, seconds_lost
from .snapshot import RunningJob

RECLAIM = "reclaim"
PRIORITY = "priority"
MOVE = "move"  # defragmentation (defrag.py): the victim is placed again at once, elsewhere


@dataclass(frozen=True)
class Preemption:
    """Preempt ``victim`` (of ``namespace``) to make room for ``preemptor``; ``cause``: RECLAIM,
    PRIORITY or MOVE.  ``shrink_to``: role -> pods it keeps, when only an elastic job's extra pods go
    (the highest indexes of each role named); empty: the whole job goes.  ``lost_s`` and
    ``lost_gpu_s``: the work it will redo, in seconds and GPU-seconds, if it left now (without
    writing a checkpoint on notice); ``checkpointed_at``: its last checkpoint (None: none)."""

    victim: int
    namespace: str
    preemptor: int
    cause: str
    shrink_to: Mapping[str, int] = field(default_factory=dict, hash=False)
    lost_s: float = field(default=0.0, compare=False)
    lost_gpu_s: float = field(default=0.0, compare=False)
    checkpointed_at: float | None = field(default=None, compare=False)


def victim_order(jobs: Iterable[RunningJob], now: float) -> list[RunningJob]:
    """Lowest priority first, then the fewest GPU-seconds lost at ``now``, then seconds lost,
    then the most recently started; ties by id, newest first."""
    return sorted(
        jobs,
        key=lambda job: (job.priority, gpu_seconds_lost(job, now), seconds_lost(job, now), -job.started_at, -job.id),
    )


# Searches again without the costliest victim (choose_victims' ``cost``): each is one more
# search, and a set that loses less is seldom more than a few exchanges away.
EXCHANGES = 3


def choose_victims(
    candidates: Sequence[RunningJob],
    fits: Callable[[list[RunningJob]], bool],
    allowed: Callable[[RunningJob, list[RunningJob]], bool] = lambda job, chosen: True,
    cost: Callable[[RunningJob], float] | None = None,
) -> list[RunningJob] | None:
    """The victims, in candidate order, or None when even all of them would not make room.

    ``fits(victims)``: whether the waiting job fits once ``victims`` have left;
    ``allowed(job, chosen)``: whether ``job`` may still be taken after ``chosen``;
    ``cost(job)``: what taking it loses (GPU-seconds).  With ``cost``, the cheapest-first
    prefix may still end on a costly job, the one that frees the room (a whole node): up to
    EXCHANGES times the search runs again without the costliest victim, and its victims are
    taken instead when they lose less in all and none has a higher priority.
    """
    chosen = _victims(candidates, fits, allowed)
    if chosen is None or cost is None:
        return chosen
    left = list(candidates)
    for _ in range(EXCHANGES):
        costliest = max(chosen, key=cost)
        if cost(costliest) <= 0:
            break
        left = [job for job in left if job is not costliest]
        other = _victims(left, fits, allowed)
        if other is None:
            break
        if sum(map(cost, other)) < sum(map(cost, chosen)) and max(job.priority for job in other) <= max(
            job.priority for job in chosen
        ):
            chosen = other
    return chosen


def _victims(
    candidates: Sequence[RunningJob],
    fits: Callable[[list[RunningJob]], bool],
    allowed: Callable[[RunningJob, list[RunningJob]], bool],
) -> list[RunningJob] | None:
    # Every candidate that may be taken, in order; one fit check with all of them (a search
    # that fails costs one placement), then the shortest prefix that fits, by bisection:
    # the same victims as adding one at a time, since more room never makes a fit fail.
    sequence: list[RunningJob] = []
    for job in candidates:
        if allowed(job, sequence):
            sequence.append(job)
    if not sequence or not fits(sequence):
        return None
    low, high = 1, len(sequence)
    while low < high:
        middle = (low + high) // 2
        if fits(sequence[:middle]):
            high = middle
        else:
            low = middle + 1
    chosen = sequence[:high]
    # Put back every victim the job can do without, until none can be (most recent picks first:
    # they were taken last, as the least suitable).
    shrinking = True
    while shrinking:
        shrinking = False
        for job in reversed(chosen):
            rest = [other for other in chosen if other is not job]
            if rest and fits(rest):
                chosen = rest
                shrinking = True
                break
    return chosen
