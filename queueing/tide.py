"""Lent ("tidal") capacity: nodes that online services lend for a while and take back.

A pool of lent nodes is reclaimed at ``reclaim_at``; ``notice_s`` before that nothing new
starts there, so that what runs has time to finish.  A job may be placed on a pool's nodes
only if it will be done by the reclaim by its predicted tail bound (the run time's conformal
quantile at JOBDASH_LENT_COVERAGE, 99 % by default: ``Prediction.tail_s``), or if it checkpoints
(``jobdash.io/checkpoints: "true"``: it may run past the reclaim and is preempted then, with
the notice as its grace period).  ``may_use`` is that rule; everything else here applies it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .checkpoint_names import CHECKPOINT_ON_NOTICE
from .workload import Workload

if TYPE_CHECKING:  # snapshot.py imports this module
    from .snapshot import PendingJob

CHECKPOINTS_ANNOTATION = "jobdash.io/checkpoints"
# Why a job may not use a pool now.
NOTICE, OUTLASTS, UNPREDICTED = "notice", "outlasts", "unpredicted"
_DAY = 86_400.0
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class LentPool:
    """Nodes (by name) lent until ``reclaim_at`` (epoch seconds); nothing new starts on them
    in the last ``notice_s`` seconds.  ``timezone`` (IANA) is the one its times are told in."""

    name: str
    nodes: frozenset[str]
    reclaim_at: float
    notice_s: float
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", frozenset(self.nodes))
        if not self.notice_s >= 0:
            raise ValueError(f"lent pool {self.name!r}: notice_s must be >= 0, got {self.notice_s}")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise ValueError(f"lent pool {self.name!r}: unknown timezone {self.timezone!r}") from error


def checkpoints_of(workload: Workload) -> bool:
    """Whether the job says it checkpoints so that a reclaim costs it nothing: its annotation
    is exactly "true", or it writes a checkpoint on notice (``jobdash.io/checkpoint-on-notice``,
    issue 48: it leaves as soon as it has, within the pool's notice)."""
    annotations = workload.annotations
    return annotations.get(CHECKPOINTS_ANNOTATION) == "true" or CHECKPOINT_ON_NOTICE in annotations


def may_use(pool: LentPool, now: float, bound: float | None, checkpoints: bool) -> str | None:
    """The rule: None if a pod of a job (its tail run-time ``bound`` in seconds, None without
    a prediction) may be placed on the pool's nodes now, else why not (NOTICE, UNPREDICTED,
    OUTLASTS)."""
    if now >= pool.reclaim_at - pool.notice_s:
        return NOTICE
    if checkpoints:
        return None
    if bound is None:
        return UNPREDICTED
    return None if now + bound <= pool.reclaim_at else OUTLASTS


def clock_words(at: float, timezone: str, now: float) -> str:
    """``at`` on the clock of ``timezone``: "08:00", or "Nov 28 08:00" when it is not within a day of ``now``."""
    local = datetime.fromtimestamp(at, ZoneInfo(timezone))
    clock = f"{local.hour:02d}:{local.minute:02d}"
    return clock if abs(at - now) <= _DAY else f"{_MONTHS[local.month - 1]} {local.day} {clock}"


def _span(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    return f"{round(seconds / 60)} min" if seconds >= 60 else f"{seconds:g} s"


def words(detail: Mapping[str, Any]) -> str:
    """The message of a job kept off a lent pool (the detail ``Bar.detail`` builds)."""
    pool, at = detail["pool"], clock_words(detail["reclaim_at"], detail["timezone"], detail["now"])
    if detail["why"] == NOTICE:
        return (
            f"node-pool {pool} is reclaimed at {at}: nothing new starts there in its last {_span(detail['notice_s'])}"
        )
    if detail["why"] == OUTLASTS and detail["bound"] == math.inf:
        return f"too few runs like it on record to be sure it ends by {at}, when node-pool {pool} is reclaimed"
    if detail["why"] == UNPREDICTED:
        return f"has no run-time prediction, so it is not placed on node-pool {pool} (reclaimed at {at}) unless it checkpoints"
    return f"would run past {at}, when node-pool {pool} is reclaimed"


class Bar(NamedTuple):
    """The lent nodes a job may not use now."""

    key: tuple[int, ...]  # the pools barred, by their number: jobs with one key are placed alike
    allowed: frozenset[int]  # the node numbers it may use
    pool: LentPool  # the first pool barred, named in its reason
    why: str

    def detail(self, job: PendingJob, now: float) -> dict[str, Any]:
        pool = self.pool
        return {
            "pool": pool.name,
            "reclaim_at": pool.reclaim_at,
            "bound": job.bound,
            "why": self.why,
            "notice_s": pool.notice_s,
            "timezone": pool.timezone,
            "now": now,
        }


class Tide:
    """One cycle's lent pools over its node numbers (``names``: the pool's node names, in order)."""

    def __init__(self, pools: Iterable[LentPool], names: Sequence[str], now: float):
        number = {name: index for index, name in enumerate(names)}
        self.now = now
        # A pool none of whose nodes is in the snapshot bars nothing.
        self.pools = [
            (pool, numbers)
            for pool in pools
            if (numbers := frozenset(number[name] for name in pool.nodes if name in number))
        ]
        self.everything = frozenset(range(len(names)))
        self._allowed: dict[tuple[int, ...], frozenset[int]] = {}  # one object per key: eligible() caches by it

    def extras_allowed(self) -> frozenset[int] | None:
        """The nodes an elastic job's extra pods may grow onto (None: every node): any but a
        pool's in its notice window. Extras need no bound: at the reclaim they are given back
        and the job runs on (dispatch/phases/reclaim.py), so nothing is killed."""
        closing = [numbers for pool, numbers in self.pools if self.now >= pool.reclaim_at - pool.notice_s]
        return self.everything.difference(*closing) if closing else None

    def barred(self, job: PendingJob) -> Bar | None:
        """What ``job`` may not use now, or None: it may use every node."""
        key: tuple[int, ...] = ()
        first: tuple[LentPool, str] | None = None
        for index, (pool, _) in enumerate(self.pools):
            why = may_use(pool, self.now, job.bound, job.checkpoints)
            if why is not None:
                key += (index,)
                if first is None:
                    first = (pool, why)
        if first is None:
            return None
        allowed = self._allowed.get(key)
        if allowed is None:
            allowed = self._allowed[key] = self.everything.difference(*(self.pools[index][1] for index in key))
        return Bar(key, allowed, *first)
