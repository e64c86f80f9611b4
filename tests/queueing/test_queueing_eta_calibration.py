"""queueing.eta_calibration: a likely start and a late bound learned from the forecast's record."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queueing.eta_calibration import BANDS, DEFAULT_SPREAD, FLOOR_S, ForecastSamples, StartCalibrator
from tests.examples import examples

waits = st.one_of(st.floats(min_value=0.0, max_value=1e7), st.sampled_from([-1.0, math.nan, math.inf]))


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(waits, waits), max_size=200),
    st.floats(min_value=0, max_value=1e9),
    st.floats(min_value=-1e4, max_value=1e7),
    st.integers(1, 60),
)
def test_the_range_is_ordered_and_never_before_now(observations, now, ahead, min_samples):
    calibrator = StartCalibrator(window=50, min_samples=min_samples)
    for forecast, actual in observations:
        calibrator.observe(forecast, actual)
    likely, late = calibrator.range(now, now + ahead)
    assert now <= likely <= late
    assert not math.isnan(late)


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e5), st.floats(0, 1e5)), min_size=60, max_size=200), st.floats(0, 1e6))
def test_a_later_forecast_never_gives_an_earlier_range_within_a_band(observations, base):
    calibrator = StartCalibrator(min_samples=50)
    for forecast, actual in observations:
        calibrator.observe(forecast, actual)
    edges = (0.0, *BANDS, 1e7)
    for low, high in zip(edges, edges[1:], strict=False):
        a = calibrator.range(0.0, low + (high - low) * 0.25)
        b = calibrator.range(0.0, low + (high - low) * 0.75)
        assert b.likely >= a.likely and b.late >= a.late


def test_without_a_record_the_forecast_is_the_likely_start():
    calibrator = StartCalibrator(min_samples=5)
    assert calibrator.range(1000.0, 1600.0) == (1600.0, 1000.0 + 600 * DEFAULT_SPREAD)
    assert calibrator.range(1000.0, 900.0) == (1000.0, 1000.0 + FLOOR_S)  # a past forecast: now


@pytest.mark.parametrize("bias, sigma", [(1.0, 0.5), (3.0, 1.0), (0.7, 0.8)])
def test_a_biased_forecast_is_corrected_and_the_late_bound_covers_90_percent(bias, sigma):
    """The forecast errs by a factor ``bias`` (x lognormal noise): after learning, about half
    start after the likely time and about 90 % by the late bound, in every band."""
    rng = random.Random(7)
    calibrator = StartCalibrator(window=2000, min_samples=50)
    after = covered = total = 0
    for step in range(12000):
        forecast = rng.choice([30.0, 300.0, 2000.0, 20000.0, 90000.0]) * rng.uniform(0.5, 1.5)
        actual = (forecast + FLOOR_S) * bias * math.exp(rng.gauss(0, sigma)) - FLOOR_S
        actual = max(actual, 0.0)
        if step >= 4000:
            likely, late = calibrator.range(0.0, forecast)
            after += actual > likely
            covered += actual <= late
            total += 1
        calibrator.observe(forecast, actual)
    assert 0.45 <= after / total <= 0.55
    assert 0.87 <= covered / total <= 0.93


def test_each_band_learns_its_own_errors():
    calibrator = StartCalibrator(min_samples=10)
    for _ in range(20):
        calibrator.observe(60.0, 60.0)  # short forecasts: exact
        calibrator.observe(86400.0, 4 * 86400.0 + 3 * FLOOR_S)  # long ones: 4x too early
    assert calibrator.range(0.0, 60.0).likely == pytest.approx(60.0)
    assert calibrator.range(0.0, 86400.0).likely == pytest.approx(4 * 86400.0 + 3 * FLOOR_S)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        StartCalibrator(window=0)
    with pytest.raises(ValueError):
        StartCalibrator(coverage=1.0)


def test_forecast_samples_are_spread_over_the_wait_and_handed_over_once():
    samples = ForecastSamples(every_s=600, per_job=4)
    for minute in range(0, 60, 5):  # a forecast every 5 minutes, of a start at minute 90
        samples.note("a", minute * 60.0, 90 * 60.0)
    samples.note("b", 0.0, 100.0)
    pairs = samples.started("a", 95 * 60.0)
    # one per 10 min up to 4 (0, 10, 20, 30); the fifth (40) thins them to 0, 20, 40, then one per 20 min
    assert [forecast for forecast, _ in pairs] == [5400.0, 4200.0, 3000.0]
    assert [actual for _, actual in pairs] == [5700.0, 4500.0, 3300.0]
    assert samples.started("a", 96 * 60.0) == []  # each once
    assert samples.started("b", 50.0) == [(100.0, 50.0)]
    assert samples.started("never-noted", 1.0) == []


def test_forecast_samples_forget_jobs_that_never_start():
    samples = ForecastSamples(every_s=0, forget_after_s=3600)
    samples.note("gone", 0.0, 10.0)
    samples.note("waiting", 0.0, 10.0)
    samples.note("waiting", 3000.0, 4000.0)
    samples.note("bad", math.nan, 1.0)
    samples.forget(4000.0)
    assert set(samples.jobs) == {"waiting"}


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1e6), st.floats(-1e6, 1e7)), max_size=300),
    st.integers(2, 20),
    st.floats(0, 1e4),
    st.floats(0, 2e6),
)
def test_forecast_samples_stay_bounded_and_never_give_negative_waits(notes, per_job, every, start):
    samples = ForecastSamples(every_s=every, per_job=per_job)
    for now, eta in sorted(notes):
        samples.note(1, now, eta)
        assert len(samples.jobs[1].samples) <= per_job
    for forecast, actual in samples.started(1, start):
        assert forecast >= 0 and actual >= 0


def test_forecast_samples_refuse_bad_settings():
    with pytest.raises(ValueError):
        ForecastSamples(per_job=1)
    with pytest.raises(ValueError):
        ForecastSamples(every_s=-1)


def test_forecast_samples_sweep_at_most_once_per_sampling_interval():
    samples = ForecastSamples(every_s=600, forget_after_s=3600)
    samples.note("gone", 0.0, 10.0)
    samples.forget(3100.0)  # a sweep: nothing stale yet; the next is not before 3,700
    samples.forget(3650.0)  # stale by now, but swept 550 s ago
    assert "gone" in samples.jobs
    samples.forget(3700.0)
    assert "gone" not in samples.jobs
