"""Start-range calibration off the replay (issue 47): every forecast a replay gave, kept so
that the calibrator alone can be replayed over it, and a new leader's bootstrap taken from
another replay.

The calibrator decides nothing (the forecasts and the starts do not depend on it), so
replaying ``queueing.eta_calibration`` over a replay's log of forecasts and starts gives
the replay's own figures, to the sample, in seconds instead of minutes: that is how its
variants are compared (``python -m bench.replay.calibration_log``).  The final figures
still come from real replays.

A new leader learns from the database the last ``BOOTSTRAP`` jobs that started, each with
the first forecast it was given (``jobdash/dispatch/state/predictions.py``).  A replay of one
month started with ``--calibration-bootstrap`` on another month's log is a leader taking
over with only that: no adaptive level, no forecast sampled along a wait, carried over.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from queueing.eta_calibration import ForecastSamples, StartCalibrator

BOOTSTRAP = 2000  # jobdash/dispatch/state/predictions.py BOOTSTRAP
SAMPLED = 100  # records.ReplayConfig.eta_sample

# One forecasting cycle: (now, job ids, forecast starts, noted: the job had not started before)
Cycle = tuple[float, list[int], list[float], list[bool]]


def write_log(path: Path, cycles: list[Cycle], records: list[Any]) -> None:
    """The forecasts of every forecasting cycle, and each job's namespace and first start."""
    starts = {rec.job.id: rec.started_at for rec in records if rec.started_at is not None}
    data = {
        "cycles": cycles,
        "vc": {rec.job.id: rec.job.vc for rec in records},
        "starts": starts,
        "preempted": [rec.job.id for rec in records if rec.preemptions],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        json.dump(data, handle)


def read_log(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as handle:
        data = json.load(handle)
    data["vc"] = {int(key): value for key, value in data["vc"].items()}
    data["starts"] = {int(key): value for key, value in data["starts"].items()}
    return data


def bootstrap_pairs(log: dict[str, Any], count: int = BOOTSTRAP) -> list[tuple[float, float, str]]:
    """What a new leader reads after ``log``'s replay: the last ``count`` jobs started (never
    preempted), oldest first, each as (first forecast wait, actual wait from it, namespace)."""
    first: dict[int, tuple[float, float]] = {}
    for now, ids, etas, _ in log["cycles"]:
        for job, eta in zip(ids, etas, strict=True):
            if job not in first:
                first[job] = (now, eta)
    preempted = set(log.get("preempted", ()))
    started = sorted(
        (at, job) for job, at in log["starts"].items() if job in first and job not in preempted and at >= first[job][0]
    )
    pairs = []
    for at, job in started[-count:]:
        given, eta = first[job]
        pairs.append((max(eta - given, 0.0), at - given, log["vc"][job]))
    return pairs


def replay_calibrator(
    log: dict[str, Any],
    make: Callable[[], StartCalibrator] = StartCalibrator,
    bootstrap: list[tuple[float, float, str]] = (),  # type: ignore[assignment]
) -> dict[str, float]:
    """The calibrator alone over a replay's forecasts, as ``cycle._sample_etas`` and
    ``watch_cache._started`` drive it: the replay's late share, coverage and likely error."""
    calibrator, forecasts = make(), ForecastSamples()
    for pair in bootstrap:
        calibrator.observe(*pair)
    starts = sorted((at, job) for job, at in log["starts"].items())
    vc, first_start = log["vc"], log["starts"]
    scored: list[tuple[float, float, float, float]] = []  # at, likely, late, actual
    index = 0
    for now, ids, etas, noted in log["cycles"]:
        while index < len(starts) and starts[index][0] <= now:
            calibrator.learn_start(forecasts, starts[index][1], starts[index][0])
            index += 1
        calibrator.update(now, forecasts)
        shown = []
        for job, eta, fresh in zip(ids, etas, noted, strict=True):
            shown.append(calibrator.range(now, eta, vc[job]))
            if fresh:
                forecasts.note(job, now, eta, namespace=vc[job], shown=shown[-1])
        step = max(1, len(ids) // SAMPLED)
        for position in range(0, len(ids), step):
            actual = first_start.get(ids[position])
            if actual is not None and actual >= now:
                scored.append((now, *shown[position], actual))
        forecasts.forget(now)
    return score(scored)


def score(scored: list[tuple[float, float, float, float]]) -> dict[str, float]:
    """metrics.eta_accuracy's figures: started later than likely, covered by the late bound,
    the likely start's median relative error."""
    if not scored:
        return {"samples": 0, "late_pct": math.nan, "covered_pct": math.nan, "error": math.nan}
    late = sum(actual > likely for _, likely, _, actual in scored)
    covered = sum(actual <= bound for _, _, bound, actual in scored)
    errors = sorted(abs(actual - likely) / max(actual - at, 60.0) for at, likely, _, actual in scored)
    return {
        "samples": len(scored),
        "late_pct": round(100.0 * late / len(scored), 1),
        "covered_pct": round(100.0 * covered / len(scored), 1),
        "error": round(errors[min(len(errors) - 1, max(math.ceil(len(errors) * 0.5) - 1, 0))], 3),
    }


def before_issue_47() -> StartCalibrator:
    """The calibrator as it was before issue 47 (no shift, nothing forgotten): the same code
    with both off gives main's figures to the sample."""
    return StartCalibrator(rate=0.0, forget_after_s=math.inf)


def described(log: Path) -> str:
    """A bootstrap log as the report names it: its replay's window and label."""
    return f"{log.parent.parent.name}/{log.name.removesuffix('.forecasts.json.gz')}"


def annotate(summary_path: Path, bootstrap: Path | None) -> dict[str, float]:
    """Add to a replay's summary what the calibrator before issue 47 made of the same forecasts
    (``eta_before``), from the replay's log (jobs/<label>.forecasts.json.gz beside it)."""
    summary = json.loads(summary_path.read_text())
    log = read_log(summary_path.parent / "jobs" / f"{summary['label']}.forecasts.json.gz")
    pairs = bootstrap_pairs(read_log(bootstrap)) if bootstrap else []
    summary["eta_before"] = replay_calibrator(log, before_issue_47, pairs)
    if bootstrap:
        summary["calibration_bootstrap"] = described(bootstrap)
    summary_path.write_text(json.dumps(summary))
    return summary["eta_before"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.replay.calibration_log", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("log", nargs="+", help="forecast logs (--forecasts-out of bench.trace_replay), or summaries")
    parser.add_argument("--bootstrap", help="the log a new leader's bootstrap comes from")
    parser.add_argument(
        "--annotate",
        action="store_true",
        help="the arguments are replay summaries: add the calibrator before issue 47's figures on their logs",
    )
    args = parser.parse_args(argv)
    bootstrap = Path(args.bootstrap) if args.bootstrap else None
    if args.annotate:
        for name in args.log:
            print(name, json.dumps(annotate(Path(name), bootstrap)))
        return
    pairs = bootstrap_pairs(read_log(bootstrap)) if bootstrap else []
    for name in args.log:
        log = read_log(Path(name))
        before = replay_calibrator(log, before_issue_47, pairs)
        print(name, json.dumps({"before": before, "now": replay_calibrator(log, bootstrap=pairs)}))


if __name__ == "__main__":
    main()
