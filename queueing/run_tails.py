"""How long do the longest runs like this one last?  The tail bound lent nodes are admitted by.

A split-conformal bound (the predictor's ``p90_s``) holds on average over all jobs, not for
the jobs it calls short: on the Philly trace, admitting by a 97 % or 99 % conformal bound
killed a larger share of the jobs it let onto lent nodes than the 90 % one did
(bench/results/trace_replay.md), because the jobs whose bound was short enough were those of
keys that mix one-minute failures with runs of days.  So the tail is estimated per key, from
the key's own runs: a job of a key with ``n`` runs, ``k`` of them longer than ``t``, runs
longer than ``t`` with probability about ``(k + 1) / (n + 2)`` (Laplace's rule of
succession: a key that never ran past ``t`` in 20 runs may still do so, once in 22).  The
tail bound at coverage ``c`` is the shortest ``t`` with that estimate at most ``1 - c``,
from the most specific level of the predictor's keys with runs enough to reach it (98 at
99 %); none reaches it: no bound (``math.inf``), and the job is not placed on lent nodes.
Only the levels within the job's namespace count (``LEVELS``): a job judged by the cluster's
runs, or by other teams' runs of its shape, is one whose own kind of run nobody has seen.

Runs are counted per key in buckets of log-duration (two per doubling, from a second to
34 years): a fixed 60 counters a key, however many runs, and a bound is a bucket's upper edge.
"""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from collections.abc import Hashable, Iterable

LEVELS = frozenset({"user+name", "name", "user", "namespace+shape", "namespace"})
PER_DOUBLING = 2
BUCKETS = 30 * PER_DOUBLING  # up to 2**30 s


def bucket_of(seconds: float) -> int:
    """The bucket of a run: bucket i holds runs in (2**((i-1)/2), 2**(i/2)] seconds (bucket 0: up to 1 s)."""
    if not seconds > 1.0:
        return 0
    return min(BUCKETS - 1, math.ceil(math.log2(seconds) * PER_DOUBLING))


def upper_edge(bucket: int) -> float:
    return float(2.0 ** (bucket / PER_DOUBLING))


def runs_needed(coverage: float) -> int:
    """The fewest runs whose estimate can reach ``1 - coverage``: 1 / (n + 2) <= 1 - coverage."""
    return max(0, math.ceil(1.0 / (1.0 - coverage) - 2.0 - 1e-9))


class RunTails:
    """Run counts by bucket per (level, key), at most ``max_keys`` keys per level (least recently used out)."""

    def __init__(self, max_keys: int) -> None:
        self.max_keys = max_keys
        self.counts: dict[str, OrderedDict[Hashable, array[int]]] = {}
        self._none: OrderedDict[Hashable, array[int]] = OrderedDict()

    def add(self, keys: Iterable[tuple[str, Hashable] | None], seconds: float) -> None:
        bucket = bucket_of(seconds)
        for entry in keys:
            if entry is None:
                continue
            level, key = entry
            if level not in LEVELS:
                continue
            table = self.counts.setdefault(level, OrderedDict())
            counts = table.get(key)
            if counts is None:
                counts = table[key] = array("L", bytes(BUCKETS * array("L").itemsize))
                if len(table) > self.max_keys:
                    table.popitem(last=False)
            else:
                table.move_to_end(key)
            counts[bucket] += 1

    def bound(self, keys: Iterable[tuple[str, Hashable] | None], coverage: float) -> float:
        """The tail bound at ``coverage`` from the most specific key with runs enough; inf if none has."""
        needed = runs_needed(coverage)
        for entry in keys:
            if entry is None:
                continue
            counts = self.counts.get(entry[0], self._none).get(entry[1])
            if counts is None:
                continue
            runs = sum(counts)
            if runs >= needed:
                return tail_of(counts, runs, 1.0 - coverage)
        return math.inf

    def key_count(self) -> int:
        return sum(len(table) for table in self.counts.values())


def tail_of(counts: array[int], runs: int, share: float) -> float:
    """The shortest bucket edge t with (runs longer than t + 1) / (runs + 2) <= share."""
    longer = 0
    for bucket in range(BUCKETS - 1, -1, -1):
        if (longer + counts[bucket] + 1) / (runs + 2) > share:
            return upper_edge(bucket)
        longer += counts[bucket]
    return upper_edge(0)
