"""Admission policies: in which order jobs are considered, and the rules around that order.

A policy is data (the features declared in policy.py, each with its default)
plus one ordering method; the planner implements the mechanics (quota,
nodes, reasons) once for all of them:

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
- ``shortest`` (duration_policy.py): expected service first, from history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from .duration_policy import ShortestFirstPolicy
from .policy import Policy, by_submission
from .snapshot import PendingJob

DEFAULT_POLICY = "priority"


@dataclass(frozen=True, kw_only=True)
class SeedPolicy(Policy):
    name: str = "seed"
    node_fit: bool = False
    one_at_a_time: bool = True

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        ordered = by_submission(jobs)
        ordered.sort(key=attrgetter("cpu"), reverse=True)  # stable even when reversed
        return ordered


@dataclass(frozen=True, kw_only=True)
class FifoPolicy(Policy):
    name: str = "fifo"
    strict: bool = True

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        return by_submission(jobs)


@dataclass(frozen=True, kw_only=True)
class FifoBestEffortPolicy(FifoPolicy):
    name: str = "fifo-besteffort"
    strict: bool = False


@dataclass(frozen=True, kw_only=True)
class PriorityPolicy(Policy):
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
    backfill: bool = True
    hold_after_s: float | None = 12 * 3600.0

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        ordered = by_submission(jobs)
        rate = self.aging_per_hour / 3600.0  # priority + rate x seconds waited
        ordered.sort(key=lambda job: job.priority + rate * max(now - job.submitted_at, 0.0), reverse=True)
        return ordered


@dataclass(frozen=True, kw_only=True)
class FairPolicy(PriorityPolicy):
    name: str = "fair"
    fair_share: bool = True


_POLICIES: dict[str, type[Policy]] = {
    "seed": SeedPolicy,
    "fifo": FifoPolicy,
    "fifo-besteffort": FifoBestEffortPolicy,
    "priority": PriorityPolicy,
    "fair": FairPolicy,
    "shortest": ShortestFirstPolicy,  # duration_policy.py: shortest expected service first, from history
}
POLICY_NAMES = tuple(_POLICIES)


def get_policy(name: str = DEFAULT_POLICY, **options: Any) -> Policy:
    """The policy called ``name`` (one of POLICY_NAMES).  ``options`` are its fields:
    the features in policy.py, plus ``aging_per_hour`` for priority and fair, and
    ``by_service`` for shortest."""
    policy = _POLICIES.get(name)
    if policy is None:
        raise ValueError(f"unknown policy {name!r}; expected one of {', '.join(POLICY_NAMES)}")
    return policy(**options)


def namespace_overrides(policies: Mapping[str, Policy | str], default: Policy) -> dict[str, Policy]:
    """Snapshot.policies resolved; an override naming the global policy is no override."""
    resolved = {}
    for namespace, policy in policies.items():
        if isinstance(policy, str):
            # (Preemption within a namespace is the cluster's setting, whatever orders its queue.)
            policy = (
                default
                if policy == default.name
                else get_policy(policy, preempt_lower_priority=default.preempt_lower_priority)
            )
        if policy is not default:
            resolved[namespace] = policy
    return resolved


def queue_order(
    pending: Sequence[PendingJob], policy: Policy, overrides: Mapping[str, Policy], now: float
) -> list[PendingJob]:
    """The global policy's order; a namespace with an override keeps the places the
    global order gives it (so which namespace admits when is the global policy's
    decision) and fills them with its own jobs in its own policy's order."""
    ordered = policy.order(pending, now)
    if not overrides:
        return ordered
    own: dict[str, list[PendingJob]] = {}
    for job in pending:
        if job.namespace in overrides:
            own.setdefault(job.namespace, []).append(job)
    queues = {name: iter(overrides[name].order(jobs, now)) for name, jobs in own.items()}
    return [next(queues[job.namespace]) if job.namespace in queues else job for job in ordered]
