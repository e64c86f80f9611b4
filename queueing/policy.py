"""What a policy is: the features the planner reads, each declared once with its default.

Like Kueue's optional job interfaces, a feature a policy does not use is simply
left at its default (off): the planner and the trace replay read every feature
directly, and a policy states only where it differs.  The concrete policies and
the registry by name are in policies.py (and duration_policy.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import ClassVar

from .snapshot import PendingJob


@dataclass(frozen=True, kw_only=True)
class Policy(ABC):
    """A queue order (``order``) plus the head-of-line rules the planner applies around it."""

    name: str
    node_fit: bool = True  # False: check quota only, like the article
    strict: bool = False  # a namespace's head that cannot start blocks the jobs behind it
    one_at_a_time: bool = False  # a namespace with an in-flight job releases nothing (at most one per cycle)
    reservation_after_s: float | None = None  # a head waiting longer reserves what it needs; None: never
    max_reservations: int = 0  # node reservations per cycle (each holds capacity cluster-wide)
    fair_share: bool = False  # interleave namespaces by weighted dominant share
    # With fair_share: past use counts too (Slurm's fair-share): Snapshot.usage, each namespace's
    # GPU-hours decayed with this half-life; None: only what runs now counts.
    usage_half_life_days: float | None = None
    # A head short of quota gets a shadow reservation at once, and later jobs backfill around it (backfill.py).
    backfill: bool = False
    hold_after_s: float | None = None  # with backfill: a head waiting longer holds its quota outright; None: never
    unknown_duration_s: float | None = None  # the duration assumed for a job with no estimate; None: unknown
    promote_after_s: float | None = None  # a job waiting longer moves ahead in the order; None: never
    # A job waiting on quota or nodes held by lower-priority jobs of its own namespace preempts them.
    preempt_lower_priority: bool = False
    # The order reads PendingJob.expected_duration, so the caller should fill it in.
    uses_duration_estimate: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.hold_after_s is not None and self.hold_after_s < 0:
            raise ValueError("hold_after_s must be >= 0 or None")
        if self.usage_half_life_days is not None and not self.usage_half_life_days > 0:
            raise ValueError("usage_half_life_days must be > 0 or None")

    @abstractmethod
    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        """Jobs in queue order: each namespace's queue is this order restricted to it."""


def by_submission(jobs: Sequence[PendingJob]) -> list[PendingJob]:
    # Stable passes on single keys are faster than one sort on tuples, and give the same order.
    ordered = sorted(jobs, key=attrgetter("id"))
    ordered.sort(key=attrgetter("submitted_at"))
    return ordered
