"""Issue 47: a calibration figure, per month, with the episodes behind it and its 95 % interval."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from bench.replay.episodes import by_month, chance_inside, episode_of, interval, judged
from bench.replay.report_ranges import per_month_table


def _at(day: str, hour: int = 12) -> float:
    return datetime.fromisoformat(f"{day}T{hour:02d}:00:00").replace(tzinfo=UTC).timestamp()


def test_one_episode_leaves_no_room_for_chance_and_many_narrow_it() -> None:
    one = interval([(("vc", 1), i % 2 == 0, i % 10 != 0) for i in range(100)])
    assert one["episodes"] == 1 and one["samples"] == 100
    assert one["late_pct"] == 50.0 and one["late_pct_95"] == [50.0, 50.0]
    assert one["covered_pct_95"] == [90.0, 90.0]
    # 100 episodes, one all late and all missed each in ten: the interval is wide with 10 of
    # them and narrower with 100.
    few = interval([(("vc", e), e % 10 == 0, e % 10 != 0) for e in range(10) for _ in range(5)])
    many = interval([(("vc", e), e % 10 == 0, e % 10 != 0) for e in range(100) for _ in range(5)])
    assert few["covered_pct"] == many["covered_pct"] == 90.0
    width = lambda figures: figures["covered_pct_95"][1] - figures["covered_pct_95"][0]  # noqa: E731
    assert width(few) > 2 * width(many) > 0


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.booleans(), st.booleans()),
        min_size=1,
        max_size=60,
    )
)
def test_the_figure_lies_in_its_interval_and_the_draw_repeats(rows: list[tuple[int, bool, bool]]) -> None:
    samples = [(("vc", episode), late, covered) for episode, late, covered in rows]
    figures = interval(samples, repeats=200)
    assert figures["samples"] == len(rows) and figures["episodes"] == len({r[0] for r in rows})
    for key in ("late_pct", "covered_pct"):
        low, high = figures[f"{key}_95"]
        assert low - 0.1 <= figures[key] <= high + 0.1
    assert interval(samples, repeats=200) == figures


def test_months_split_by_the_forecasts_day_and_episodes_by_namespace_day() -> None:
    rows = [
        ("a", _at("2017-10-31", 23), True, True),
        ("a", _at("2017-10-31", 1), False, True),
        ("b", _at("2017-10-31", 5), False, False),
        ("a", _at("2017-11-01", 0), True, True),
    ]
    months = by_month(rows)
    assert list(months) == ["2017-10", "2017-11"]
    assert months["2017-10"]["samples"] == 3 and months["2017-10"]["episodes"] == 2
    assert months["2017-11"]["episodes"] == 1
    assert episode_of("a", _at("2017-10-31", 23)) != episode_of("a", _at("2017-11-01", 0))


def test_a_goal_missed_is_within_chance_only_if_the_interval_reaches_it() -> None:
    assert judged((88.0, 93.0), 90.0, [80.0, 99.0]) == "met"
    assert judged((88.0, 93.0), 96.3, [93.9, 100.0]) == "not met"
    assert judged((88.0, 93.0), 96.3, [92.0, 100.0]) == "not met (within chance)"
    assert judged((88.0, 93.0), 80.0, None) == "not met"


def test_the_report_has_a_row_per_month_with_its_episodes() -> None:
    months = by_month(
        [("a", _at("2017-10-02"), i % 2 == 0, True) for i in range(10)]
        + [(vc, _at(f"2017-11-{day:02d}"), False, day % 3 != 0) for vc in "ab" for day in range(1, 21)]
    )
    summary = {
        "label": "priority",
        "trace": "philly_2017-10-01_11-30_11vc.csv",
        "window": ["2017-10-01T00:00:00", "2017-12-01T00:00:00"],
        "compress": 1,
        "eta": {"months": months, "episodes": interval([])},
    }
    table = per_month_table([summary])
    october, november = table.splitlines()[2:]
    assert "| 2017-10 | 10 | 1 | 50.0% [50.0-50.0] (met) | 100.0% [100.0-100.0] (not met) | 0% |" in october
    assert "| 2017-11 | 40 | 40 | 0.0% [0.0-0.0] (not met) |" in november
    assert "| 70.0% [" in november and november.endswith("(not met) | 0% |")  # 40 episodes: far from 88 %


def test_a_short_month_of_a_calibrated_method_often_lands_outside_the_goal():
    # 100 episodes of 10 samples: nine in ten cover every sample, one in ten none; half late.
    counts = [[10, 5, 0 if e % 10 == 0 else 10] for e in range(100)]
    assert interval([(e, i < c[1], i < c[2]) for e, c in enumerate(counts) for i in range(c[0])])["counts"] == counts
    short, long = chance_inside(counts, 3, (40, 60), (88, 93)), chance_inside(counts, 300, (40, 60), (88, 93))
    assert short < 30.0 < 50.0 < long  # 3 episodes: 0, 1 or more misses in ten, rarely ~90 %
    assert chance_inside([], 5, (40, 60), (88, 93)) == 0.0
