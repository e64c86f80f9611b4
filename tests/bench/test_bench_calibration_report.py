"""Issue 38: the replay feeds the start calibrator as the dispatcher does, forecasts knowing
the run times beside its own (--eta-oracle), and reports calibration per window and load."""

import pytest

from bench.replay.engine import Replay, ReplayConfig
from bench.replay.metrics import summarize
from bench.replay.report_ranges import calibration_runs, calibration_table, write_calibration
from tests.bench.test_bench_trace_replay import T0, TWO_VCS, busy


@pytest.fixture(scope="module")
def known():
    jobs = sorted(busy(), key=lambda j: (j.submit, j.id))
    config = ReplayConfig(policy="priority", eta_every_s=600.0, eta_oracle=True)
    engine = Replay(jobs, TWO_VCS, config, T0)
    return engine, engine.run()


def test_the_forecast_knowing_run_times_sits_beside_each_sample(known):
    engine, result = known
    assert len(result.eta_oracle) == len(result.eta_samples) > 50
    eta = summarize(result)["eta"]
    everything, queued = eta["true_durations"], eta["queued_true_durations"]
    assert 0 < everything["samples"] <= eta["samples"] and 0 < queued["samples"] <= eta["samples"]
    # Knowing every run time, the forecast of a replay with no new arrivals ahead is all but exact.
    assert everything["median_rel_error"] < eta["raw_median_rel_error"]
    assert everything["likely_over_known"] == pytest.approx(
        everything["likely_median_rel_error"] / everything["median_rel_error"], abs=0.01
    )
    # The ranges shown were resolved and the waits fed to the calibrator (the dispatcher's feed).
    assert engine.calibrator.pooled.late.typical > 0 and engine.calibrator.namespaces.keys() == {"a", "b"}


def test_calibration_is_reported_per_window_with_its_goals(known, tmp_path):
    _, result = known
    summary = summarize(result) | {"label": "priority", "compress": 1, "window": ["2017-10-01T00", "2017-10-02T00"]}
    without = summary | {"eta": {key: value for key, value in summary["eta"].items() if key != "true_durations"}}
    assert calibration_runs([summary, without, summary | {"policy": "fifo"}]) == [summary]
    table = calibration_table([summary])
    assert "2017-10-01 to 2017-10-02" in table and table.count("(met)") + table.count("(not met)") == 3
    report = tmp_path / "trace_replay.md"
    report.write_text("# r\n\n<!-- generated:targets-ranges -->\nx\n<!-- /generated:targets-ranges -->\n\n## next\n")
    assert write_calibration([summary], tmp_path) == report
    text = report.read_text()
    assert text.index("/generated:targets-ranges") < text.index("generated:calibration") < text.index("## next")
    # (issue 47) its per-month figures follow the block; a run without the forecast knowing
    # run times has them too, and writes them alone; one with no months writes nothing.
    assert text.index("/generated:calibration -->") < text.index("generated:calibration-per-month")
    before = text.split("<!-- generated:calibration -->")[1].split("<!-- /generated:calibration -->")[0]
    assert write_calibration([without], tmp_path) == report
    after = report.read_text()
    assert after.split("<!-- generated:calibration -->")[1].split("<!-- /generated:calibration -->")[0] == before
    assert "| 2017-10 |" in after.split("generated:calibration-per-month")[1]
    bare = without | {"eta": {key: value for key, value in without["eta"].items() if key != "months"}}
    assert write_calibration([bare], tmp_path) is None


@pytest.fixture(scope="module")
def logged():
    jobs = sorted(busy(), key=lambda j: (j.submit, j.id))
    engine = Replay(jobs, TWO_VCS, ReplayConfig(policy="priority", eta_every_s=600.0), T0)
    engine.forecast_log = []
    return engine, engine.run()


def test_the_calibrator_alone_over_a_replays_log_gives_the_replays_figures(logged, tmp_path):
    """Issue 47: the forecasts do not depend on the calibrator, so replaying it alone over the
    log gives the replay's own figures, to the sample (how its variants are compared)."""
    from bench.replay.calibration_log import bootstrap_pairs, read_log, replay_calibrator, write_log

    engine, result = logged
    path = tmp_path / "log.json.gz"
    write_log(path, engine.forecast_log, result.jobs)
    log = read_log(path)
    eta = summarize(result)["eta"]
    alone = replay_calibrator(log)
    assert alone["samples"] == eta["samples"] > 50
    assert (alone["late_pct"], alone["covered_pct"], alone["error"]) == (
        eta["late_pct"],
        eta["interval_coverage_pct"],
        eta["median_rel_error"],
    )
    # What a new leader reads: the last jobs started, each with its first forecast, oldest first.
    pairs = bootstrap_pairs(log, count=10)
    assert len(pairs) == 10 and all(forecast >= 0 and waited >= 0 for forecast, waited, _ in pairs)
    assert {namespace for _, _, namespace in bootstrap_pairs(log)} <= {"a", "b"}
    booted = replay_calibrator(log, bootstrap=bootstrap_pairs(log))
    assert booted["samples"] == alone["samples"]


def test_months_from_another_months_bootstrap_have_their_own_block(known, tmp_path):
    from bench.replay.report_ranges import month_runs, months_table

    _, result = known
    plain = summarize(result) | {"label": "priority", "compress": 1, "window": ["2017-12-01T00", "2017-12-23T00"]}
    booted = plain | {
        "label": "priority+boot",
        "calibration_bootstrap": "2017-10-01_2017-11-01/priority",
        "trace": "philly_2017-09-04_12-22_11vc.csv",
        "eta_before": {"late_pct": 11.5, "covered_pct": 97.6, "error": 1.33},
    }
    assert month_runs([plain, booted]) == [booted]
    table = months_table([booted])
    assert "philly_2017-09-04_12-22_11vc.csv (not in the repo)" in table and "11.5% / " in table
    report = tmp_path / "trace_replay.md"
    old = "<!-- generated:calibration -->\nold rows\n<!-- /generated:calibration -->"
    report.write_text(f"# r\n\n<!-- generated:targets-ranges -->\nx\n<!-- /generated:targets-ranges -->\n\n{old}\n")
    write_calibration([booted], tmp_path)
    text = report.read_text()
    assert old in text  # (issue 38's rows, from runs not kept here, stay)
    assert text.index("/generated:calibration -->") < text.index("generated:calibration-months") < text.index("2017-12")
