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

Residuals are kept per namespace (``window // 4`` each), per band of forecast wait
(``BANDS``: errors on a forecast of a few minutes differ from those on a day) and all
together; a range comes from its namespace's record if that has ``min_samples``, else
its band's, else all of them (Mondrian conformal prediction with a pooled warm start).
Until ``min_samples`` starts are on record at all, the forecast is the likely start and
``DEFAULT_SPREAD`` x the forecast wait the late bound.

Issue 38: started jobs alone make a calibrator that lags a backlog (their waits are in
only once it drains) and errs in bursts.  So ``update`` (from the caller's cycle, at most
every ``update_every_s``) learns from the jobs still waiting as well:

- each forecast of a waiting job is a **censored** residual, at least what it has waited
  so far, and the quantiles are Kaplan-Meier estimates over complete and censored
  residuals together (``censored_quantile``): a backlog moves the ranges while it builds;
- the range each forecast came with (``ForecastSamples.note(shown=...)``) is resolved as
  soon as its outcome is known (missed once the job outwaits it, else at its start), and
  the levels of the likely time (target: half missed) and of the late bound (target:
  ``1 - coverage`` missed) adapt to the share missed, per group (``AdaptiveLevel``:
  adaptive conformal inference), which keeps them calibrated where the errors are not
  exchangeable: load drifts, months differ.

Issue 47: on months the record never saw, those levels stayed where the record put them
(November, from October's record: 4.6 % of jobs after the likely time, 97.4 % covered),
because a month's forecasts can err the other way from the record's (October's start late,
November's early) and an hourly level cannot cross that in an episode of a few hours.  So
each range resolved also shifts the group's ranges (``LogShift``, in log units), and a
record forgets residuals older than ``forget_after_s`` while it keeps ``min_samples``
younger ones (what a new leader reads, another month's, first).

Bounded memory (``window`` residuals per group, censored residuals thinned to as many,
``ForecastSamples``' own bounds), no clock, no randomness.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Hashable, Iterator
from typing import Any, NamedTuple

from .adaptive_level import GAMMA, SHIFT_RATE, STEP_S, AdaptiveLevel, LogShift
from .censored_quantile import km_quantiles, thinned
from .sorted_window import SortedWindow

FLOOR_S = 60.0
COVERAGE = 0.9
DEFAULT_SPREAD = 4.0
BANDS: tuple[float, ...] = (600.0, 3600.0, 6 * 3600.0)  # band edges, seconds of forecast wait
SAMPLE_EVERY_S = 600.0  # a waiting job's forecast is sampled at most this often...
PER_JOB = 48  # ...and at most this many kept (thinned to every other, then sampled half as often)
FORGET_AFTER_S = 86400.0  # a job not given a forecast for this long is dropped (deleted, never started)
# A residual older than this is forgotten once its group has min_samples younger ones: the
# queue comes in episodes and each errs its own way (October's forecasts at x1 start late,
# November's early), so a month's own last day says more than another month's record.
FORGET_RESIDUALS_S = 86400.0


class StartRange(NamedTuple):
    """``likely``: as likely to start before as after; ``late``: starts by then in 90% of cases."""

    likely: float
    late: float


def band_of(forecast_wait_s: float) -> int:
    return bisect.bisect_right(BANDS, forecast_wait_s)


class _Group:
    """One set of residuals the ranges may come from (a namespace, a band, all), with the
    waits still running in it (censored, from the last ``update``) and its adaptive levels."""

    __slots__ = (
        "censored",
        "censored_weight",
        "late",
        "late_shift",
        "likely",
        "likely_shift",
        "memo",
        "misses",
        "residuals",
        "times",
    )

    def __init__(self, window: int, coverage: float, gamma: float, rate: float) -> None:
        self.residuals = SortedWindow(window)
        self.times: deque[float] = deque(maxlen=window)  # when each residual was learned (-inf: unknown)
        self.censored: list[float] = []
        self.censored_weight = 1.0
        self.likely = AdaptiveLevel(0.5, gamma=gamma)  # as many start after the likely time as before
        self.late = AdaptiveLevel(1.0 - coverage, gamma=gamma)
        self.memo: tuple[float, float] | None = None
        self.misses = [0, 0, 0, 0]  # likely missed, likely resolved, late missed, late resolved
        self.likely_shift = LogShift(0.5, rate=rate)
        self.late_shift = LogShift(1.0 - coverage, rate=rate)

    def add(self, residual: float, at: float) -> None:
        self.residuals.add(residual)
        self.times.append(at)
        self.memo = None

    def expire(self, before: float, keep: int) -> None:
        """Forget the residuals learned before ``before`` while more than ``keep`` are left."""
        times, residuals = self.times, self.residuals
        while len(times) > keep and times[0] < before:
            times.popleft()
            residuals.drop_oldest()
            self.memo = None

    def quantiles(self) -> tuple[float, float]:
        """The residuals by which the likely time and the late bound scale the forecast."""
        if self.memo is None:
            likely, late = km_quantiles(
                self.residuals.ordered,
                self.censored,
                (self.likely.level, self.late.level),
                censored_weight=self.censored_weight,
            )
            self.memo = (likely + self.likely_shift.shift, late + self.late_shift.shift)
        return self.memo

    def step(self, weight: float) -> None:
        likely_missed, likely_resolved, late_missed, late_resolved = self.misses
        if likely_resolved:
            self.likely.step(likely_missed / likely_resolved, weight, likely_resolved)
            self.likely_shift.step(likely_missed, likely_resolved)
        if late_resolved:
            self.late.step(late_missed / late_resolved, weight, late_resolved)
            self.late_shift.step(late_missed, late_resolved)
        self.misses = [0, 0, 0, 0]
        self.memo = None


class StartCalibrator:
    """Learns how the forecast errs (``observe``, ``learn_start``, ``update``) and turns
    forecasts into ranges (``range``)."""

    def __init__(
        self,
        *,
        window: int = 2000,
        min_samples: int = 50,
        coverage: float = COVERAGE,
        by_namespace: bool = True,
        gamma: float = GAMMA,
        update_every_s: float = SAMPLE_EVERY_S,
        rate: float = SHIFT_RATE,
        forget_after_s: float = FORGET_RESIDUALS_S,
    ) -> None:
        if window < 1 or min_samples < 1:
            raise ValueError("window and min_samples must be at least 1")
        if not 0 < coverage < 1:
            raise ValueError("coverage must lie strictly between 0 and 1")
        if not gamma > 0 or not update_every_s >= 0 or not rate >= 0 or not forget_after_s > 0:
            raise ValueError("gamma and forget_after_s must be positive, update_every_s and rate >= 0")
        self.window = window
        self.min_samples = min_samples
        self.coverage = coverage
        self.by_namespace = by_namespace
        self.gamma = gamma
        self.update_every_s = update_every_s
        self.rate = rate
        self.forget_after_s = forget_after_s
        self.bands = [_Group(window, coverage, gamma, rate) for _ in range(len(BANDS) + 1)]
        self.pooled = _Group(window, coverage, gamma, rate)
        self.namespaces: dict[str, _Group] = {}
        self.observed = 0
        self._updated_at = -math.inf

    def _groups(self, band: int, namespace: str | None) -> list[_Group]:
        """The groups a forecast of band ``band`` for a job of ``namespace`` belongs to."""
        groups = [self.pooled, self.bands[band]]
        if namespace is not None and self.by_namespace:
            group = self.namespaces.get(namespace)
            if group is None:
                group = self.namespaces[namespace] = _Group(
                    max(self.window // 4, 1), self.coverage, self.gamma, self.rate
                )
            groups.append(group)
        return groups

    def observe(
        self, forecast_wait_s: float, actual_wait_s: float, namespace: str | None = None, at: float | None = None
    ) -> None:
        """A job (of ``namespace``) forecast to start ``forecast_wait_s`` after the forecast
        started ``actual_wait_s`` after it, at ``at`` (None: long ago, e.g. what a new leader
        reads of the jobs that started under another: the first forgotten, ``update``)."""
        if not (forecast_wait_s >= 0 and actual_wait_s >= 0) or math.isinf(forecast_wait_s + actual_wait_s):
            return  # NaN, negative or infinite: nothing to learn
        residual = math.log((actual_wait_s + FLOOR_S) / (forecast_wait_s + FLOOR_S))
        learned = -math.inf if at is None or not math.isfinite(at) else at
        for group in self._groups(band_of(forecast_wait_s), namespace):
            group.add(residual, learned)
        self.observed += 1

    def learn_start(self, samples: ForecastSamples, job: Hashable, at: float) -> int:
        """``job`` started at ``at``: every forecast it was given (``samples``) is observed, and
        the ranges it was shown are resolved (for the next ``update``). Returns how many."""
        namespace = samples.namespace_of(job)
        pairs = samples.started(job, at)
        for forecast_wait, actual_wait in pairs:
            self.observe(forecast_wait, actual_wait, namespace, at)
        return len(pairs)

    def update(self, now: float, samples: ForecastSamples) -> bool:
        """What the jobs still waiting say now (at most every ``update_every_s``): the ranges
        they were shown and have outwaited count as missed (``AdaptiveLevel``), and their
        waits so far are censored residuals (``km_quantiles``). True if it updated."""
        if not math.isfinite(now) or now - self._updated_at < self.update_every_s:
            return False
        weight = (now - self._updated_at) / STEP_S if math.isfinite(self._updated_at) else 1.0
        self._updated_at = now
        for namespace, band, likely_missed, late_missed in samples.resolve(now):
            for group in self._groups(band, namespace):
                if likely_missed is not None:
                    group.misses[0] += likely_missed
                    group.misses[1] += 1
                if late_missed is not None:
                    group.misses[2] += late_missed
                    group.misses[3] += 1
        # (gathered per namespace and band first: a queue of 10,000 jobs has 100,000s of forecasts)
        by_key: dict[tuple[str | None, int], list[float]] = {}
        for namespace, band, residual in samples.censored(now):
            values = by_key.get((namespace, band))
            if values is None:
                values = by_key[namespace, band] = []
            values.append(residual)
        censored: dict[int, list[float]] = {}
        for (namespace, band), values in by_key.items():
            for group in self._groups(band, namespace):
                censored.setdefault(id(group), []).extend(values)
        forget_before = now - self.forget_after_s
        for group in (self.pooled, *self.bands, *self.namespaces.values()):
            group.expire(forget_before, self.min_samples)
            group.step(weight)
            values = sorted(censored.get(id(group), ()))
            group.censored, group.censored_weight = thinned(values, group.residuals.order.maxlen or 1)
        return True

    def _chosen(self, forecast_wait_s: float, namespace: str | None) -> _Group | None:
        """The namespace's own record if it has enough, else the band's, else all of them."""
        own = self.namespaces.get(namespace) if namespace is not None and self.by_namespace else None
        for group in (own, self.bands[band_of(forecast_wait_s)], self.pooled):
            if group is not None and len(group.residuals) >= self.min_samples:
                return group
        return None

    def range(self, now: float, eta: float, namespace: str | None = None) -> StartRange:
        """The likely start and the late bound for a job (of ``namespace``) the forecast
        expects at ``eta``."""
        wait = max(eta - now, 0.0)
        group = self._chosen(wait, namespace)
        if group is None:
            return StartRange(now + wait, now + max(wait * DEFAULT_SPREAD, FLOOR_S))
        likely_residual, late_residual = group.quantiles()
        scale = wait + FLOOR_S
        likely = now + max(scale * math.exp(likely_residual) - FLOOR_S, 0.0)
        late = now + max(scale * math.exp(late_residual) - FLOOR_S, 0.0)
        return StartRange(likely, max(late, likely))


LIKELY_OPEN, LATE_OPEN = 1, 2  # a shown range whose likely time / late bound is not resolved yet
MAX_OUTCOMES = 100_000  # resolved ranges kept for the next update (bounded if no update comes)


class _Sampled:
    __slots__ = ("every", "last", "namespace", "samples")

    def __init__(self, every: float, namespace: str | None) -> None:
        self.every = every
        self.last = -math.inf
        self.namespace = namespace
        # [given at, forecast start, likely start shown, late bound shown, LIKELY_OPEN | LATE_OPEN]
        self.samples: list[list[Any]] = []


Outcome = tuple[str | None, int, int | None, int | None]  # namespace, band, likely missed, late missed


class ForecastSamples:
    """The forecasts waiting jobs were given, kept until each starts (``started``).

    Evenly over each wait: one every ``every_s`` (so a long wait counts for as many
    forecasts as a user saw during it), at most ``per_job`` per job (past that, every
    other one is dropped and the job is sampled half as often).  With each, the range the
    job was shown then, if any: whether the job started after it is known when it starts,
    or earlier, as soon as it has waited past it (``resolve``), and a job still waiting
    has waited at least so long (``censored``).  No clock of its own."""

    def __init__(
        self, *, every_s: float = SAMPLE_EVERY_S, per_job: int = PER_JOB, forget_after_s: float = FORGET_AFTER_S
    ) -> None:
        if not every_s >= 0 or per_job < 2 or not forget_after_s > 0:
            raise ValueError("every_s must be >= 0, per_job >= 2 and forget_after_s > 0")
        self.every_s = every_s
        self.per_job = per_job
        self.forget_after_s = forget_after_s
        self.jobs: dict[Hashable, _Sampled] = {}
        self.outcomes: deque[Outcome] = deque(maxlen=MAX_OUTCOMES)
        self._swept_at = -math.inf

    def note(
        self,
        job: Hashable,
        now: float,
        eta: float,
        *,
        namespace: str | None = None,
        shown: tuple[float | None, float | None] | None = None,
    ) -> None:
        """``job`` (of ``namespace``) was told at ``now`` that it would start at ``eta``, and
        shown the range ``shown`` (likely start, late bound; None: none)."""
        if not (math.isfinite(now) and math.isfinite(eta)):
            return
        entry = self.jobs.get(job)
        if entry is None:
            entry = self.jobs[job] = _Sampled(self.every_s, namespace)
        if now - entry.last < entry.every:
            return
        entry.last = now
        likely, late = shown if shown is not None else (None, None)
        flags = (LIKELY_OPEN if likely is not None else 0) | (LATE_OPEN if late is not None else 0)
        entry.samples.append([now, eta, likely, late, flags])
        if len(entry.samples) > self.per_job:
            entry.samples = entry.samples[::2]
            entry.every = max(2 * entry.every, 1.0)

    def namespace_of(self, job: Hashable) -> str | None:
        entry = self.jobs.get(job)
        return entry.namespace if entry is not None else None

    def started(self, job: Hashable, at: float) -> list[tuple[float, float]]:
        """``job`` started at ``at``: its (forecast wait, actual wait) pairs, each once."""
        entry = self.jobs.pop(job, None)
        if entry is None:
            return []
        pairs = []
        for given, eta, likely, late, flags in entry.samples:
            if at < given:
                continue
            pairs.append((max(eta - given, 0.0), at - given))
            if flags:
                band = band_of(max(eta - given, 0.0))
                self.outcomes.append(
                    (
                        entry.namespace,
                        band,
                        int(at > likely) if flags & LIKELY_OPEN else None,
                        int(at > late) if flags & LATE_OPEN else None,
                    )
                )
        return pairs

    def resolve(self, now: float) -> list[Outcome]:
        """The shown ranges resolved since the last call: those of the jobs that started, and
        the late bounds the jobs still waiting have outwaited by ``now`` (missed, each once).

        A likely time is resolved only at the start, missed or not: half of them are missed
        by design, and counting those as they happen but the hits only as jobs start skews
        every hour of a building queue toward misses (on October's replay the likely time
        drifted to 31 % of jobs starting after it, against 41 % so).  A late bound is missed
        by one job in ten, and a backlog passing it is the news the level must have now."""
        for entry in self.jobs.values():
            for sample in entry.samples:
                if sample[4] & LATE_OPEN and now > sample[3]:
                    sample[4] &= ~LATE_OPEN
                    band = band_of(max(sample[1] - sample[0], 0.0))
                    self.outcomes.append((entry.namespace, band, None, 1))
        outcomes = list(self.outcomes)
        self.outcomes.clear()
        return outcomes

    def censored(self, now: float) -> Iterator[tuple[str | None, int, float]]:
        """Every forecast of a job still waiting, as (namespace, band, the least its residual
        can be): it has waited ``now - given`` so far."""
        log, floor = math.log, FLOOR_S
        for entry in self.jobs.values():
            namespace = entry.namespace
            for sample in entry.samples:
                given = sample[0]
                if now >= given:
                    forecast_wait = max(sample[1] - given, 0.0)
                    yield namespace, band_of(forecast_wait), log((now - given + floor) / (forecast_wait + floor))

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
