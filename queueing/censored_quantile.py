"""Quantiles of a sample some of whose values are only known to be at least something.

A job still waiting is such a value: its wait is at least what it has waited so far.
Leaving it out until it starts biases every quantile low while a backlog builds (only
the short waits are in), so the quantiles here are the Kaplan-Meier (product-limit)
estimate over the complete values and the right-censored ones together: each censored
value hands its mass on, evenly, to the values above it, complete or not.

Censored values may carry a weight (each stands for ``weight`` values, when a long list
was thinned to bound the memory).  Pure: no clock, no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def km_quantiles(
    complete: Sequence[float], censored: Sequence[float], levels: Sequence[float], *, censored_weight: float = 1.0
) -> list[float]:
    """The ``levels`` (each in [0, 1]) quantiles of ``complete`` (ascending, not empty) with
    the lower bounds ``censored`` (ascending).  A level the estimate never reaches (the
    censored mass past the last complete value) gets the largest value known, complete or
    censored: a lower bound, the best there is.  Without censored values, the conformal
    rank (``ceil((n + 1) * level)``-th smallest, the largest past n) as
    ``sorted_window.conformal_quantile``."""
    if not complete:
        raise ValueError("no complete value")
    n = len(complete)
    if not censored:
        return [complete[min(max(math.ceil((n + 1) * level), 1), n) - 1] for level in levels]
    weight = max(censored_weight, 0.0)
    # The finite-sample correction of split conformal, on the complete values' count.
    wanted = sorted((min(level * (n + 1) / n, 1.0), index) for index, level in enumerate(levels))
    found: list[float | None] = [None] * len(levels)
    at_risk = n + weight * len(censored)
    survival = 1.0
    i = j = 0
    next_level = 0
    largest = max(complete[-1], censored[-1])
    while i < n and next_level < len(wanted):
        # At a tie, the complete value is taken first: a wait of at least x may be x.
        if j < len(censored) and censored[j] < complete[i]:
            at_risk -= weight
            j += 1
            continue
        survival *= 1.0 - 1.0 / at_risk if at_risk > 1.0 else 0.0
        at_risk -= 1.0
        value = complete[i]
        i += 1
        while next_level < len(wanted) and 1.0 - survival >= wanted[next_level][0] - 1e-12:
            found[wanted[next_level][1]] = value
            next_level += 1
    return [largest if value is None else value for value in found]


def thinned(values: list[float], keep: int) -> tuple[list[float], float]:
    """At most ``keep`` of the ascending ``values``, evenly spread, and the weight each then
    stands for (``len(values) / kept``)."""
    if len(values) <= keep:
        return values, 1.0
    step = len(values) / keep
    kept = [values[min(int((index + 0.5) * step), len(values) - 1)] for index in range(keep)]
    return kept, len(values) / keep
