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

Which forecasts it learns from matters as much: a user looks at a range all along a
wait, and a forecast made the moment a job arrives errs differently from one made
hours later near the head of the queue.  ``ForecastSamples`` keeps the forecasts a
waiting job is given, one per ``SAMPLE_EVERY_S`` of its wait, and hands them all to
the calibrator when the job starts, so it corrects the forecasts users really see.

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
from collections.abc import Hashable
from typing import NamedTuple

from .sorted_window import SortedWindow

FLOOR_S = 60.0
COVERAGE = 0.9
DEFAULT_SPREAD = 4.0
BANDS: tuple[float, ...] = (600.0, 3600.0, 6 * 3600.0)  # band edges, seconds of forecast wait
SAMPLE_EVERY_S = 600.0  # a waiting job's forecast is sampled at most this often...
PER_JOB = 48  # ...and at most this many kept (thinned to every other, then sampled half as often)
FORGET_AFTER_S = 86400.0  # a job not given a forecast for this long is dropped (deleted, never started)


class StartRange(NamedTuple):
    """``likely``: as likely to start before as after; ``late``: starts by then in 90% of cases."""

    likely: float
    late: float


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
        self.bands = [SortedWindow(window) for _ in range(len(BANDS) + 1)]
        self.pooled = SortedWindow(window)
        self.observed = 0

    def observe(self, forecast_wait_s: float, actual_wait_s: float) -> None:
        """A job forecast to start ``forecast_wait_s`` after the forecast started ``actual_wait_s`` after it."""
        if not (forecast_wait_s >= 0 and actual_wait_s >= 0) or math.isinf(forecast_wait_s + actual_wait_s):
            return  # NaN, negative or infinite: nothing to learn
        residual = math.log((actual_wait_s + FLOOR_S) / (forecast_wait_s + FLOOR_S))
        self.bands[band_of(forecast_wait_s)].add(residual)
        self.pooled.add(residual)
        self.observed += 1

    def _residuals(self, forecast_wait_s: float) -> SortedWindow | None:
        own = self.bands[band_of(forecast_wait_s)]
        if len(own) >= self.min_samples:
            return own
        if len(self.pooled) >= self.min_samples:
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


class _Sampled:
    __slots__ = ("every", "last", "samples")

    def __init__(self, every: float) -> None:
        self.every = every
        self.last = -math.inf
        self.samples: list[tuple[float, float]] = []  # (given at, forecast start)


class ForecastSamples:
    """The forecasts waiting jobs were given, kept until each starts (``started``).

    Evenly over each wait: one every ``every_s`` (so a long wait counts for as many
    forecasts as a user saw during it), at most ``per_job`` per job (past that, every
    other one is dropped and the job is sampled half as often).  No clock of its own."""

    def __init__(
        self, *, every_s: float = SAMPLE_EVERY_S, per_job: int = PER_JOB, forget_after_s: float = FORGET_AFTER_S
    ) -> None:
        if not every_s >= 0 or per_job < 2 or not forget_after_s > 0:
            raise ValueError("every_s must be >= 0, per_job >= 2 and forget_after_s > 0")
        self.every_s = every_s
        self.per_job = per_job
        self.forget_after_s = forget_after_s
        self.jobs: dict[Hashable, _Sampled] = {}
        self._swept_at = -math.inf

    def note(self, job: Hashable, now: float, eta: float) -> None:
        """``job`` was told at ``now`` that it would start at ``eta``."""
        if not (math.isfinite(now) and math.isfinite(eta)):
            return
        entry = self.jobs.get(job)
        if entry is None:
            entry = self.jobs[job] = _Sampled(self.every_s)
        if now - entry.last < entry.every:
            return
        entry.last = now
        entry.samples.append((now, eta))
        if len(entry.samples) > self.per_job:
            entry.samples = entry.samples[::2]
            entry.every = max(2 * entry.every, 1.0)

    def started(self, job: Hashable, at: float) -> list[tuple[float, float]]:
        """``job`` started at ``at``: its (forecast wait, actual wait) pairs, each once."""
        entry = self.jobs.pop(job, None)
        if entry is None:
            return []
        return [(max(eta - given, 0.0), at - given) for given, eta in entry.samples if at >= given]

    def forget(self, now: float) -> None:
        """Drop the jobs given no forecast for ``forget_after_s`` (deleted, or left the queue
        without starting): what bounds the memory.  A sweep at most every ``every_s``: it
        runs every cycle over every job, where nothing changes between two samples."""
        if now - self._swept_at < self.every_s:
            return
        self._swept_at = now
        stale = [job for job, entry in self.jobs.items() if now - entry.last > self.forget_after_s]
        for job in stale:
            del self.jobs[job]
