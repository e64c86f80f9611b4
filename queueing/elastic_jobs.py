"""Elastic jobs in the planner: partial admission, and growth into room left idle.

A job whose roles have an elastic range (PodSet.minimum/maximum: it runs with any number
of pods of such a role in the range) is admitted, when it does not fit whole, at the
largest count down to its minimum that fits (Kueue's partial admission), every other rule
of phase 3 applying to that smaller gang; and, once running below its maximum, it grows
into capacity that nothing waiting could use in the plan (``grow``).  Shrinking before
anything is killed is shrink.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Protocol

from .cycle_state import CycleState
from .decisions import Admission, Resize
from .fit import NodeFailure
from .quota_fit import quota_check
from .reasons import Outcome, Reason
from .snapshot import PendingJob, RunningJob, gang_of, node_totals
from .topology_request import request_of
from .workload import Workload

# What a smaller gang may get round: room (quota, nodes, a lender), not a policy hold, nor
# a pod that no node holds (NeverFitsNodes: the same for one pod as for all).
_SHRINKABLE = frozenset(
    {
        Reason.QUOTA_EXCEEDED,
        Reason.RESERVED_FOR_OLDER_JOB,
        Reason.NO_NODE_FITS,
        Reason.NO_DOMAIN_FITS,
        Reason.CANNOT_BORROW,
        Reason.OUTLASTS_LENT_POOL,  # (fewer pods may fit on the nodes it may use)
        Reason.NEVER_FITS_QUOTA,
    }
)
# Waiting for room that growth could take: quota or a lender's (own namespace or cohort).
_QUOTA_WAITS = frozenset({Reason.QUOTA_EXCEEDED, Reason.RESERVED_FOR_OLDER_JOB, Reason.CANNOT_BORROW})
# Waiting for nodes, which every namespace shares.
_NODE_WAITS = frozenset({Reason.NO_NODE_FITS, Reason.NO_DOMAIN_FITS})


def elastic_key(workload: Workload) -> tuple[tuple[str, int | None], ...]:
    """What a job's shape leaves out of its elastic ranges (jobs of one gang may differ in them)."""
    return tuple((pod_set.role, pod_set.minimum) for pod_set in workload.pod_sets)


def at_counts(job: PendingJob, counts: Mapping[str, int]) -> PendingJob:
    """``job`` with these counts of its roles: its demand less what the pods left out ask
    (a stored demand that differs from the workload's, e.g. one without the object count,
    keeps its difference)."""
    full = job.workload
    fewer = full.with_counts(counts)
    whole, part = full.quota_demand(), fewer.quota_demand()
    demand = {key: max(amount - (whole.get(key, 0) - part.get(key, 0)), 0) for key, amount in job.demand.items()}
    return PendingJob(
        job.id,
        job.namespace,
        job.priority,
        job.submitted_at,
        fewer,
        job.attempts,
        job.backoff_until,
        job.expected_duration,
        demand,
        job.preempted_by,
        job.preempting,
        job.pods_created,
    )


class Admitting(Protocol):
    """The planner as ``admit`` sees it: its admissions, and whether a refusal is a probe
    (it leaves no trace: no head block, hold or reservation)."""

    admissions: list[Admission]
    probing: bool


def admit(job: PendingJob, attempt: Callable[[PendingJob], Outcome | None], planner: Admitting) -> Outcome | None:
    """Admit ``job`` (``attempt``: phase 3 for one gang) at the largest count that fits, its
    elastic roles down to their minimum one pod at a time, each smaller gang going through
    every rule of phase 3; a job that does not fit even at its minimum gets the reason for
    its minimum.  Every try but the last is a probe: the last, at the minimum, is the job's
    real turn (a head that waits, waits with its minimum)."""
    steps = list(_steps(job.workload))
    if not steps:
        return attempt(job)
    try:
        planner.probing = True
        outcome = attempt(job)
        if outcome is None or outcome[0] not in _SHRINKABLE:
            return outcome
        for number, counts in enumerate(steps):
            smaller = at_counts(job, counts)
            planner.probing = number < len(steps) - 1
            outcome = attempt(smaller)
            if outcome is None:
                planner.admissions[-1] = replace(planner.admissions[-1], counts=smaller.workload.counts)
                return None
        return outcome
    finally:
        planner.probing = False


def _steps(workload: Workload) -> Iterator[dict[str, int]]:
    """The counts of its elastic roles, one pod fewer each step, down to every minimum: the
    role furthest above its minimum gives up a pod first."""
    floor = {p.role: p.minimum for p in workload.pod_sets if p.minimum is not None}
    counts = {role: workload.counts[role] for role in floor}
    while any(counts[role] > floor[role] for role in counts):
        role = max(counts, key=lambda name: (counts[name] - floor[name], name))
        counts[role] -= 1
        yield dict(counts)


def grow(state: CycleState) -> dict[int, Resize]:
    """After every pending job has been decided: each running elastic job below its maximum
    takes what is left, a pod at a time, highest priority first.  The rule that keeps that
    room for waiting jobs, kept simple: nothing grows while a job waits for nodes anywhere
    (or a node is held for one), nor while a job of its namespace or its elastic-quota
    cohort waits for quota; growth never borrows; a job with a topology request does not
    grow (its new pods would have to join its domain)."""
    growing = [
        job
        for job in state.snapshot.running
        if job.elastic and job.preempted_for is None and job.shrinking_for is None and request_of(job.workload) is None
    ]
    if not growing:
        return {}
    waiting = [(job, outcome[0]) for _, job, outcome in state.waiting]
    waiting += [(job, Reason.PREEMPTING) for _, job, _ in state.waiting if job.id in state.preempting]
    if state.pool.reservations or any(reason in _NODE_WAITS or reason is Reason.PREEMPTING for _, reason in waiting):
        return {}
    elastic = state.elastic
    short = {job.namespace for job, reason in waiting if reason in _QUOTA_WAITS}
    short_cohorts = {elastic.cohort_of(namespace) for namespace in short} - {None}
    frees: dict[str, dict[str, int] | None] = {}
    resizes = {}
    for job in sorted(growing, key=lambda j: (-j.priority, j.started_at, j.id)):
        if job.namespace in short or (elastic.active and elastic.cohort_of(job.namespace) in short_cohorts):
            continue
        if job.namespace not in frees:
            frees[job.namespace] = _free_quota(state, job.namespace)
        grown = _grow_one(state, job, frees[job.namespace])
        if grown is not None:
            resizes[job.id] = grown
    return resizes


def _free_quota(state: CycleState, namespace: str) -> dict[str, int] | None:
    """Its free quota as phase 3 left it; None: it has no ResourceQuota."""
    known = state.namespaces.get(namespace)
    if known is not None:
        return known.free
    quota = state.snapshot.quotas.get(namespace)
    if quota is None:
        return None
    return {key: limit - quota.used.get(key, 0) for key, limit in quota.hard.items()}


def _grow_one(state: CycleState, job: RunningJob, free: dict[str, int] | None) -> Resize | None:
    counts = dict(job.counts)
    added: list[tuple[str, int, str]] = []
    cards: list[tuple[str, int]] = []
    for pod_set in job.workload.pod_sets:
        if pod_set.maximum is None:
            continue
        one = job.workload.with_counts({p.role: int(p.role == pod_set.role) for p in job.workload.pod_sets})
        demand = {key: amount for key, amount in one.quota_demand(count_object=False).items() if amount}
        gang = gang_of(one)
        totals = node_totals(gang)
        while counts[pod_set.role] < pod_set.maximum:
            if free is not None and quota_check(demand, free, free)[1] is not None:
                break
            pod = PendingJob(job.id, job.namespace, job.priority, job.started_at, one, demand=demand)
            if state.elastic.active and (state.elastic.check(pod) is not None or state.elastic.borrows(pod)):
                break
            if state.node_fit:
                within = state.tide.extras_allowed() if state.tide is not None else None
                if state.clusters is not None:  # (its new pods in its own cluster)
                    own = state.clusters.nodes_of(job.placements)
                    within = own if within is None else own & within
                placed = state.pool.place(gang, totals, within=within)
                if isinstance(placed, NodeFailure):
                    break
                added.append((pod_set.role, counts[pod_set.role], state.pool.names[placed[0][1]]))
                cards.append((pod_set.role, counts[pod_set.role]))
            if free is not None:
                for key in free:
                    free[key] -= demand.get(key, 0)
            if state.elastic.active:
                state.elastic.admit(pod)
            counts[pod_set.role] += 1
    if counts == dict(job.counts):
        return None
    state.pool.cards.record_pods(job.id, cards)
    return Resize(job.id, job.namespace, counts, tuple(sorted(added)) if state.node_fit else None)
