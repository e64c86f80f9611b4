"""GPU sharing by memory: a node's cards one by one, and which card a pod goes to.

A node's total free GPU memory says nothing of whether one card holds a pod: two cards
with 4,069 MiB each do not hold an 8,138 MiB pod.  So a node that shares its cards
(``Node.cards``) is checked card by card, and the pod goes to the card it leaves the
least free on (binpack, as gpushare does), so that whole cards stay whole for big pods.

``CardPool`` is the cards' side of ``fit.NodePool`` for one cycle.  Only pods placed in
the cycle (``NodePool._place``) are charged to cards; what the pool charges otherwise
(reservations, in-flight placements, pods freed for preemption) moves only the node's
totals, so a card is never freed for a pod whose card is unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .devices import DeviceModel, model

if TYPE_CHECKING:  # snapshot.py imports this module
    from .snapshot import Node, PodGroup

Requests = tuple[tuple[str, int], ...]
# Per pod, in (role, index) order: the cards its share went to.
CardPlacement = tuple[tuple[str, int, tuple[int, ...]], ...]


@dataclass(frozen=True)
class CardPod:
    """A pod already on a node's cards: ``memory`` MiB on each of its cards.  ``card``: its
    card (gpushare's ALIYUN_COM_GPU_MEM_IDX); None charges it where binpack would put it."""

    memory: int
    card: int | None = None


@dataclass(frozen=True)
class SharedCards:
    """A node whose GPUs are shared by memory: ``memory`` MiB per card (card i at index i)."""

    memory: tuple[int, ...]
    pods: tuple[CardPod, ...] = ()
    model: str = "gpushare"
    used: tuple[int, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        model(self.model)  # an unknown model is the caller's error, found here
        object.__setattr__(self, "memory", tuple(self.memory))
        object.__setattr__(self, "pods", tuple(self.pods))
        used = [0] * len(self.memory)
        # Pods with a known card first: binpack for the others sees the cards as they are.
        for pod in sorted(self.pods, key=lambda p: p.card is None):
            card = pod.card
            if card is None or not 0 <= card < len(used):
                free = [total - taken for total, taken in zip(self.memory, used, strict=True)]
                chosen = binpack(free, pod.memory, 1)
                # A pod that fits no card still takes memory: charge the roomiest, never lose it.
                card = chosen[0] if chosen else max(range(len(free)), key=lambda c: (free[c], -c), default=None)
            if card is not None:
                used[card] += pod.memory
        object.__setattr__(self, "used", tuple(used))

    @classmethod
    def even(cls, count: int, memory: int, pods: Iterable[CardPod] = (), model: str = "gpushare") -> SharedCards:
        """``count`` cards of ``memory`` MiB each (what a node's allocatable tells)."""
        return cls((memory,) * count, tuple(pods), model)

    @property
    def free(self) -> tuple[int, ...]:
        return tuple(total - used for total, used in zip(self.memory, self.used, strict=True))


def binpack(free: Sequence[int], memory: int, cards: int = 1) -> tuple[int, ...] | None:
    """The ``cards`` distinct cards for shares of ``memory`` MiB: each the card with the least
    free that still holds it (the lower index of equals), or None if too few hold it."""
    fitting = sorted((amount, card) for card, amount in enumerate(free) if amount >= memory)
    if len(fitting) < cards:
        return None
    return tuple(sorted(card for _, card in fitting[:cards]))


class CardPool:
    """The free memory of every shared card during one cycle, and the cards pods went to."""

    def __init__(self, nodes: Sequence[Node]):
        self.free: dict[int, list[int]] = {}
        self.models: dict[int, DeviceModel] = {}
        self.capacity: dict[int, tuple[int, ...]] = {}
        for number, node in enumerate(nodes):
            if node.cards is not None:
                self.free[number] = list(node.cards.free)
                self.models[number] = model(node.cards.model)
                self.capacity[number] = node.cards.memory
        self.shared = bool(self.free)
        # (node, MiB per card, cards) of every pod placed this cycle, in order: undone from the end.
        self.journal: list[tuple[int, int, tuple[int, ...]]] = []
        self.placements: dict[int, CardPlacement] = {}  # job id -> its pods' cards

    def _demand(self, number: int, requests: Requests) -> tuple[int, int] | None | bool:
        """What a pod asks of this node's cards; False: it may not run here at all."""
        found = self.models.get(number)
        if found is None:
            return None
        asked = dict(requests)
        if found.whole is not None and asked.get(found.whole, 0) > 0:
            return False  # a node shares by memory or allocates whole cards, never both
        return found.demand(asked, whole_card=max(self.capacity[number], default=0))

    def fits(self, number: int, requests: Requests) -> bool:
        demand = self._demand(number, requests)
        if not isinstance(demand, tuple):
            return demand is None
        return binpack(self.free[number], *demand) is not None

    def take(self, number: int, requests: Requests) -> None:
        """Charge a pod just placed on node ``number`` (``fits`` said yes) to its cards."""
        if not self.shared:
            return
        demand = self._demand(number, requests)
        chosen: tuple[int, ...] = ()
        memory = 0
        if isinstance(demand, tuple):
            memory = demand[0]
            chosen = binpack(self.free[number], *demand) or ()
            for card in chosen:
                self.free[number][card] -= memory
        self.journal.append((number, memory, chosen))

    def rollback(self, pods: int) -> None:
        """Undo the last ``pods`` takes (a gang that did not fit after all, or a trial)."""
        if not self.shared:
            return
        for _ in range(pods):
            number, memory, chosen = self.journal.pop()
            for card in chosen:
                self.free[number][card] += memory

    def record(self, job_id: int, gang: tuple[PodGroup, ...], placed: Sequence[tuple[int, int]]) -> None:
        """Remember the cards of a gang just placed (``placed`` as NodePool.place returns it)."""
        counters: dict[int, int] = {}
        numbered = []
        for group_number, _ in placed:
            index = counters.get(group_number, 0)
            counters[group_number] = index + 1
            numbered.append((gang[group_number].role, index))
        self.record_pods(job_id, numbered)

    def record_pods(self, job_id: int, pods: Sequence[tuple[str, int]]) -> None:
        """Remember the cards of the last ``len(pods)`` pods placed, (role, index) each."""
        if not self.shared or not pods:
            return
        taken = self.journal[-len(pods) :]
        chosen = tuple(
            sorted((role, index, cards) for (role, index), (_, _, cards) in zip(pods, taken, strict=True) if cards)
        )
        if chosen:
            self.placements[job_id] = chosen

    def failure(
        self, requests: Requests, eligible: Iterable[int], free: Sequence[Mapping[str, int]], names: Sequence[str]
    ) -> tuple[str, str, int, int, tuple[str, int]] | None:
        """When the cards are why a pod fits no eligible node: (kind, resource, MiB needed per
        card, the most free on one card, (node name, card)) -- kind "never" if no card could
        hold it even empty.  None when the pod asks no share or something else is short."""
        if not self.shared:
            return None
        asked = dict(requests)
        best: tuple[int, int, int] | None = None  # (free, node, card)
        largest, resource, needed, others_fit = 0, "", 0, False
        plain = []  # eligible nodes that do not share cards
        for number in eligible:
            demand = self._demand(number, requests)
            if not isinstance(demand, tuple):
                if demand is None:
                    plain.append(number)
                continue
            found = self.models[number]
            resource, needed = found.memory, demand[0]
            largest = max(largest, *self.capacity[number], 0)
            skip = (found.memory, found.count)
            if all(free[number].get(name, 0) >= amount for name, amount in asked.items() if name not in skip):
                others_fit = True
            for card, amount in enumerate(self.free[number]):
                if best is None or (amount, -number, -card) > (best[0], -best[1], -best[2]):
                    best = (amount, number, card)
        # A node that does not share cards but has the memory free: its other resources are short.
        if best is None or any(free[number].get(resource, 0) >= needed for number in plain):
            return None
        if largest < needed:
            return "never", resource, needed, largest, (names[best[1]], best[2])
        if not others_fit:
            return None
        return "nofit", resource, needed, best[0], (names[best[1]], best[2])
