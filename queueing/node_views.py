"""What a cycle's node pool (fit.py) derives from one node: computed once per Node object."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from .snapshot import PODS, Node

# A node that reports no pod limit is not limited by it.
UNLIMITED = 10**18


class NodeView(NamedTuple):
    free: Mapping[str, int]  # allocatable - allocated (pods unlimited if not reported)
    capacity: Mapping[str, int]  # allocatable, interned: nodes of one shape share it
    positive: tuple[tuple[str, int], ...]  # max(free, 0) of every resource, for the pool's totals
    tainted: bool  # has a taint that keeps pods off


# Node objects are frozen and callers keep them between cycles (the dispatcher's cache,
# the replay), so what the pool derives from one is computed once per object.  Keyed by
# id() with the node held, so an id is never reused while its entry lives; cleared when
# large, which only costs recomputing.
_VIEWS: dict[int, tuple[Node, NodeView]] = {}
_VIEWS_LIMIT = 50_000
_CAPACITIES: dict[tuple[tuple[str, int], ...], Mapping[str, int]] = {}


def view(node: Node) -> NodeView:
    found = _VIEWS.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    allocatable = dict(node.allocatable)
    if PODS not in allocatable:
        allocatable[PODS] = UNLIMITED
    key = tuple(sorted(allocatable.items()))
    capacity = _CAPACITIES.get(key)
    if capacity is None:
        if len(_CAPACITIES) >= _VIEWS_LIMIT:
            _CAPACITIES.clear()
        capacity = _CAPACITIES[key] = MappingProxyType(allocatable)
    allocated = node.allocated
    free = MappingProxyType({name: amount - allocated.get(name, 0) for name, amount in allocatable.items()})
    view = NodeView(
        free,
        capacity,
        tuple((name, max(amount, 0)) for name, amount in free.items()),
        any(taint.blocks for taint in node.taints),
    )
    if len(_VIEWS) >= _VIEWS_LIMIT:
        _VIEWS.clear()
    _VIEWS[id(node)] = (node, view)
    return view
