"""Shrink before kill: preemption takes elastic jobs' extra pods before whole jobs.

An elastic running job (PodSet.minimum) runs its minimum and, above it, extra pods that
only make it faster.  For either cause of preemption (preemption.py), the extra pods of
the candidates are the first victims, as partial victims: the job keeps running with
fewer pods (the highest indexes of a role go, as its operator scales down).  Of them, the
fewest pods that make room (no pod of them could be spared); only when all of them are not
enough are whole jobs taken, in preemption's order, on top of all the extras: the tiers
are extras first, then whole jobs (an elastic job's minimum among them, as any job).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from .preemption import choose_victims
from .snapshot import RunningJob


def extra_pods(job: RunningJob) -> list[tuple[str, int]]:
    """Its pods above its minimum as (role, index), in the order they go: the highest index
    of the role furthest above its minimum first."""
    floor = {p.role: p.minimum for p in job.workload.pod_sets if p.minimum is not None}
    counts = {role: job.counts.get(role, 0) for role in floor}
    pods = []
    while any(counts[role] > floor[role] for role in floor):
        role = max(floor, key=lambda name: (counts[name] - floor[name], name))
        counts[role] -= 1
        pods.append((role, counts[role]))
    return pods


def pods_of(job: RunningJob, start: Mapping[str, int], end: Mapping[str, int]) -> RunningJob:
    """The pods of ``job`` with start[role] <= index < end[role], as
    a victim: placed where ``job`` has them, and freeing only what those pods hold (the job
    itself stays, so the quota its object counts for does not)."""
    counts = {role: end.get(role, 0) - start.get(role, 0) for role in job.counts}
    placements = tuple(
        (role, index, node) for role, index, node in job.placements if start.get(role, 0) <= index < end.get(role, 0)
    )
    victim = replace(job, counts=counts, placements=placements)
    after = job.workload.with_counts(end).quota_demand()
    before = job.workload.with_counts(start).quota_demand()
    # (Set after the fact: a RunningJob's own demand counts its object, these pods do not.)
    object.__setattr__(victim, "demand", MappingProxyType({key: after[key] - before.get(key, 0) for key in after}))
    return victim


def shrunk(job: RunningJob, pods: int) -> tuple[RunningJob, dict[str, int]]:
    """The first ``pods`` of its extra pods as a victim, and the counts it keeps."""
    keep = dict(job.counts)
    for role, _ in extra_pods(job)[:pods]:
        keep[role] -= 1
    return pods_of(job, keep, job.counts), keep


def leaving_pods(job: RunningJob) -> RunningJob | None:
    """A job being shrunk (``shrinking_for``): its pods beyond its counts, still placed."""
    end = dict(job.counts)
    for role, index, _ in job.placements:
        if role in end and index >= end[role]:
            end[role] = max(end[role], index + 1)
    return None if end == dict(job.counts) else pods_of(job, job.counts, end)


def choose(
    elastic: Sequence[RunningJob],
    whole: Sequence[RunningJob],
    fits: Callable[[list[RunningJob]], bool],
    allowed: Callable[[RunningJob, list[RunningJob]], bool],
    cost: Callable[[RunningJob], float] | None = None,
) -> tuple[list[RunningJob], dict[int, dict[str, int]]] | None:
    """The victims for one waiting job, with the counts each shrunk job keeps (by id), or None.
    ``elastic``: the jobs whose extra pods may go, ``whole``: the jobs that may go whole, each
    in preemption's order; ``fits`` and ``allowed`` as choose_victims takes them."""
    sequence: list[tuple[RunningJob, int]] = []
    extras: list[RunningJob] = []
    for job in elastic:
        count = len(extra_pods(job))
        victim = shrunk(job, count)[0] if count else None
        if victim is not None and allowed(victim, extras):
            sequence.append((job, count))
            extras.append(victim)
    if extras and fits(extras):
        return _fewest(sequence, fits)

    def merged(chosen: list[RunningJob]) -> list[RunningJob]:
        ids = {job.id for job in chosen}
        return [victim for victim in extras if victim.id not in ids] + chosen

    taken = choose_victims(whole, lambda chosen: fits(merged(chosen)), lambda job, c: allowed(job, merged(c)), cost)
    if taken is None:
        return None
    ids = {job.id for job in taken}
    keep = {job.id: shrunk(job, count)[1] for job, count in sequence if job.id not in ids}
    return merged(taken), keep


def _fewest(
    sequence: list[tuple[RunningJob, int]], fits: Callable[[list[RunningJob]], bool]
) -> tuple[list[RunningJob], dict[int, dict[str, int]]]:
    """Of the extra pods (all of them fit), the fewest: the shortest run of jobs that fits,
    then each job's pods cut to the fewest that still fit with the others', until none can
    be cut (more room never makes a fit fail: no proper subset of the pods would do)."""

    def victims(amounts: list[int]) -> list[RunningJob]:
        return [shrunk(job, pods)[0] for (job, _), pods in zip(sequence, amounts, strict=True) if pods]

    amounts = [count for _, count in sequence]
    low, high = 1, len(amounts)
    while low < high:
        middle = (low + high) // 2
        if fits(victims(amounts[:middle] + [0] * (len(amounts) - middle))):
            high = middle
        else:
            low = middle + 1
    amounts = amounts[:high] + [0] * (len(amounts) - high)
    cutting = True
    while cutting:
        cutting = False
        for number in reversed(range(len(amounts))):
            if not amounts[number]:
                continue
            low, high = 0, amounts[number]
            while low < high:
                middle = (low + high) // 2
                trial = amounts[:number] + [middle] + amounts[number + 1 :]
                if any(trial) and fits(victims(trial)):
                    high = middle
                else:
                    low = middle + 1
            if high < amounts[number]:
                amounts[number], cutting = high, True
    chosen = [(job, pods) for (job, _), pods in zip(sequence, amounts, strict=True) if pods]
    return [shrunk(job, pods)[0] for job, pods in chosen], {job.id: shrunk(job, pods)[1] for job, pods in chosen}
