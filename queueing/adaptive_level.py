"""Adaptive conformal inference (Gibbs & Candes, 2021): a quantile level that answers to
how the ranges it gave fared.

A range is meant to be missed (the job starts after it) a share ``target`` of the time.
After each step the level's miss share moves: ``alpha <- alpha + gamma (target - err)``
where ``err`` is the share of the ranges resolved in the step that were missed; the
quantile used is the ``1 - alpha`` one.  Over T steps the average miss share is within
``(max(target, 1 - target) + gamma) / (gamma T)`` of the target whatever the stream does
(exchangeable or not), because alpha stays bounded: that is the point, the errors of
queue forecasts come in bursts and drift with the load.

Why a step is an hour of the clock, not one job: the jobs that resolve together (a burst
of starts, a backlog passing every bound at once) err together, so counting each as a
step would swing the level from end to end on one event.  But a step is weighed by how
many ranges it resolved against the typical step (a moving average, ``count / typical``,
at most ``BURST``): what is held to the target is the share of ranges missed, not the
share of hours, and the two differ (misses resolve one by one as jobs outwait their
bounds, hits in batches as jobs start), while one burst still moves the level at most
``BURST`` steps' worth.  ``gamma`` = ``GAMMA`` = 0.01 per hour: a change of regime that
makes every range miss moves the level by about one point an hour (five in an hour of
many more misses than usual), so a late bound at 90 % reaches its maximum within a day of a
backlog, or within hours of a burst; a larger gamma chases the ends of bursts: the queue
comes in episodes, and the level an episode ends with is the one the next begins with.
On October's replay (the only month tuned on) gamma 0.005 / 0.01 / 0.02 / 0.03 / 0.05
put 42 / 42 / 41 / 40 / 34 % of jobs after their likely time, all with the bound covering
88.5-89 %.  The guarantee over T steps, (max(target, 1 - target) + gamma) / (gamma T), is
a worst case: a point over a year of hours, thirteen over a month.  Steps shorter than an
hour count for their share of one.

Clamps: the level used is ``1 - alpha`` clamped to [0, 1] (at 1 the largest value known,
at 0 the smallest).  Gibbs and Candes' alpha never leaves [-gamma, 1 + gamma] because past
0 their interval is infinite and cannot be missed; here the largest residual known can still
be missed (a backlog beyond anything on record), so alpha itself is clamped to that interval
too, else it would wind up for as long as the backlog lasts and lag as long on the way back.
Whenever the ranges do answer to the level (a level of 1 is never missed, 0 always), the
clamp never acts and the bound above holds exactly.
"""

from __future__ import annotations

import math

STEP_S = 3600.0
GAMMA = 0.01
BURST = 5.0  # a step resolving many more ranges than usual counts for at most this many steps
TYPICAL_DECAY = 0.1  # the typical count of a step: a moving average over about ten steps


class AdaptiveLevel:
    __slots__ = ("alpha", "gamma", "target", "typical")

    def __init__(self, target: float, *, gamma: float = GAMMA) -> None:
        if not 0 < target < 1 or not gamma > 0:
            raise ValueError("target must lie strictly between 0 and 1, gamma be positive")
        self.target = target
        self.gamma = gamma
        self.alpha = target
        self.typical = 0.0

    @property
    def level(self) -> float:
        """The quantile level to use now: the ``1 - alpha`` quantile."""
        return min(max(1.0 - self.alpha, 0.0), 1.0)

    def step(self, missed: float, weight: float = 1.0, count: int = 1) -> None:
        """``missed``: the share (0..1) of the ``count`` ranges resolved in this step that were
        missed; ``weight``: the step's length in steps (an update after ten minutes: 1/6)."""
        if not (0.0 <= missed <= 1.0 and weight > 0 and count > 0) or math.isinf(weight):
            return
        self.typical = count if not self.typical else self.typical + TYPICAL_DECAY * (count - self.typical)
        scale = min(weight, 1.0) * min(count / self.typical, BURST)
        alpha = self.alpha + self.gamma * scale * (self.target - missed)
        self.alpha = min(max(alpha, -self.gamma), 1.0 + self.gamma)


SHIFT_RATE = 0.05  # log units per range resolved, times (missed - target)
MAX_SHIFT = 5.0  # a factor of e^5 = 150 either way: past that the record, not the shift, must answer


class LogShift:
    """Online quantile tracking of a multiplier (Angelopoulos, Candes & Tibshirani 2023,
    conformal PID control, its P term): ``shift <- shift + rate (missed - target x resolved)``
    in log units, added to the residual quantile the record and the level give.

    Why, beside the level: a level only picks among the residuals on record, and on a month
    unlike the record nearly every residual is on the wrong side (October's forecasts at x1:
    70 % of jobs start after them, median factor 1.5; November's: 5 %, median factor 0.7), so
    the level must cross most of [0, 1] at ``gamma`` an hour (over December's only busy
    episode, ten hours, the likely time's level went from 0.48 to 0.43 while 85 % of its
    jobs started before it; a late bound over-covering moves nine times slower still: a hit
    moves it by ``gamma x 0.1``).  The shift moves the range itself, per range resolved, so
    the first jobs of an episode that start early (or outwait their bounds) move the ranges
    of those still waiting with them.  Per range, not per hour or per job: what is held to
    its target is the share of ranges shown that were missed; over T ranges that share is
    within ``MAX_SHIFT / (rate T)`` of the target whatever the stream, as long as the clamp
    does not act (the shift is the sum of its steps).  ``rate`` = 0.05, chosen on October
    (x1 and x3, bootstrapped from November) only: 0.02 left the x1 bound at 85.2 % covered,
    0.1 at 86.7 % (later than likely 44.0 / 45.5 / 46.7 % for 0.02 / 0.05 / 0.1)."""

    __slots__ = ("rate", "shift", "target")

    def __init__(self, target: float, *, rate: float = SHIFT_RATE) -> None:
        if not 0 < target < 1 or not rate >= 0:
            raise ValueError("target must lie strictly between 0 and 1, rate be >= 0")
        self.target = target
        self.rate = rate
        self.shift = 0.0

    def step(self, missed: float, resolved: float) -> None:
        """``missed`` of ``resolved`` (weighted: jobs, not forecasts) ranges were missed."""
        if not (0.0 <= missed <= resolved) or not math.isfinite(resolved):
            return
        shift = self.shift + self.rate * (missed - self.target * resolved)
        self.shift = min(max(shift, -MAX_SHIFT), MAX_SHIFT)
