"""Whether a job could ever fit the nodes, outside a cycle (the submit page's check): the
planner's "never" (NeverFitsNodes) for a gang and a list of nodes, without a NodePool.

A pod that no schedulable node it may run on could hold even empty never fits: the same
per-pod capacity the pool uses (node_views.one_pod: a node sharing its cards by a model that
counts them gives one pod one per card), the same words (reasons.describe)."""

from __future__ import annotations

from collections.abc import Sequence

from .fit import never_on
from .node_views import largest, one_pod, placing_order
from .reasons import Outcome, never_fits_nodes, node_failure_outcome
from .snapshot import Node, PodGroup


def never_fits(gang: Sequence[PodGroup], nodes: Sequence[Node]) -> Outcome | None:
    """Why some pod of ``gang`` fits none of ``nodes`` even empty; None if every pod fits one."""
    screened = never_fits_nodes(gang, *largest(nodes))  # the planner's first screen, its words
    if screened is not None:
        return screened
    capacity = [one_pod(node) for node in nodes]
    names = [node.name for node in nodes]
    pods = sum(group.count for group in gang)
    for group in (gang[number] for number in placing_order(gang)):
        eligible = [number for number, node in enumerate(nodes) if node.admits(group)]
        failure = never_on(group, eligible, capacity, names, pods)
        if failure is not None:
            return node_failure_outcome(failure)
    return None
