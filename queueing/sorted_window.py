"""The last N values of a stream, also kept sorted: order statistics over a sliding window.

What the duration predictor keeps per history key and the start calibrator per band of
forecast wait: small (thousands of values), so a sorted list with bisect beats a tree.
"""

from __future__ import annotations

import bisect
import math
from collections import deque


class SortedWindow:
    """The last ``size`` values, in arrival order (``order``) and sorted (``ordered``)."""

    __slots__ = ("order", "ordered")

    def __init__(self, size: int) -> None:
        self.order: deque[float] = deque(maxlen=size)
        self.ordered: list[float] = []

    def add(self, value: float) -> None:
        if len(self.order) == self.order.maxlen:
            del self.ordered[bisect.bisect_left(self.ordered, self.order[0])]
        self.order.append(value)
        bisect.insort(self.ordered, value)

    def drop_oldest(self) -> None:
        """Forget the oldest value (none: nothing)."""
        if self.order:
            del self.ordered[bisect.bisect_left(self.ordered, self.order.popleft())]

    def __len__(self) -> int:
        return len(self.order)

    def median(self) -> float:
        return lower_median(self.ordered)

    def conformal(self, level: float) -> float:
        return conformal_quantile(self.ordered, level)


def lower_median(ordered: list[float]) -> float:
    return ordered[(len(ordered) - 1) // 2]


def conformal_quantile(ordered: list[float], level: float) -> float:
    """The split-conformal quantile: the ceil((n + 1) * level)-th smallest (the largest if past n)."""
    rank = math.ceil((len(ordered) + 1) * level)
    return ordered[min(rank, len(ordered)) - 1]
