"""Does a job fit its namespace's quota?  The admission rule: for every key the
namespace's ResourceQuota constrains, used + reserved + demand <= hard; a demand above
hard can never fit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


def quota_check(
    demand: Mapping[str, int], hard: Mapping[str, int], free: Mapping[str, int]
) -> tuple[str | None, str | None]:
    """(key where demand exceeds hard outright, first key where it exceeds what is free).

    Only keys in ``hard`` are constrained, and, as in Kubernetes' quota
    admission, only for jobs that request some of them: a namespace over its
    GPU quota (quota lowered below usage) still admits CPU-only jobs.
    """
    short = None
    for key, limit in hard.items():
        need = demand.get(key)
        if need:
            if need > limit:
                return key, key
            if short is None and need > free[key]:
                short = key
    return None, short


class QuotaLine(NamedTuple):
    key: str
    needed: int
    free: int  # hard - used - reserved: negative when a lowered quota is over-used
    hard: int
    short: bool  # this key stops the job now (also when never)
    never: bool  # the demand exceeds hard outright


def quota_lines(
    demand: Mapping[str, int], hard: Mapping[str, int], used: Mapping[str, int], reserved: Mapping[str, int]
) -> list[QuotaLine]:
    """``quota_check`` key by key, for people to read: per key ``hard`` constrains, what the
    job needs, what is free, and whether that key stops it.  No line is short exactly when
    the planner's ``quota_check`` finds the job fits."""
    lines = []
    for key in sorted(hard):
        needed, free = demand.get(key, 0), hard[key] - used.get(key, 0) - reserved.get(key, 0)
        never, short = quota_check({key: needed}, {key: hard[key]}, {key: free})
        lines.append(QuotaLine(key, needed, free, hard[key], short is not None, never is not None))
    return lines
