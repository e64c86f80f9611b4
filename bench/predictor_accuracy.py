"""Accuracy of duration predictions at submission on the Philly trace: today's estimator
against queueing.predictor.

    python -m bench.predictor_accuracy [--trace PATH] [--limit N]

Jobs are taken in submission order.  Before a job's prediction, every job
whose finish lies at or before its submission has been learned from; a job's
finish is taken as submit + duration.  That ignores queueing delay (jobs
really finish later than that, so both estimators learn a little earlier here
than in the replay), which is acceptable for an offline comparison of two
estimators fed the same stream, but the figures are not the replay's.

- old: today's rule (eta.duration_of's history branch as the replay's
  DurationHistory keeps it): the median of the namespace's (VC's) last 20
  runs of the same shape (GPU count), among the last 2000 finished jobs;
  none if there are none.  Re-implemented here so the benchmark does not
  depend on bench.replay's internals.
- new: queueing.predictor.DurationPredictor, features VC as namespace, GPU
  count, pods = ceil(gpus / 8), kind TFJob; no submitter, no name (the trace
  has neither), no stated expectation.  Its late bound's errors are
  calibrated on the predictions it made at submission (observe(..., predicted)).

Prints one JSON line: per estimator the share of jobs with an estimate, the
share within 2x of the real duration (of all jobs and of those estimated),
the median relative error |pred - actual| / actual, the median absolute
error, Spearman's rank correlation of prediction and duration, the share of
jobs running longer than predicted; for the new one the p90 coverage
(actual <= p90) overall and over the last half of the stream, and which
history level answered how often.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import math
import statistics
import sys
import time
from collections import Counter, deque
from datetime import datetime
from pathlib import Path
from typing import Any

from queueing.predictor import DurationPredictor, JobFeatures, Prediction

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "philly_2017-10-01_11-30_11vc.csv"
OLD_RUNS = 20  # dispatch.snapshot_phase.HISTORY_SIZE
OLD_WINDOW = 2000  # snapshot_phase.history() reads the last 2000 finished jobs


def read_trace(path: Path, limit: int | None = None) -> list[tuple[float, float, int, str]]:
    """(submit epoch s, duration s, GPUs, VC) per job with a positive duration, in submission order."""
    rows = []
    with path.open() as handle:
        for row in csv.DictReader(handle):
            duration, gpus = float(row["duration"]), int(row["num_gpus"])
            if duration > 0 and gpus > 0:
                submit = datetime.fromisoformat(row["timestamp"]).timestamp()
                rows.append((submit, duration, gpus, row["cluster"]))
    rows.sort(key=lambda row: row[0])  # stable: ties stay in file order
    return rows[:limit] if limit else rows


class OldEstimator:
    """The median of the VC's last OLD_RUNS runs of this GPU count, among the last OLD_WINDOW finished."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, int], deque[tuple[int, float]]] = {}
        self.finished = 0

    def record(self, vc: str, gpus: int, seconds: float) -> None:
        self.finished += 1
        self.runs.setdefault((vc, gpus), deque(maxlen=OLD_RUNS)).append((self.finished, seconds))

    def estimate(self, vc: str, gpus: int) -> float | None:
        cut = self.finished - OLD_WINDOW
        recent = [seconds for number, seconds in self.runs.get((vc, gpus), ()) if number > cut]
        return float(statistics.median(recent)) if recent else None


def features(vc: str, gpus: int) -> JobFeatures:
    return JobFeatures(namespace=vc, kind="TFJob", gpus=gpus, pods=math.ceil(gpus / 8))


def ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties sharing their average rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            result[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation: Pearson's on the (tie-averaged) ranks."""
    if len(xs) < 2:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else None


def accuracy(pairs: list[tuple[float | None, float]]) -> dict[str, Any]:
    """Figures for (prediction or None, actual) pairs."""
    known = [(pred, actual) for pred, actual in pairs if pred is not None]
    within = sum(1 for pred, actual in known if actual / 2 <= pred <= actual * 2)
    rho = spearman([pred for pred, _ in known], [actual for _, actual in known])
    return {
        "jobs": len(pairs),
        "estimated_pct": round(100 * len(known) / len(pairs), 1) if pairs else None,
        "within_2x_pct": round(100 * within / len(pairs), 1) if pairs else None,
        "within_2x_of_estimated_pct": round(100 * within / len(known), 1) if known else None,
        "median_relative_error": round(statistics.median(abs(p - a) / a for p, a in known), 3) if known else None,
        "median_absolute_error_s": round(statistics.median(abs(p - a) for p, a in known), 1) if known else None,
        "spearman": round(rho, 3) if rho is not None else None,
        "ran_longer_than_predicted_pct": round(100 * sum(1 for p, a in known if a > p) / len(known), 1)
        if known
        else None,
    }


def run(rows: list[tuple[float, float, int, str]], predictor: DurationPredictor) -> dict[str, Any]:
    old = OldEstimator()
    finishing: list[tuple[float, int]] = []  # (finish, job index)
    made: list[Prediction] = []
    old_pairs: list[tuple[float | None, float]] = []
    new_pairs: list[tuple[float | None, float]] = []
    covered: list[bool] = []  # per job with a late bound: actual <= p90
    sources: Counter[str] = Counter()
    for index, (submit, duration, gpus, vc) in enumerate(rows):
        while finishing and finishing[0][0] <= submit:
            _, done = heapq.heappop(finishing)
            _, done_duration, done_gpus, done_vc = rows[done]
            old.record(done_vc, done_gpus, done_duration)
            predictor.observe(features(done_vc, done_gpus), done_duration, made[done])
        prediction = predictor.predict(features(vc, gpus))
        made.append(prediction)
        sources[prediction.source] += 1
        old_pairs.append((old.estimate(vc, gpus), duration))
        new_pairs.append((prediction.median_s, duration))
        if prediction.p90_s is not None:
            covered.append(duration <= prediction.p90_s)
        heapq.heappush(finishing, (submit + duration, index))
    half = covered[len(covered) // 2 :]
    new = accuracy(new_pairs)
    new["p90_coverage_pct"] = round(100 * sum(covered) / len(covered), 1) if covered else None
    new["p90_coverage_last_half_pct"] = round(100 * sum(half) / len(half), 1) if half else None
    bounds = [p.p90_s / p.median_s for p in made if p.p90_s is not None and p.median_s]
    new["median_p90_over_median"] = round(statistics.median(bounds), 2) if bounds else None
    new["sources_pct"] = {source: round(100 * count / len(rows), 1) for source, count in sources.most_common()}
    return {"old": accuracy(old_pairs), "new": new}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs")
    args = parser.parse_args()
    if not args.trace.exists():
        sys.exit(f"no trace at {args.trace}")
    started = time.perf_counter()
    rows = read_trace(args.trace, args.limit)
    report = {"benchmark": "predictor_accuracy", "trace": args.trace.name, **run(rows, DurationPredictor())}
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
