"""Does a job fit the nodes?  Gang placement (quota fit is quota_fit.py).

All pods of a job must be placed at once on the nodes' free
capacity.  ``NodePool`` holds that capacity for one cycle and shrinks it as
the planner admits jobs; capacity never grows within a cycle, which is what
makes its failure memo sound.  Placement is best-fit decreasing on the
pod's scarcest kind of resource (GPUs before cpu before memory): the
largest pods go first, each onto the eligible node that leaves the least of
that resource free, so whole free nodes stay whole for the next big gang; of
nodes equally tight, the one the pod leaves most balanced (BALANCE_TIES).
bench/results/core_planner.md has the measurement against first and worst fit.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .cards import CardPool
from .node_views import UNLIMITED as UNLIMITED
from .node_views import placing_order, pool_base, short_everywhere
from .snapshot import PODS, Constraints, InFlightJob, Node, PodGroup

STRATEGIES = ("best", "first", "worst")
# Nodes, equally tight for a pod, that best fit compares by balance: a bound on the scan,
# so that a cluster of a thousand empty nodes costs no more per pod than eight.
BALANCE_TIES = 8


@dataclass(frozen=True)
class NodeFailure:
    """Why a gang did not fit.  ``kind``: "never" (no eligible node could hold
    the pod even if empty), "nofit" (not now), "reserved" (would fit but for a
    reservation), "topology" (no domain of the required ``level`` holds the whole
    gang now: ``free`` is the most pods one domain has room for; topology.py).
    ``needed``/``free`` are per pod and the largest free on one eligible node, or
    cluster-wide totals when ``scope`` is "cluster"; a "never" whose resource some
    eligible node has enough of, only not with the pod's other requests, is "combined"."""

    kind: str
    resource: str
    needed: int
    free: int
    role: str = ""
    pods: int = 0
    placed: int = 0
    scope: str = "node"
    reserved_by: int | None = None
    level: str = ""  # a topology level's node label
    card: tuple[str, int] | None = None  # (node, GPU) with the most free, when no one card holds a pod
    node: str = ""  # "never": the eligible node that comes closest (lacks the fewest resources)
    slice_of: int = 0  # "topology": ``pods`` is one slice of a gang of this many (topology.py)


def never_on(
    group: PodGroup, eligible: Sequence[int], one_pod: Sequence[Mapping[str, int]], names: Sequence[str], pods: int
) -> NodeFailure | None:
    """A "never" failure if none of the `eligible` nodes (numbers into `one_pod`, what one pod
    may take on each, and `names`) could hold one pod of the group even when empty. The
    planner's pool and the submit page's screen (node_screen) both ask it."""
    if not eligible:
        # The key names the pod's node constraints, required node affinity among them (reasons.py).
        return NodeFailure("never", "nodeSelector/tolerations", 1, 0, group.role, pods)
    capacity = [one_pod[number] for number in eligible]
    short = short_everywhere(group.requests, capacity)
    if short is None:
        return None
    resource, amount, nearest, combined = short
    free = capacity[nearest].get(resource, 0)
    scope = "combined" if combined else "node"
    return NodeFailure("never", resource, amount, free, group.role, pods, scope=scope, node=names[eligible[nearest]])


def primary_resource(requests: tuple[tuple[str, int], ...]) -> str:
    """The resource a pod is packed by: its extended resource (GPUs), else cpu, else memory."""
    names = [name for name, _ in requests]
    for name in names:
        if "/" in name:
            return name
    for name in ("cpu", "memory"):
        if name in names:
            return name
    return PODS


_UNCONSTRAINED = Constraints((), (), ())


class _Eligible:
    """Nodes a pod with one set of Constraints may use, with one sorted
    index per resource: [(free amount, node number), ...] ascending."""

    __slots__ = ("nodes", "index")

    def __init__(self, nodes: list[int]):
        self.nodes = nodes
        self.index: dict[str, list[tuple[int, int]]] = {}


class NodePool:
    """Free node capacity during one cycle; ``place`` either charges a whole gang or nothing."""

    def __init__(self, nodes: Sequence[Node], in_flight: Iterable[InFlightJob] = (), strategy: str = "best"):
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        self.strategy = strategy
        self.nodes = tuple(nodes)
        self.names = [node.name for node in self.nodes]
        # free / eventual start as the node's shared read-only view and are copied on the
        # first charge (_own): a cycle touches a few nodes of hundreds, and building every
        # node's dicts anew each cycle was a third of a trace replay's time.
        base = pool_base(self.nodes)
        self.free: list[Mapping[str, int]] = list(base.free)
        self.eventual: list[Mapping[str, int]] = list(base.capacity)  # free once running pods end: for reservations
        self.capacity: list[Mapping[str, int]] = base.capacity  # an empty node (read only)
        self._one_pod: list[Mapping[str, int]] = base.one_pod  # the most one pod takes there: "never fits"
        self._owned: list[tuple[dict[str, int], dict[str, int]] | None] = [None] * len(self.nodes)
        self.schedulable: list[int] = base.schedulable  # (read only)
        self._plain: list[int] = base.plain  # schedulable nodes without blocking taints (read only)
        self.cluster_max: dict[str, int] = base.cluster_max  # the most one pod takes of each on a node (read only)
        self.largest: dict[str, str] = base.largest  # the node that has it (read only)
        self.totals: dict[str, int] = dict(base.totals)
        totals = self.totals
        by_name: dict[str, int] | None = None
        for job in in_flight:
            if by_name is None:
                by_name = {name: number for number, name in enumerate(self.names)}
            roles = {group.role: group.requests for group in job.gang}
            for role, _, node_name in job.placements:
                on = by_name.get(node_name)
                if on is not None and role in roles:
                    free, eventual = self._own(on)
                    for name, amount in roles[role]:
                        old = free.get(name, 0)
                        free[name] = old - amount
                        eventual[name] = eventual.get(name, 0) - amount
                        if not self.nodes[on].unschedulable:
                            totals[name] = totals.get(name, 0) + max(old - amount, 0) - max(old, 0)
        self._eligible: dict[Hashable, _Eligible] = {}
        self._member_of: list[list[_Eligible]] = [[] for _ in self.nodes]
        # Failures by id() of the (interned) gang or pod group, holding the key
        # object so its id cannot be reused while the entry lives.
        self._failed: dict[int, tuple[object, NodeFailure]] = {}
        self.reservations: list[tuple[int, int, tuple[tuple[str, int], ...]]] = []  # (job id, node, requests)
        self.cards = CardPool(self.nodes)
        self.stats = {"place_calls": 0, "memo_hits": 0, "cluster_rejects": 0, "pods_placed": 0}

    def _own(self, number: int) -> tuple[dict[str, int], dict[str, int]]:
        """A node's free and eventual amounts as this cycle's own dicts: the shared
        views are copied before the node's first change in this cycle."""
        owned = self._owned[number]
        if owned is None:
            owned = self._owned[number] = (dict(self.free[number]), dict(self.eventual[number]))
            self.free[number], self.eventual[number] = owned
        return owned

    # -- eligibility and indices ---------------------------------------------------------

    def eligible(self, constraints: Constraints, within: frozenset[int] | None = None) -> _Eligible:
        """The nodes a pod with these constraints may use (``within``: of these only)."""
        key: Hashable = constraints if within is None else (constraints, within)
        found = self._eligible.get(key)
        if found is None:
            if within is not None:
                found = _Eligible([n for n in self.eligible(constraints).nodes if n in within])
            elif constraints == _UNCONSTRAINED:  # the common pod: any untainted schedulable node
                found = _Eligible(list(self._plain))
            else:
                found = _Eligible([n for n in self.schedulable if self.nodes[n].admits(constraints)])
            self._eligible[key] = found
            for number in found.nodes:
                self._member_of[number].append(found)
        return found

    def _index(self, eligible: _Eligible, resource: str) -> list[tuple[int, int]]:
        index = eligible.index.get(resource)
        if index is None:
            free = self.free
            index = sorted((free[n].get(resource, 0), n) for n in eligible.nodes)
            eligible.index[resource] = index
        return index

    def _charge(self, number: int, requests: tuple[tuple[str, int], ...], sign: int = 1) -> None:
        owned = self._owned[number]
        free, eventual = owned if owned is not None else self._own(number)
        totals = self.totals
        member_of = self._member_of[number]
        for name, amount in requests:
            old = free.get(name, 0)
            new = old - sign * amount
            free[name] = new
            eventual[name] = eventual.get(name, 0) - sign * amount
            totals[name] = totals.get(name, 0) + max(new, 0) - max(old, 0)
            for eligible in member_of:
                index = eligible.index.get(name)
                if index is not None:
                    del index[bisect_left(index, (old, number))]
                    insort(index, (new, number))

    def _fits(self, number: int, requests: tuple[tuple[str, int], ...]) -> bool:
        free = self.free[number]
        for name, amount in requests:
            if free.get(name, 0) < amount:
                return False
        return self.cards.fits(number, requests) if self.cards.shared else True

    def _find(self, eligible: _Eligible, requests: tuple[tuple[str, int], ...], primary: str) -> int | None:
        """The node for one pod under the pool's strategy, or None."""
        if self.strategy == "first":
            for number in eligible.nodes:
                if self._fits(number, requests):
                    return number
            return None
        index = self._index(eligible, primary)
        need = dict(requests)[primary]
        start = bisect_left(index, (need, -1))
        if self.strategy == "best":
            for position in range(start, len(index)):
                tightest, number = index[position]
                if self._fits(number, requests):
                    return self._balanced(index, position, tightest, number, requests)
        else:
            for position in range(len(index) - 1, start - 1, -1):
                number = index[position][1]
                if self._fits(number, requests):
                    return number
        return None

    def _balanced(
        self,
        index: list[tuple[int, int]],
        position: int,
        tightest: int,
        number: int,
        requests: tuple[tuple[str, int], ...],
    ) -> int:
        """Of the nodes as tight on the pod's primary resource as the first that fits (the
        next BALANCE_TIES of them), the one its pod leaves most balanced: the used shares
        of its resources closest together, so no node's GPUs are stranded behind its CPU
        or memory (kube-scheduler's BalancedResourceAllocation, as a tie-break of best fit)."""
        best, best_score = number, self._imbalance(number, requests)
        for later in range(position + 1, min(position + 1 + BALANCE_TIES, len(index))):
            free, other = index[later]
            if free != tightest or best_score == 0.0:
                break
            if self._fits(other, requests):
                score = self._imbalance(other, requests)
                if score < best_score:
                    best, best_score = other, score
        return best

    def _imbalance(self, number: int, requests: tuple[tuple[str, int], ...]) -> float:
        capacity, free = self.capacity[number], self.free[number]
        low, high = 1.0, 0.0
        for name, amount in requests:
            total = capacity.get(name, 0)
            if name == PODS or total <= 0:
                continue
            share = (total - free.get(name, 0) + amount) / total
            low, high = min(low, share), max(high, share)
        return max(high - low, 0.0)

    # -- placing a gang ------------------------------------------------------------------

    def place(
        self, gang: tuple[PodGroup, ...], totals: Mapping[str, int], within: frozenset[int] | None = None
    ) -> list[tuple[int, int]] | NodeFailure:
        """Place every pod or none: [(pod group number, node number) per pod], or why not.
        ``within``: only on these node numbers (a topology domain); what failed there
        is not remembered for the gang, which may fit elsewhere."""
        self.stats["place_calls"] += 1
        if within is not None:
            return self._place(gang, within)
        failed = self._failed
        for key in (gang, *gang):
            found = failed.get(id(key))
            if found is not None and found[0] is key:
                self.stats["memo_hits"] += 1
                return found[1]
        for name, amount in totals.items():
            if amount > self.totals.get(name, 0):
                # Not even the cluster as a whole has it: no need to look at nodes,
                # except to tell "not now" from "never".
                self.stats["cluster_rejects"] += 1
                pods = sum(g.count for g in gang)
                failure = self._first_never(gang, None, pods) or self._cluster_failure(name, amount, pods)
                self._failed[id(gang)] = (gang, failure)
                return failure
        placed = self._place(gang)
        if isinstance(placed, NodeFailure):
            self._failed[id(gang)] = (gang, placed)
            if not placed.placed:  # the first pod fails on its own, so any gang with its group fails
                group = next(g for g in gang if g.role == placed.role)
                self._failed[id(group)] = (group, placed)
        return placed

    def _place(
        self, gang: tuple[PodGroup, ...], within: frozenset[int] | None = None
    ) -> list[tuple[int, int]] | NodeFailure:
        order = placing_order(gang)
        placed: list[tuple[int, int]] = []
        for group_number in order:
            group = gang[group_number]
            eligible = self.eligible(group.constraints, within)
            primary = primary_resource(group.requests)
            for _ in range(group.count):
                number = self._find(eligible, group.requests, primary)
                if number is None:
                    self.cards.rollback(len(placed))
                    for undo_group, undo_node in reversed(placed):
                        self._charge(undo_node, gang[undo_group].requests, -1)
                    pods = sum(g.count for g in gang)
                    never = self._first_never(gang, within, pods)  # "never" whichever group failed now
                    return never or self._diagnose(group, eligible, len(placed), pods)
                self._charge(number, group.requests)
                self.cards.take(number, group.requests)
                placed.append((group_number, number))
        self.stats["pods_placed"] += len(placed)
        return placed

    def _cluster_failure(self, name: str, amount: int, pods: int) -> NodeFailure:
        reserved = sum(dict(requests).get(name, 0) for _, _, requests in self.reservations)
        if reserved and amount <= self.totals.get(name, 0) + reserved:
            return NodeFailure(
                "reserved",
                name,
                amount,
                self.totals.get(name, 0),
                pods=pods,
                scope="cluster",
                reserved_by=self.reservations[0][0],
            )
        return NodeFailure("nofit", name, amount, self.totals.get(name, 0), pods=pods, scope="cluster")

    def _never(self, group: PodGroup, eligible: _Eligible, pods: int) -> NodeFailure | None:
        return never_on(group, eligible.nodes, self._one_pod, self.names, pods)

    def _first_never(self, gang: tuple[PodGroup, ...], within: frozenset[int] | None, pods: int) -> NodeFailure | None:
        """The failure of the first group, in placing order, that no eligible node could
        hold even empty (the submit page's node_screen.never_fits asks the same)."""
        for number in placing_order(gang):
            never = self._never(gang[number], self.eligible(gang[number].constraints, within), pods)
            if never is not None:
                return never
        return None

    def _diagnose(self, group: PodGroup, eligible: _Eligible, placed: int, pods: int) -> NodeFailure:
        requests = group.requests
        if (card := self.cards.failure(requests, eligible.nodes, self.free, self.names)) is not None:
            return NodeFailure(*card[:4], group.role, pods, placed, card=card[4])
        for job_id, number, charged in self.reservations:
            if number in eligible.nodes and all(
                self.free[number].get(r, 0) + dict(charged).get(r, 0) >= a for r, a in requests
            ):
                return NodeFailure(
                    "reserved",
                    primary_resource(requests),
                    dict(requests)[primary_resource(requests)],
                    self.free[number].get(primary_resource(requests), 0),
                    group.role,
                    pods,
                    placed,
                    reserved_by=job_id,
                )
        # The scarcest resource: highest need relative to the largest free amount on one node.
        best: tuple[float, str, int, int] | None = None
        for name, amount in requests:
            index = self._index(eligible, name)
            largest = max(index[-1][0], 0)
            ratio = amount / largest if largest else float("inf")
            if best is None or ratio > best[0]:
                best = (ratio, name, amount, largest)
        assert best is not None  # every pod requests at least its "pods" slot
        _, name, amount, largest = best
        return NodeFailure("nofit", name, amount, largest, group.role, pods, placed)

    # -- preemption ----------------------------------------------------------------------

    def place_freeing(
        self,
        gang: tuple[PodGroup, ...],
        totals: Mapping[str, int],
        freed: Sequence[tuple[int, tuple[tuple[str, int], ...]]],
        commit: bool,
        within: frozenset[int] | None = None,
    ) -> list[tuple[int, int]] | NodeFailure:
        """``place`` (``within`` as there) as if the pods ``freed`` ((node number, requests)
        each) had left.  With ``commit`` and a fit, the pool keeps both (the pods gone, the
        gang placed); otherwise it is left as it was."""
        self.free_pods(freed)
        placed = self.place(gang, totals, within)
        if isinstance(placed, NodeFailure) or not commit:
            if not isinstance(placed, NodeFailure):
                self.unplace(gang, placed)
            for number, requests in freed:
                self._charge(number, requests, 1)
        return placed

    def unplace(self, gang: tuple[PodGroup, ...], placed: Sequence[tuple[int, int]]) -> None:
        """Undo the placement ``place`` has just made (a trial)."""
        self.cards.rollback(len(placed))
        for group_number, number in reversed(placed):
            self._charge(number, gang[group_number].requests, -1)
        self.stats["pods_placed"] -= len(placed)

    def free_pods(self, freed: Iterable[tuple[int, tuple[tuple[str, int], ...]]]) -> None:
        """Take pods ((node number, requests) each) off their nodes."""
        for number, requests in freed:
            self._charge(number, requests, -1)
        # Failures remembered so far were for less room than there is now.  (One found
        # with more room stays true once pods are charged back: less room.)
        self._failed.clear()

    def charge_pods(self, placed: Iterable[tuple[int, tuple[tuple[str, int], ...]]]) -> None:
        """Put pods ((node number, requests) each) on their nodes, whatever room is left."""
        for number, requests in placed:
            self._charge(number, requests)

    def cap_at(self, other: NodePool, numbers: Iterable[int]) -> None:
        """Lower these nodes' free amounts to ``other``'s where those are less."""
        for number in set(numbers):
            mine, theirs = self.free[number], other.free[number]
            excess = tuple(
                (name, amount - theirs.get(name, 0)) for name, amount in mine.items() if amount > theirs.get(name, 0)
            )
            if excess:
                self._charge(number, excess)

    # -- reservations --------------------------------------------------------------------

    def reserve(self, job_id: int, gang: tuple[PodGroup, ...], within: frozenset[int] | None = None) -> bool:
        """Hold nodes (``within``: of these only) for a job that has waited too long: charge
        its pods to the nodes nearest to holding them once running pods end, even if free
        goes negative, so later jobs in the cycle cannot take that capacity."""
        charged: list[tuple[int, tuple[tuple[str, int], ...]]] = []
        for group in (gang[number] for number in placing_order(gang)):
            eligible = self.eligible(group.constraints, within)
            index = self._index(eligible, primary_resource(group.requests))
            for _ in range(group.count):
                number = next(
                    (n for _, n in reversed(index) if all(self.eventual[n].get(r, 0) >= a for r, a in group.requests)),
                    None,
                )
                if number is None:
                    for undo_node, requests in reversed(charged):
                        self._charge(undo_node, requests, -1)
                    return False
                self._charge(number, group.requests)
                charged.append((number, group.requests))
        self.reservations.extend((job_id, number, requests) for number, requests in charged)
        return True
