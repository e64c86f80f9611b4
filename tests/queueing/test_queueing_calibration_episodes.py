"""Issue 47: start ranges on a month unlike the record: the shift per range resolved
(LogShift) and the record forgetting what is older than a day (another month's first)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queueing.adaptive_level import MAX_SHIFT, LogShift
from queueing.eta_calibration import FLOOR_S, ForecastSamples, StartCalibrator
from queueing.sorted_window import SortedWindow
from tests.examples import examples
from tests.queueing.test_queueing_censored_calibration import _simulate


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.floats(-3, 3), min_size=1, max_size=400),
    st.floats(0.05, 0.95),
    st.floats(0.001, 0.5),
)
def test_the_shift_holds_the_miss_share_within_its_bound(draws, target, rate):
    """Ranges that answer to the shift (missed when a draw lies above it), one per step: whatever
    the draws (within B = 3 of zero), the share missed over T ranges is within (2 B + rate) / (rate T)."""
    shift = LogShift(target, rate=rate)
    missed = 0
    for draw in draws:
        err = int(draw > shift.shift)
        missed += err
        shift.step(err, 1)
        assert -3 - rate <= shift.shift <= 3 + rate
    assert abs(missed / len(draws) - target) <= (6 + rate) / (rate * len(draws)) + 1e-9


def test_the_shift_is_bounded_and_ignores_bad_input():
    shift = LogShift(0.1, rate=1.0)
    for _ in range(100):
        shift.step(10, 10)  # every range missed, a range past anything
    assert shift.shift == MAX_SHIFT
    for bad in ((math.nan, 1), (2, 1), (-1, 1), (1, math.inf)):
        shift.step(*bad)
    assert shift.shift == MAX_SHIFT
    shift.step(0, 10)
    assert shift.shift == pytest.approx(MAX_SHIFT - 1.0)  # ten hits at target 0.1: one rate back
    with pytest.raises(ValueError):
        LogShift(0.5, rate=-1)


def test_the_window_drops_its_oldest_value():
    window = SortedWindow(3)
    for value in (5.0, 1.0, 3.0):
        window.add(value)
    window.drop_oldest()
    assert list(window.order) == [1.0, 3.0] and window.ordered == [1.0, 3.0]
    window.drop_oldest()
    window.drop_oldest()
    window.drop_oldest()  # (empty: nothing)
    assert len(window) == 0 and window.ordered == []


def test_another_months_record_is_forgotten_once_this_one_has_enough_of_its_own():
    calibrator = StartCalibrator(min_samples=50, update_every_s=0)
    samples = ForecastSamples()
    for _ in range(300):  # what a new leader reads: forecasts three times too early, time unknown
        calibrator.observe(1000.0, 3 * (1000.0 + FLOOR_S) - FLOOR_S, "ns")
    calibrator.update(0.0, samples)
    assert calibrator.range(0.0, 1000.0, "ns").likely == pytest.approx(3 * (1000.0 + FLOOR_S) - FLOOR_S)
    for index in range(60):  # this month: forecasts right, learned now
        calibrator.observe(1000.0, 1000.0, "ns", at=10.0 * index)
    calibrator.update(600.0, samples)
    group = calibrator.namespaces["ns"]
    assert len(group.residuals) == 60 and all(math.isfinite(at) for at in group.times)
    assert calibrator.range(600.0, 1600.0, "ns").likely == pytest.approx(1600.0)
    # Two days on, nothing newer: the oldest go, down to min_samples, never to nothing.
    calibrator.update(2 * 86400.0, samples)
    assert len(group.residuals) == 50 and group.times[0] == 100.0
    for index in range(10):
        calibrator.observe(1000.0, 1000.0, "ns", at=2 * 86400.0 + index)
    calibrator.update(3 * 86400.0, samples)
    assert len(group.residuals) == 50 and group.times[0] == 200.0 and group.times[-1] == 2 * 86400.0 + 9
    with pytest.raises(ValueError):
        StartCalibrator(forget_after_s=0.0)


@pytest.mark.parametrize("factor", [0.4, 2.5])
def test_ranges_follow_a_month_that_errs_the_other_way_from_the_record(factor):
    """The record (another month's, as a new leader reads it) says forecasts are 1/factor off
    the other way; this month's err by ``factor``: within days both ranges are near their
    targets again, where the levels alone (no shift, nothing forgotten) stay off."""
    record = 1 / factor

    def calibrated(calibrator: StartCalibrator) -> tuple[float, float]:
        for index in range(500):
            forecast = 1800.0 * (1 + index % 16)
            calibrator.observe(forecast, (forecast + FLOOR_S) * record - FLOOR_S, "a" if index % 2 else "b")
        return _simulate(calibrator, 120, lambda hour: factor)

    later, covered = calibrated(StartCalibrator(min_samples=30, update_every_s=3600))
    assert 0.35 <= later <= 0.65 and 0.85 <= covered <= 0.95
    old_later, old_covered = calibrated(
        StartCalibrator(min_samples=30, update_every_s=3600, rate=0.0, forget_after_s=math.inf)
    )
    assert abs(old_later - 0.5) > abs(later - 0.5) and abs(old_covered - 0.9) > abs(covered - 0.9)
