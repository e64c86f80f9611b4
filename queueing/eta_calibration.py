"""From the planner's forecast to what a user is told: a likely start and a late bound.

The forecast (``eta.forecast``) plays the queue forward with predicted durations.
It is a point, and the errors of such points are skewed: jobs wait for whichever
running job really ends first, and durations have a heavy tail.  Rather than trust
it, ``StartCalibrator`` learns from its own record.  Each time a job that was given
a forecast starts, the pair (forecast wait, actual wait) is observed, as a
log-residual ``log((actual + FLOOR_S) / (forecast + FLOOR_S))`` (the floor keeps a
forecast of "now" from dividing by zero, and a minute's error on a minute's wait
from counting as a miss by a factor of infinity).

- The **likely start** is the forecast wait scaled by the median residual: as many
  jobs start after it as before, whatever the forecast's own bias.
- The **late bound** scales it by the split-conformal 90% quantile of the residuals:
  on a stream whose errors are exchangeable, at least 90% of jobs start by it.

Residuals are kept per band of forecast wait (``BANDS``: errors on a forecast of
a few minutes differ from those on a day), each band falling back to all bands
together until it has ``min_samples`` of its own (Mondrian conformal prediction
with a pooled warm start).  Until ``min_samples`` starts are on record at all, the
forecast is the likely start and ``DEFAULT_SPREAD`` x the forecast wait the late
bound.  Bounded memory (``window`` residuals per band), no clock, no randomness.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from typing import NamedTuple

FLOOR_S = 60.0
COVERAGE = 0.9
DEFAULT_SPREAD = 4.0
BANDS: tuple[float, ...] = (600.0, 3600.0, 6 * 3600.0)  # band edges, seconds of forecast wait


class StartRange(NamedTuple):
    """``likely``: as likely to start before as after; ``late``: starts by then in 90% of cases."""

    likely: float
    late: float


class _Residuals:
    """The last ``size`` residuals, also kept sorted."""

    __slots__ = ("order", "ordered")

    def __init__(self, size: int) -> None:
        self.order: deque[float] = deque(maxlen=size)
        self.ordered: list[float] = []

    def add(self, value: float) -> None:
        if len(self.order) == self.order.maxlen:
            del self.ordered[bisect.bisect_left(self.ordered, self.order[0])]
        self.order.append(value)
        bisect.insort(self.ordered, value)

    def median(self) -> float:
        return self.ordered[(len(self.ordered) - 1) // 2]

    def conformal(self, level: float) -> float:
        """The ceil((n + 1) * level)-th smallest (the largest once past n)."""
        rank = math.ceil((len(self.ordered) + 1) * level)
        return self.ordered[min(rank, len(self.ordered)) - 1]


def band_of(forecast_wait_s: float) -> int:
    return bisect.bisect_right(BANDS, forecast_wait_s)


class StartCalibrator:
    """Learns how the forecast errs (``observe``) and turns forecasts into ranges (``range``)."""

    def __init__(self, *, window: int = 2000, min_samples: int = 50, coverage: float = COVERAGE) -> None:
        if window < 1 or min_samples < 1:
            raise ValueError("window and min_samples must be at least 1")
        if not 0 < coverage < 1:
            raise ValueError("coverage must lie strictly between 0 and 1")
        self.min_samples = min_samples
        self.coverage = coverage
        self.bands = [_Residuals(window) for _ in range(len(BANDS) + 1)]
        self.pooled = _Residuals(window)
        self.observed = 0

    def observe(self, forecast_wait_s: float, actual_wait_s: float) -> None:
        """A job forecast to start ``forecast_wait_s`` after the forecast started ``actual_wait_s`` after it."""
        if not (forecast_wait_s >= 0 and actual_wait_s >= 0) or math.isinf(forecast_wait_s + actual_wait_s):
            return  # NaN, negative or infinite: nothing to learn
        residual = math.log((actual_wait_s + FLOOR_S) / (forecast_wait_s + FLOOR_S))
        self.bands[band_of(forecast_wait_s)].add(residual)
        self.pooled.add(residual)
        self.observed += 1

    def _residuals(self, forecast_wait_s: float) -> _Residuals | None:
        own = self.bands[band_of(forecast_wait_s)]
        if len(own.order) >= self.min_samples:
            return own
        if len(self.pooled.order) >= self.min_samples:
            return self.pooled
        return None

    def range(self, now: float, eta: float) -> StartRange:
        """The likely start and the late bound for a job the forecast expects at ``eta``."""
        wait = max(eta - now, 0.0)
        residuals = self._residuals(wait)
        if residuals is None:
            return StartRange(now + wait, now + max(wait * DEFAULT_SPREAD, FLOOR_S))
        scale = wait + FLOOR_S
        likely = now + max(scale * math.exp(residuals.median()) - FLOOR_S, 0.0)
        late = now + max(scale * math.exp(residuals.conformal(self.coverage)) - FLOOR_S, 0.0)
        return StartRange(likely, max(late, likely))
