"""What a cycle's node pool (fit.py) derives from one node: computed once per Node object."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

from .devices import model
from .snapshot import PODS, Node, PodGroup

# A node that reports no pod limit is not limited by it.
UNLIMITED = 10**18


class NodeView(NamedTuple):
    free: Mapping[str, int]  # allocatable - allocated (pods unlimited if not reported)
    capacity: Mapping[str, int]  # allocatable, interned: nodes of one shape share it
    positive: tuple[tuple[str, int], ...]  # max(free, 0) of every resource, for the pool's totals
    tainted: bool  # has a taint that keeps pods off
    # The most one pod may take here, for "never fits": the capacity, except that a model
    # counting shares of cards (HAMi's nvidia.com/gpu, vGPUs) gives one pod one per card.
    one_pod: Mapping[str, int]


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
        _one_pod(node, capacity),
    )
    if len(_VIEWS) >= _VIEWS_LIMIT:
        _VIEWS.clear()
    _VIEWS[id(node)] = (node, view)
    return view


def _one_pod(node: Node, capacity: Mapping[str, int]) -> Mapping[str, int]:
    cards = node.cards
    count = model(cards.model).count if cards is not None else None
    if cards is None or count is None or capacity.get(count, 0) <= len(cards.memory):
        return capacity
    return MappingProxyType({**capacity, count: len(cards.memory)})


def _note_largest(most: dict[str, int], where: dict[str, str], one_pod: Mapping[str, int], name: str) -> None:
    for resource, amount in one_pod.items():
        if amount > most.get(resource, 0):
            most[resource] = amount
            where[resource] = name


def one_pod(node: Node) -> Mapping[str, int]:
    """The most one pod may take on the node (NodeView.one_pod) without the cycle's caches:
    for a check made outside a cycle (the submit page's)."""
    return _one_pod(node, {PODS: UNLIMITED, **node.allocatable})


def largest(nodes: Iterable[Node]) -> tuple[dict[str, int], dict[str, str]]:
    """The most of each resource one pod may take on one empty schedulable node, and the
    first node offering it: the pool's cluster_max and largest, outside a cycle."""
    most: dict[str, int] = {}
    where: dict[str, str] = {}
    for node in nodes:
        if not node.unschedulable:
            _note_largest(most, where, one_pod(node), node.name)
    return most, where


def short_everywhere(
    requests: Iterable[tuple[str, int]], capacity: list[Mapping[str, int]]
) -> tuple[str, int, int, bool] | None:
    """None if one of these capacities holds a pod with these requests; else what the
    nearest one lacks: the resource, the pod's amount of it, the capacity's index and
    whether another capacity has that much of it (short only of the combination). The
    nearest lacks the fewest resources (then the smallest share of one; then the first).
    Each resource alone may fit some node (the first screen, never_fits_nodes, caught
    those that fit none), so naming the node with the most of one would say "needs 1,
    has 4"."""
    requests = tuple(requests)
    best: tuple[tuple[int, float, int], str, int] | None = None
    for index, c in enumerate(capacity):
        short = [(c.get(r, 0) / a, r, a) for r, a in requests if c.get(r, 0) < a]
        if not short:
            return None
        share, resource, amount = max(short, key=lambda s: (-s[0], s[1]))  # the one it has least of
        key = (len(short), -share, index)
        if best is None or key < best[0]:
            best = (key, resource, amount)
    if best is None:
        return None
    (_, _, index), resource, amount = best
    return resource, amount, index, any(c.get(resource, 0) >= amount for c in capacity)


def placing_order(gang: Sequence[PodGroup]) -> list[int]:
    """The order a gang's groups are placed in, and so diagnosed in: the largest first
    (extended resources, then CPU, then memory), so that the planner and the submit
    page's screen name the same group."""
    return sorted(range(len(gang)), key=lambda number: _size(gang[number]), reverse=True)


def _size(group: PodGroup) -> tuple[int, int, int]:
    extended = cpu = memory = 0
    for name, amount in group.requests:
        if "/" in name:
            extended += amount
        elif name == "cpu":
            cpu = amount
        elif name == "memory":
            memory = amount
    return extended, cpu, memory


class PoolBase(NamedTuple):
    """What a cycle's node pool starts from, for one tuple of nodes: per node its free view,
    capacity and what one pod may take there, the schedulable nodes (and those without
    blocking taints), the most of each resource one pod may take on one empty node and the
    first node offering it, and the free totals of the schedulable nodes."""

    nodes: tuple[Node, ...]
    free: list[Mapping[str, int]]
    capacity: list[Mapping[str, int]]
    one_pod: list[Mapping[str, int]]
    schedulable: list[int]
    plain: list[int]
    cluster_max: dict[str, int]
    largest: dict[str, str]  # resource -> the node that has its cluster_max
    totals: dict[str, int]


# The last base made: a cycle's nodes are mostly the previous cycle's objects (a node is
# made anew when its pods change), so the next base is that one with a few nodes redone.
_LAST: list[PoolBase] = []


def _full(nodes: tuple[Node, ...]) -> PoolBase:
    base = PoolBase(nodes, [], [], [], [], [], {}, {}, {})
    seen: set[int] = set()
    for number, node in enumerate(nodes):
        found = view(node)
        base.free.append(found.free)
        base.capacity.append(found.capacity)
        base.one_pod.append(found.one_pod)
        if node.unschedulable:
            continue
        base.schedulable.append(number)
        if not found.tainted:
            base.plain.append(number)
        if id(found.one_pod) not in seen:  # shared by nodes of one shape
            seen.add(id(found.one_pod))
            _note_largest(base.cluster_max, base.largest, found.one_pod, node.name)
        for name, amount in found.positive:
            base.totals[name] = base.totals.get(name, 0) + amount
    return base


def _redone(last: PoolBase, nodes: tuple[Node, ...], changed: list[int]) -> PoolBase | None:
    """``last`` with the ``changed`` nodes' free views and totals redone; None when one of
    them changed more than its pods (name, shape, taints or schedulability)."""
    free, totals = list(last.free), dict(last.totals)
    for number in changed:
        old, new = last.nodes[number], nodes[number]
        was, now = view(old), view(new)
        if (
            old.name != new.name
            or old.unschedulable != new.unschedulable
            or was.tainted != now.tainted
            or was.capacity is not now.capacity
            or (was.one_pod is not now.one_pod and was.one_pod != now.one_pod)  # its cards' count
        ):
            return None
        free[number] = now.free
        if not new.unschedulable:
            for name, amount in was.positive:
                totals[name] = totals.get(name, 0) - amount
            for name, amount in now.positive:
                totals[name] = totals.get(name, 0) + amount
    return PoolBase(
        nodes, free, last.capacity, last.one_pod, last.schedulable, last.plain, last.cluster_max, last.largest, totals
    )


def pool_base(nodes: tuple[Node, ...]) -> PoolBase:
    """The base of a pool of these nodes (treat it as read-only: copy what you change)."""
    last = _LAST[0] if _LAST else None
    base = None
    if last is not None and len(last.nodes) == len(nodes):
        changed = [number for number, (a, b) in enumerate(zip(last.nodes, nodes, strict=True)) if a is not b]
        if not changed:
            return last
        if len(changed) * 4 <= len(nodes):
            base = _redone(last, nodes, changed)
    if base is None:
        base = _full(nodes)
    _LAST[:] = [base]
    return base
