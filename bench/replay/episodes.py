"""How many independent queueing episodes a calibration figure rests on, and how far it could
have fallen by chance (issue 47).

A replay scores a start range each time it samples a waiting job, so a figure such as "90.9 %
of 1,243 samples covered" looks precise.  But the samples of one episode of queueing (one
namespace backed up for some hours) err together: their forecasts come from the same record
and the same plan, and their jobs start behind the same running jobs.  At x1 the Philly trace
queues rarely: the whole of October's 1,078 samples come from 8 namespace-days.  A month's
figure is then the outcome of a handful of episodes, and the width of its 95 % interval says
whether a goal band (88-93 % covered) can be judged on it at all.

The episode is a namespace-day (the calendar day of the forecast, UTC): coarse enough that
samples of different episodes err nearly independently, fine enough to leave several in a
busy month.  The interval is a cluster bootstrap (resampling whole episodes, the ratio of
sums), deterministic for a seed.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable
from datetime import UTC, datetime
from typing import Any

DAY_S = 86400.0
REPEATS = 2000
SEED = 47


def episode_of(namespace: str | None, at: float) -> tuple[str | None, int]:
    return namespace, int(at // DAY_S)


def month_of(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m")


def interval(
    samples: Iterable[tuple[Hashable, bool, bool]], *, repeats: int = REPEATS, seed: int = SEED
) -> dict[str, Any]:
    """``samples``: (episode, started after the likely time, started by the late bound).
    The share of each, the episodes they come from, and each share's 95 % interval when
    whole episodes are drawn again with replacement."""
    per: dict[Hashable, list[int]] = {}
    for episode, late, covered in samples:
        counts = per.setdefault(episode, [0, 0, 0])
        counts[0] += 1
        counts[1] += bool(late)
        counts[2] += bool(covered)
    if not per:
        return {"samples": 0, "episodes": 0}
    totals = list(per.values())
    samples_n = sum(c[0] for c in totals)
    draw = random.Random(seed)
    late_shares, covered_shares = [], []
    for _ in range(repeats):
        picked = [totals[draw.randrange(len(totals))] for _ in totals]
        n = sum(c[0] for c in picked)
        late_shares.append(100.0 * sum(c[1] for c in picked) / n)
        covered_shares.append(100.0 * sum(c[2] for c in picked) / n)
    return {
        "samples": samples_n,
        "episodes": len(totals),
        "late_pct": round(100.0 * sum(c[1] for c in totals) / samples_n, 1),
        "late_pct_95": _bounds(late_shares),
        "covered_pct": round(100.0 * sum(c[2] for c in totals) / samples_n, 1),
        "covered_pct_95": _bounds(covered_shares),
        "counts": [list(c) for c in totals],  # each episode's samples, late, covered: chance_inside
    }


def chance_inside(
    counts: list[list[int]],
    episodes: int,
    late_goal: tuple[float, float],
    covered_goal: tuple[float, float],
    *,
    repeats: int = REPEATS,
    seed: int = SEED,
) -> float:
    """How often a month of ``episodes`` episodes drawn from ``counts`` (a run's, ``interval``)
    lands inside both goals: with a run calibrated over many episodes, what a month that
    short can show of a method as good."""
    if not counts or episodes < 1:
        return 0.0
    draw, inside = random.Random(seed), 0
    for _ in range(repeats):
        picked = [counts[draw.randrange(len(counts))] for _ in range(episodes)]
        n = sum(c[0] for c in picked)
        late, covered = 100.0 * sum(c[1] for c in picked) / n, 100.0 * sum(c[2] for c in picked) / n
        inside += late_goal[0] <= late <= late_goal[1] and covered_goal[0] <= covered <= covered_goal[1]
    return round(100.0 * inside / repeats, 1)


def _bounds(values: list[float]) -> list[float]:
    values.sort()
    last = len(values) - 1
    return [round(values[round(0.025 * last)], 1), round(values[round(0.975 * last)], 1)]


def by_month(rows: Iterable[tuple[str | None, float, bool, bool]]) -> dict[str, dict[str, Any]]:
    """``rows``: (namespace, forecast at, late, covered) -> each month's ``interval``."""
    months: dict[str, list[tuple[Hashable, bool, bool]]] = {}
    for namespace, at, late, covered in rows:
        months.setdefault(month_of(at), []).append((episode_of(namespace, at), late, covered))
    return {month: interval(samples) for month, samples in sorted(months.items())}


def judged(goal: tuple[float, float], value: float, bounds: list[float] | None) -> str:
    """Whether the goal is "met", "not met", or, where the figure's 95 % interval reaches into
    the goal band, "not met (within chance)": its episodes cannot tell it from a figure inside."""
    if goal[0] <= value <= goal[1]:
        return "met"
    if bounds and bounds[0] <= goal[1] and goal[0] <= bounds[1]:
        return "not met (within chance)"
    return "not met"
