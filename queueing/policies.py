"""Admission policies: in which order jobs are considered, and the rules around that order.

A policy is data plus one ordering method; the planner implements the
mechanics (quota, nodes, reasons) once for all of them:

- ``seed``: the source article's algorithm, kept as the baseline.  Per
  namespace, and only when it has no in-flight job: of the jobs that fit
  the free quota, release the one with the largest CPU request (ties: the
  older).  Quota only.  Like every policy it leaves jobs in backoff alone.
- ``fifo`` (strict: a head that does not fit blocks its namespace) and
  ``fifo-besteffort`` (skip it): submit order.
- ``priority`` (default): base priority + aging, ties by submit time.  A
  namespace's head (the first job that cannot start) short of quota reserves
  the earliest time its quota frees up, estimated from the running jobs'
  expected ends; later jobs start only if they do not delay that time under
  the estimates (backfill.py).  Once it has waited ``hold_after_s`` it holds
  its quota outright, so an estimate that was too short cannot starve it; a
  head no estimate can place, or short of nodes, does so after
  ``reservation_after_s`` (and holds nodes).
- ``fair``: ``priority`` within a namespace; across namespaces the next
  admission goes to the lowest weighted dominant share (DRF), which only
  matters when the cluster, not the quota, is what runs out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol, runtime_checkable

from .snapshot import PendingJob

DEFAULT_POLICY = "priority"


@runtime_checkable
class Policy(Protocol):
    name: str
    node_fit: bool  # False: check quota only, like the article
    strict: bool  # a namespace's head that cannot start blocks the jobs behind it
    one_at_a_time: bool  # a namespace with an in-flight job releases nothing (at most one per cycle)
    reservation_after_s: float | None  # a head waiting longer reserves what it needs; None: never
    max_reservations: int  # node reservations per cycle (each holds capacity cluster-wide)
    fair_share: bool  # interleave namespaces by weighted dominant share
    # Optional (read with getattr, default off): ``backfill`` (bool), ``hold_after_s``
    # and ``unknown_duration_s`` (float | None), see PriorityPolicy.

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        """Jobs in queue order: each namespace's queue is this order restricted to it."""
        ...


def by_submission(jobs: Sequence[PendingJob]) -> list[PendingJob]:
    # Stable passes on single keys are faster than one sort on tuples, and give the same order.
    ordered = sorted(jobs, key=attrgetter("id"))
    ordered.sort(key=attrgetter("submitted_at"))
    return ordered


@dataclass(frozen=True)
class SeedPolicy:
    name: str = "seed"
    node_fit: bool = False
    strict: bool = False
    one_at_a_time: bool = True
    reservation_after_s: float | None = None
    max_reservations: int = 0
    fair_share: bool = False

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        ordered = by_submission(jobs)
        ordered.sort(key=attrgetter("cpu"), reverse=True)  # stable even when reversed
        return ordered


@dataclass(frozen=True)
class FifoPolicy:
    name: str = "fifo"
    node_fit: bool = True
    strict: bool = True
    one_at_a_time: bool = False
    reservation_after_s: float | None = None
    max_reservations: int = 0
    fair_share: bool = False

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        return by_submission(jobs)


@dataclass(frozen=True)
class PriorityPolicy:
    """``aging_per_hour``: priority points a job gains per hour of waiting.

    Linear aging never reorders two waiting jobs against each other, but a
    job submitted later needs a higher base priority the longer the older
    one has waited: after (difference in priority / rate) hours, the old job
    is first.  Together with the reservation nothing starves.

    The head's reservation.  At once (``backfill``) a head short of quota gets a
    shadow reservation: the earliest time its quota frees up by the running
    jobs' expected ends; later jobs start only if they do not delay it under
    the estimates (backfill.py).  Once it has waited ``hold_after_s`` it holds
    its quota outright: estimates that were too short cannot starve it.  A
    head that no expected end makes room for, or that is short of nodes,
    holds its quota (and the nodes nearest to fitting it) after
    ``reservation_after_s``, as every head did before backfill.  On the Philly
    replay an hour's outright hold was the default's main cost: it idled a
    namespace's quota while hour-long jobs drained from it, and 1-GPU jobs
    waited up to ten hours behind it (bench/results/trace_replay.md).
    ``unknown_duration_s``: the duration assumed for a waiting job with no
    estimate (None: it may use only quota the head will not need).
    """

    name: str = "priority"
    aging_per_hour: float = 1.0
    reservation_after_s: float | None = 3600.0
    max_reservations: int = 8
    fair_share: bool = False
    node_fit: bool = True
    strict: bool = False
    one_at_a_time: bool = False
    backfill: bool = True
    hold_after_s: float | None = 12 * 3600.0
    unknown_duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.hold_after_s is not None and self.hold_after_s < 0:
            raise ValueError("hold_after_s must be >= 0 or None")

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        ordered = by_submission(jobs)
        rate = self.aging_per_hour / 3600.0  # priority + rate x seconds waited
        ordered.sort(key=lambda job: job.priority + rate * max(now - job.submitted_at, 0.0), reverse=True)
        return ordered


def get_policy(name: str = DEFAULT_POLICY, **options) -> Policy:
    """``seed``, ``fifo`` (strict), ``fifo-besteffort``, ``priority`` (options
    aging_per_hour, reservation_after_s, max_reservations, backfill,
    hold_after_s, unknown_duration_s), ``fair`` (same options)
    or ``shortest`` (see duration_policy.py)."""
    if name == "seed":
        return SeedPolicy(**options)
    if name == "fifo":
        return FifoPolicy(**options)
    if name == "fifo-besteffort":
        return FifoPolicy(name=name, strict=False, **options)
    if name == "priority":
        return PriorityPolicy(**options)
    if name == "fair":
        return PriorityPolicy(name=name, fair_share=True, **options)
    if name == "shortest":  # duration_policy.py: shortest expected service first, from history
        from .duration_policy import ShortestFirstPolicy

        return ShortestFirstPolicy(**options)
    raise ValueError(f"unknown policy {name!r}; expected one of {', '.join(POLICY_NAMES)}")


POLICY_NAMES = ("seed", "fifo", "fifo-besteffort", "priority", "fair", "shortest")
