"""Failed nodes: the pods of admitted gangs whose planned node failed (not ready, cordoned,
gone) are placed again on healthy nodes, before anything new is admitted, the way Kueue
replaces a failed node under a topology assignment. A gang whose lost pods find no room
is evicted: the caller takes it back and queues it again.

The caller (the dispatcher's snapshot, a replay) says which planned pods are lost; the
planner charges the new nodes first, so the queue behind sees them taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .clusters import ClusterPlan
from .fit import NodeFailure, NodePool
from .snapshot import PodGroup, gang_of, node_totals
from .workload import Workload

Placement = tuple[tuple[str, int, str], ...]  # (role, pod index, node) per pod


@dataclass(frozen=True)
class Replacement:
    job_id: int
    namespace: str
    workload: Workload
    keep: Placement  # its planned pods whose nodes are sound
    lost: Placement  # its planned pods whose nodes failed


@dataclass(frozen=True)
class Replaced:
    """What phase 3 decided for the gangs that lost nodes: the whole new placement of each
    gang that fits again, and why each other one is evicted."""

    placements: Mapping[int, Placement]
    evicted: Mapping[int, str]


def replace(pool: NodePool, replacements: Sequence[Replacement], clusters: ClusterPlan | None = None) -> Replaced:
    """`clusters`, with several: the lost pods stay in their gang's cluster."""
    placements: dict[int, Placement] = {}
    evicted: dict[int, str] = {}
    for replacement in replacements:
        lost_nodes = sorted({node for _, _, node in replacement.lost})
        gang = _lost_gang(replacement)
        within = None if clusters is None else clusters.nodes_of((*replacement.keep, *replacement.lost))
        placed = pool.place(gang, node_totals(gang), within) if gang else []
        if isinstance(placed, NodeFailure):
            evicted[replacement.job_id] = (
                f"its node {', '.join(lost_nodes)} failed and no node has room for its "
                f"{len(replacement.lost)} pod(s) from there: queued again"
            )
            continue
        # The lost pods keep their numbers within their role, on their new nodes.
        numbers: dict[str, list[int]] = {}
        for role, index, _ in sorted(replacement.lost):
            numbers.setdefault(role, []).append(index)
        moved = []
        for group_number, node_number in placed:
            role = gang[group_number].role
            moved.append((role, numbers[role].pop(0), pool.names[node_number]))
        pool.cards.record_pods(replacement.job_id, [(role, index) for role, index, _ in moved])
        placements[replacement.job_id] = tuple(sorted((*replacement.keep, *moved)))
    return Replaced(placements, evicted)


def _lost_gang(replacement: Replacement) -> tuple[PodGroup, ...]:
    """The job's pod groups, as many pods of each as it lost."""
    counts: dict[str, int] = {}
    for role, _, _ in replacement.lost:
        counts[role.lower()] = counts.get(role.lower(), 0) + 1
    return tuple(
        PodGroup(group.role, counts[group.role.lower()], group.requests, group.constraints)
        for group in gang_of(replacement.workload)
        if counts.get(group.role.lower())
    )
