"""Issue 38: censored waits, adaptive levels and per-namespace records in the start calibrator."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queueing.adaptive_level import AdaptiveLevel
from queueing.censored_quantile import km_quantiles, thinned
from queueing.eta_calibration import FLOOR_S, ForecastSamples, StartCalibrator
from queueing.sorted_window import conformal_quantile
from tests.examples import examples

values = st.lists(st.floats(-20, 20), min_size=1, max_size=60).map(sorted)
levels = st.lists(st.floats(0, 1), min_size=1, max_size=5)


@settings(max_examples=examples(200), deadline=None)
@given(values, levels)
def test_without_censored_values_the_quantile_is_the_conformal_one(complete, wanted):
    assert km_quantiles(complete, [], wanted) == [conformal_quantile(complete, max(level, 1e-12)) for level in wanted]


@settings(max_examples=examples(200), deadline=None)
@given(values, st.lists(st.floats(-20, 20), max_size=60).map(sorted), levels, st.floats(0.1, 10))
def test_censored_values_never_lower_a_quantile_and_higher_levels_never_give_less(complete, censored, wanted, weight):
    with_censored = km_quantiles(complete, censored, wanted, censored_weight=weight)
    alone = km_quantiles(complete, [], wanted)
    assert all(a >= b for a, b in zip(with_censored, alone, strict=True))
    ordered = sorted(range(len(wanted)), key=lambda index: wanted[index])
    assert all(with_censored[a] <= with_censored[b] for a, b in zip(ordered, ordered[1:], strict=False))
    assert set(with_censored) <= set(complete) | set(censored)


def test_the_product_limit_estimate_by_hand():
    # At risk 5: 1 ends (S 4/5), 2 ends (S 3/5), one waiting at 2.5 leaves the risk set, 3 ends (S 3/10).
    # Level 0.5 is 0.625 after the conformal correction (x 5/4): reached at 3, not at 2.
    assert km_quantiles([1.0, 2.0, 3.0, 4.0], [2.5], [0.3, 0.5]) == [2.0, 3.0]
    # Censored mass past every complete value: the largest known value (a lower bound).
    assert km_quantiles([1.0], [5.0, 6.0], [0.9]) == [6.0]


def test_thinning_keeps_the_spread_and_the_weight():
    kept, weight = thinned(list(range(1000)), 10)
    assert len(kept) == 10 and weight == 100
    assert kept[0] < 100 and kept[-1] >= 900
    assert thinned([1.0, 2.0], 10) == ([1.0, 2.0], 1.0)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=400), st.floats(0.05, 0.95), st.floats(0.001, 0.5))
def test_the_adaptive_level_holds_the_miss_share_within_the_gibbs_candes_bound(draws, target, gamma):
    """Ranges that answer to the level (missed when a draw lies above it): whatever the draws,
    the share missed over T steps is within (max(target, 1 - target) + gamma) / (gamma T)."""
    level = AdaptiveLevel(target, gamma=gamma)
    missed = 0
    for draw in draws:
        err = int(draw > level.level)
        missed += err
        level.step(err)
        assert -gamma <= level.alpha <= 1 + gamma
    bound = (max(target, 1 - target) + gamma) / (gamma * len(draws))
    assert abs(missed / len(draws) - target) <= bound + 1e-9


def test_the_adaptive_level_does_not_wind_up_while_every_range_misses():
    level = AdaptiveLevel(0.1, gamma=0.05)
    for _ in range(1000):  # a backlog past anything on record: missed whatever the level
        level.step(1.0)
    assert level.level == 1.0 and level.alpha == -0.05
    for _ in range(11):  # (0.05 x 0.1 a step back from -0.05 to 0)
        level.step(0.0)
    assert level.level < 1.0  # back within eleven steps, not a thousand


def test_a_short_step_counts_for_its_share_and_bad_input_is_ignored():
    short, full = AdaptiveLevel(0.1), AdaptiveLevel(0.1)
    short.step(1.0, 1 / 6)
    full.step(1.0)
    assert 0.1 - short.alpha == pytest.approx((0.1 - full.alpha) / 6)
    burst = AdaptiveLevel(0.1, gamma=0.01)
    burst.step(0.0, count=10)
    burst.step(1.0, count=1000)  # a hundred times the typical step: counts for five
    assert burst.alpha == pytest.approx(0.1 + 0.01 * 0.1 - 5 * 0.01 * 0.9)
    full.step(math.nan)
    full.step(0.5, 0.0)
    assert full.alpha == pytest.approx(0.1 - 0.01 * 0.9)  # (the default gamma, 0.01)
    with pytest.raises(ValueError):
        AdaptiveLevel(1.0)


def test_a_job_outwaiting_its_late_bound_is_resolved_missed_at_once_and_its_likely_time_at_its_start():
    samples = ForecastSamples(every_s=0)
    samples.note("a", 0.0, 100.0, namespace="ns", shown=(200.0, 400.0))
    samples.note("b", 0.0, 100.0, namespace="ns", shown=(200.0, 400.0))
    samples.note("c", 0.0, 100.0)  # shown nothing: nothing to resolve
    assert samples.resolve(300.0) == []  # past the likely times: known only at the starts
    assert samples.resolve(450.0) == [("ns", 0, None, 1), ("ns", 0, None, 1)]  # past the bounds: missed now
    samples.started("a", 500.0)
    samples.note("d", 0.0, 100.0, namespace="ns", shown=(200.0, 400.0))
    samples.started("d", 150.0)
    # a: its likely time missed, its bound already counted; d: both met
    assert samples.resolve(600.0) == [("ns", 0, 1, None), ("ns", 0, 0, 0)]
    assert samples.resolve(700.0) == []
    # b and c still wait: each forecast of theirs is a residual of at least what they waited so far
    floor = math.log((700.0 + FLOOR_S) / (100.0 + FLOOR_S))
    assert list(samples.censored(700.0)) == [("ns", 0, floor), (None, 0, floor)]


def _trained(calibrator, namespace=None, factor=1.0, count=100):
    for index in range(count):
        forecast = 1000.0 + 10 * index
        calibrator.observe(forecast, (forecast + FLOOR_S) * factor - FLOOR_S, namespace)


def test_a_backlog_moves_the_ranges_while_it_builds():
    """Jobs waiting far past their forecasts widen and delay the ranges before any of them starts."""
    calibrator = StartCalibrator(min_samples=20, update_every_s=0)
    samples = ForecastSamples(every_s=600)
    _trained(calibrator)
    calibrator.update(0.0, samples)
    before = calibrator.range(0.0, 1000.0)
    for job in range(300):  # each forecast to start in ~20 min, all still waiting 5 h later
        samples.note(job, 0.0, 1200.0, shown=calibrator.range(0.0, 1200.0))
    assert calibrator.update(5 * 3600.0, samples)
    after = calibrator.range(5 * 3600.0, 5 * 3600.0 + 1000.0)
    assert after.likely - 5 * 3600.0 > 4 * (before.likely - 0.0)
    assert after.late - 5 * 3600.0 > 4 * (before.late - 0.0)


def test_updates_come_at_most_every_update_interval():
    calibrator = StartCalibrator(update_every_s=600)
    samples = ForecastSamples()
    assert calibrator.update(0.0, samples)
    assert not calibrator.update(599.0, samples)
    assert calibrator.update(600.0, samples)
    assert not calibrator.update(math.nan, samples)


def test_a_namespace_with_history_enough_has_its_own_ranges_others_the_pooled_ones():
    calibrator = StartCalibrator(min_samples=50)
    _trained(calibrator, "exact", 1.0)
    _trained(calibrator, "slow", 4.0)
    _trained(calibrator, "new", 4.0, count=10)  # too few of its own
    assert calibrator.range(0.0, 1500.0, "exact").likely == pytest.approx(1500.0)
    assert calibrator.range(0.0, 1500.0, "slow").likely == pytest.approx(4 * (1500.0 + FLOOR_S) - FLOOR_S)
    pooled = calibrator.range(0.0, 1500.0)
    assert calibrator.range(0.0, 1500.0, "new") == pooled
    assert 1500.0 <= pooled.likely <= 4 * (1500.0 + FLOOR_S)
    pooled_only = StartCalibrator(min_samples=50, by_namespace=False)
    _trained(pooled_only, "exact", 1.0)
    _trained(pooled_only, "slow", 4.0)
    assert pooled_only.range(0.0, 1500.0, "exact") == pooled_only.range(0.0, 1500.0)


def _simulate(calibrator: StartCalibrator, hours: int, drift) -> tuple[float, float]:
    """A queue whose forecasts err by a factor drifting with time (``drift(hour)``): jobs
    arrive every hour, are shown a range every hour while they wait, and the share of shown
    ranges they started after (likely, late) is returned, over the second half."""
    rng = random.Random(11)
    samples = ForecastSamples(every_s=3600)
    waiting: dict[int, tuple[float, str]] = {}
    starts: list[tuple[float, int]] = []
    shown: list[tuple[int, float, float, float]] = []
    job = 0
    for hour in range(hours):
        now = hour * 3600.0
        while starts and starts[0][0] <= now:
            at, started = starts.pop(0)
            calibrator.learn_start(samples, started, at)
            waiting.pop(started)
        calibrator.update(now, samples)
        for _ in range(4):
            forecast = rng.choice([1800.0, 7200.0, 28800.0])
            actual = now + (forecast + FLOOR_S) * drift(hour) * math.exp(rng.gauss(0, 0.6)) - FLOOR_S
            waiting[job] = (max(actual, now), rng.choice(["a", "b"]))
            starts.append((max(actual, now), job))
            job += 1
        starts.sort()
        for each, (at, namespace) in waiting.items():
            forecast = max(now + 3600.0, now + (at - now) / drift(hour) * math.exp(rng.gauss(0, 0.3)))
            likely, late = calibrator.range(now, forecast, namespace)
            samples.note(each, now, forecast, namespace=namespace, shown=(likely, late))
            if hour >= hours // 2:
                shown.append((each, at, likely, late))
    later = sum(at > likely for _, at, likely, _ in shown) / len(shown)
    covered = sum(at <= late for _, at, _, late in shown) / len(shown)
    return later, covered


def test_ranges_stay_calibrated_when_the_forecast_drifts():
    """The forecast goes from right to three times too early and back (a backlog building and
    clearing): the adaptive levels and the censored waits keep both ranges near their targets."""

    def drift(hour: int) -> float:
        return 1.0 + 2.0 * (0.5 - 0.5 * math.cos(2 * math.pi * hour / 200))

    later, covered = _simulate(StartCalibrator(min_samples=30, update_every_s=3600), 400, drift)
    assert 0.4 <= later <= 0.6
    assert 0.86 <= covered <= 0.94


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.floats(0, 1e6), st.floats(-1e4, 1e6), st.sampled_from(["a", "b", None])),
        max_size=200,
    ),
    st.integers(1, 40),
)
def test_ranges_stay_ordered_with_any_waiting_record(notes, min_samples):
    calibrator = StartCalibrator(window=40, min_samples=min_samples, update_every_s=0)
    samples = ForecastSamples(every_s=0)
    now = 0.0
    for job, at, ahead, namespace in sorted(notes, key=lambda note: note[1]):
        now = at
        shown = calibrator.range(now, now + ahead, namespace)
        assert now <= shown.likely <= shown.late and not math.isnan(shown.late)
        samples.note(job, now, now + ahead, namespace=namespace, shown=shown)
        if job % 3 == 0:
            calibrator.learn_start(samples, job, now + abs(ahead))
        calibrator.update(now, samples)
        for group in (calibrator.pooled, *calibrator.bands, *calibrator.namespaces.values()):
            assert len(group.censored) <= (group.residuals.order.maxlen or 0)
