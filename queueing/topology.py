"""Topology: node labels name the levels of a cluster (a block, a rack, a host), and a
job may require or prefer that its whole gang run in one domain of a level (one rack),
as with Kueue's ``podset-required-topology`` / ``podset-preferred-topology``.

A required level is kept or the job waits, with a reason naming the level and how close
the roomiest domain comes. A preferred level is tried first, then each level above it,
then the whole cluster: the gang lands in as few domains as it can. Within a level the
domains are tried tightest first (best fit: the domain with the least free of the gang's
scarcest resource that has enough), so that roomy racks stay roomy for big gangs.

Slices (Kueue's ``podset-slice-required-topology`` + ``podset-slice-size``): each role's
pods cut into slices of the slice size, each slice in one domain of the slice level (the
tightest that holds it, as above), within whatever the gang's own request allows; all
slices or none. A slice that no domain holds is a wait naming the slice level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .cluster_request import CLUSTER_LABEL
from .fit import NodeFailure, NodePool, primary_resource
from .snapshot import PodGroup
from .topology_request import (
    HOSTNAME,
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    SLICE_REQUIRED_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    TopologyRequest,
    request_of,
)

Placed = list[tuple[int, int]]  # (pod group number, node number) per pod

__all__ = [
    "HOSTNAME",
    "PREFERRED_ANNOTATION",
    "REQUIRED_ANNOTATION",
    "SLICE_REQUIRED_ANNOTATION",
    "SLICE_SIZE_ANNOTATION",
    "Topology",
    "TopologyRequest",
    "level_name",
    "request_of",
]


def level_name(label: str) -> str:
    """How people call a level: "rack" for topology.example.com/rack, "node" for hosts."""
    return "node" if label == HOSTNAME else label.rpartition("/")[2] or label


class Topology:
    """The domains of each configured level over one cycle's pool (``levels``: node
    labels, the widest first), and topology-aware placement on it."""

    def __init__(self, pool: NodePool, levels: Sequence[str]):
        self.pool = pool
        self.levels = tuple(levels)
        self._domains: dict[str, list[frozenset[int]]] = {}

    def domains(self, level: str) -> list[frozenset[int]]:
        """The level's domains: schedulable nodes grouped by their value of its label
        (nodes without the label belong to none)."""
        found = self._domains.get(level)
        if found is None:
            # A domain is within one cluster (clusters.py): two clusters' "rack-1" are two racks.
            groups: dict[tuple[str, str], set[int]] = {}
            nodes = self.pool.nodes
            for number in self.pool.schedulable:
                labels = nodes[number].labels
                value = labels.get(level)
                if value is not None:
                    groups.setdefault((labels.get(CLUSTER_LABEL, ""), value), set()).add(number)
            found = self._domains[level] = [frozenset(groups[key]) for key in sorted(groups)]
        return found

    def place(
        self,
        gang: tuple[PodGroup, ...],
        totals: Mapping[str, int],
        request: TopologyRequest,
        allowed: frozenset[int] | None = None,
    ) -> Placed | NodeFailure:
        """The gang by its request; ``allowed``: on these node numbers only (each domain
        narrowed to them)."""
        pods = sum(group.count for group in gang)
        if not request.level:  # slices only: anywhere
            return self._fill(gang, totals, request, allowed)
        if request.required:
            placed = self._best_fit(request.level, gang, totals, request, allowed)
            if not isinstance(placed, int):
                return placed
            largest = max(gang, key=lambda group: dict(group.requests).get(primary_resource(group.requests), 0))
            resource = primary_resource(largest.requests)
            return NodeFailure(
                "never" if not self.domains(request.level) else "topology",
                resource,
                dict(largest.requests).get(resource, 0),
                placed,
                largest.role,
                pods,
                level=request.level,
            )
        # Preferred: its level, then each wider one, then anywhere.
        if request.level in self.levels:
            wider = self.levels[: self.levels.index(request.level) + 1]
        else:
            wider = (request.level,)
        for level in reversed(wider):
            placed = self._best_fit(level, gang, totals, request, allowed)
            if not isinstance(placed, int):
                return placed
        return self._fill(gang, totals, request, allowed)

    def _fill(
        self,
        gang: tuple[PodGroup, ...],
        totals: Mapping[str, int],
        request: TopologyRequest,
        within: frozenset[int] | None,
    ) -> Placed | NodeFailure:
        """The gang on these nodes (None: any), in slices if it asks for them."""
        if not request.slice_level:
            return self.pool.place(gang, totals, within)
        return self._slices(gang, request.slice_level, request.slice_size, within)

    def _slices(
        self, gang: tuple[PodGroup, ...], level: str, size: int, within: frozenset[int] | None
    ) -> Placed | NodeFailure:
        """Each role's pods in slices of ``size``, each slice in one domain of ``level`` (the
        tightest that holds it); every slice or none (the pool as it was)."""
        done: list[tuple[tuple[PodGroup, ...], Placed]] = []
        placed: Placed = []
        for number, group in enumerate(gang):
            for start in range(0, group.count, size):
                piece = (replace(group, count=min(size, group.count - start)),)
                found = self._best_fit(level, piece, _totals(piece), None, within)
                if isinstance(found, int):
                    for undo_gang, undo in reversed(done):
                        self.pool.unplace(undo_gang, undo)
                    resource = primary_resource(group.requests)
                    return NodeFailure(
                        "never" if not self.domains(level) else "topology",
                        resource,
                        dict(group.requests).get(resource, 0),
                        found,
                        group.role,
                        piece[0].count,
                        level=level,
                        slice_of=sum(g.count for g in gang),
                    )
                done.append((piece, found))
                placed += [(number, node) for _, node in found]
        return placed

    def _best_fit(
        self,
        level: str,
        gang: tuple[PodGroup, ...],
        totals: Mapping[str, int],
        request: TopologyRequest | None,
        allowed: frozenset[int] | None,
    ) -> Placed | int:
        """The gang in one domain of the level, the tightest that holds it (in slices within
        it if ``request`` asks for them); else the most pods any one domain had room for."""
        resource = primary_resource(tuple(totals.items()))
        needed = totals.get(resource, 0)
        free = self.pool.free
        sized = []
        for domain in self.domains(level):
            if allowed is not None:
                domain = domain & allowed
                if not domain:
                    continue
            room = sum(max(free[number].get(resource, 0), 0) for number in domain)
            sized.append((room < needed, room, min(domain), domain))
        roomiest = 0
        for _, _, _, domain in sorted(sized, key=lambda entry: entry[:3]):
            if request is None:
                placed = self.pool.place(gang, totals, within=domain)
            else:
                placed = self._fill(gang, totals, request, domain)
            if isinstance(placed, list):
                return placed
            roomiest = max(roomiest, placed.placed)
        return roomiest


def _totals(gang: tuple[PodGroup, ...]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for group in gang:
        for name, amount in group.requests:
            totals[name] = totals.get(name, 0) + amount * group.count
    return totals
