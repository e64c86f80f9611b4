"""Kueue's own method for its scheduler-performance test (kubernetes-sigs/kueue,
test/performance/scheduler), applied to bench.kueue_baseline's runs: usage as its checker
computes it, the min / mean / max over repeated runs, thresholds derived as its rangespec
files are, and the check its CI makes against them.

Usage (runner/recorder/recorder.go, checker/checker_test.go). The recorder integrates each
ClusterQueue's status.flavorsUsage (the CPU of the workloads it has admitted, held from
admission until the workload finishes) over the times it sees the ClusterQueue change:
CPUUsed += usage * (now - previous event). Per ClusterQueue class it sums CPUUsed and the
nominal quotas, from the earliest first event to the latest last event; the checker's usage
is CPUUsed * 100 / (NominalQuota * (LastEventTime - FirstEventTime)). A job's share of that
integral is its CPU times the time it held quota, so here: the sum over jobs of
cpu * (released_at -> finished_at) over the namespaces' quota times first submission -> last
finish (the ClusterQueues exist just before the first workload; the last event is the last
release of quota). It counts the quota held, not the work done: a job that holds its quota
for a second after a 200 ms run counts a second.

Time to admission (recorder.go): per workload, its Admitted condition's time minus its
creation; per class, the mean (AverageTimeToAdmissionMs). Here: released_at - submitted_at.

Wall (runner/main.go, stats.CmdStats.WallMs): minimalkueue's process lifetime, which spans
generating the objects and ends when the recorder sees no pending or reserving workload.
Here: first submission to last finish (wall_s).

Thresholds (configs/large-scale/rangespec.yaml, "Calibration procedure", from 5 runs or
more): maxWallMs = mean x 1.20 rounded up to 1000 ms; wlClassesMaxAvgTimeToAdmissionMs =
mean x 1.20 rounded up to 1000 ms; clusterQueueClassesMinUsage = mean - 7 (percentage
points: 38.64 % -> 31.6 %) rounded down to 0.1 %. configs/baseline/rangespec.yaml was set by
hand from the same kind of means (+20 % times, +35-40 % for the noisy large class). The
checker fails when the wall or a class's mean time to admission is above its threshold or
the usage below its own, naming the metric.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml

USAGE_CLASS = "cq"  # Kueue's ClusterQueue class name in both configs
TIME_FACTOR = 1.20
USAGE_MARGIN_PCT = 7.0


def kueue_usage_pct(
    held: Iterable[tuple[float, float, float | None]], nominal_cpu: float, start: float, end: float
) -> float:
    """Usage as Kueue's checker computes it. `held`: (cpu, admitted at, released at or None if
    still held), in seconds; `nominal_cpu`: the quota of all queues together; the window
    start .. end. Holding outside the window is not counted (the recorder was not watching)."""
    if end <= start or nominal_cpu <= 0:
        raise ValueError("the window must be positive and the quota above 0")
    used = 0.0
    for cpu, admitted, released in held:
        until = end if released is None else min(released, end)
        since = max(admitted, start)
        if until > since:
            used += cpu * (until - since)
    return 100 * used / (nominal_cpu * (end - start))


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "mean": statistics.fmean(values), "max": max(values)}


def summarize(runs: Sequence[Mapping]) -> dict:
    """min / mean / max over runs of the wall, both usages and each class's mean time to
    admission (a class none of whose jobs was admitted in some run is left out)."""
    if not runs:
        raise ValueError("no runs")
    classes = sorted({cls for run in runs for cls in run["tta_s"]})
    out: dict = {
        key: _rounded(spread([run[key] for run in runs]), 2 if key == "wall_s" else 1)
        for key in ("wall_s", "usage_pct", "kueue_usage_pct")
    }
    out["tta_s"] = {
        cls: _rounded(spread([run["tta_s"][cls] for run in runs]), 3)
        for cls in classes
        if all(run["tta_s"].get(cls) is not None for run in runs)
    }
    return out


def _rounded(values: dict[str, float], digits: int) -> dict[str, float]:
    return {k: round(v, digits) for k, v in values.items()}


def derive_rangespec(runs: Sequence[Mapping]) -> dict:
    """Thresholds from the runs' means, in the shape of Kueue's rangespec.yaml (plus the means
    under "means", which the checker ignores)."""
    if not runs:
        raise ValueError("no runs")
    wall_ms = statistics.fmean(run["wall_s"] for run in runs) * 1000
    usage = statistics.fmean(run["kueue_usage_pct"] for run in runs)
    tta_ms = {
        cls: statistics.fmean(run["tta_s"][cls] for run in runs) * 1000
        for cls in sorted({cls for run in runs for cls in run["tta_s"]})
        if all(run["tta_s"].get(cls) is not None for run in runs)
    }
    return {
        "cmd": {"maxWallMs": _up_to_second(wall_ms * TIME_FACTOR)},
        "clusterQueueClassesMinUsage": {USAGE_CLASS: math.floor((usage - USAGE_MARGIN_PCT) * 10 + 1e-9) / 10},
        "wlClassesMaxAvgTimeToAdmissionMs": {cls: _up_to_second(ms * TIME_FACTOR) for cls, ms in tta_ms.items()},
        "means": {
            "runs": len(runs),
            "wallMs": round(wall_ms),
            "usagePct": round(usage, 2),
            "avgTimeToAdmissionMs": {cls: round(ms) for cls, ms in tta_ms.items()},
        },
    }


def _up_to_second(ms: float) -> int:
    return math.ceil(ms / 1000 - 1e-9) * 1000


def check(spec: Mapping, run: Mapping) -> list[str]:
    """What `run` misses of `spec`, one line per metric, each naming it (empty: it passes).
    Like Kueue's checker, a class the spec has no threshold for is a failure, not a pass."""
    failures = []
    wall_ms = run["wall_s"] * 1000
    max_wall = spec["cmd"]["maxWallMs"]
    if wall_ms > max_wall:
        failures.append(f"cmd.maxWallMs: wall {wall_ms:.0f} ms is above {max_wall} ms")
    min_usage = spec["clusterQueueClassesMinUsage"][USAGE_CLASS]
    if run["kueue_usage_pct"] < min_usage:
        failures.append(
            f"clusterQueueClassesMinUsage.{USAGE_CLASS}: usage {run['kueue_usage_pct']:.2f} % is below {min_usage} %"
        )
    limits = spec["wlClassesMaxAvgTimeToAdmissionMs"]
    for cls, tta_s in sorted(run["tta_s"].items()):
        if cls not in limits:
            failures.append(f"wlClassesMaxAvgTimeToAdmissionMs.{cls}: no threshold for this class")
        elif tta_s is None:
            failures.append(f"wlClassesMaxAvgTimeToAdmissionMs.{cls}: no job of the class was admitted")
        elif int(tta_s * 1000) > limits[cls]:
            failures.append(
                f"wlClassesMaxAvgTimeToAdmissionMs.{cls}: mean time to admission {int(tta_s * 1000)} ms "
                f"is above {limits[cls]} ms"
            )
    return failures


def write_rangespec(path: Path, spec: Mapping, source: str) -> None:
    header = (
        f"# Thresholds derived as Kueue's rangespec (bench.kueue_method) from {spec['means']['runs']} runs of\n"
        f"# bench.kueue_baseline, {source}: wall and times to admission mean x 1.2 rounded up to\n"
        "# 1000 ms, usage mean - 7 points rounded down to 0.1 %. The means are under `means`.\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + yaml.safe_dump(dict(spec), sort_keys=False))


def load_rangespec(path: Path) -> dict:
    """A rangespec file, Kueue's or one write_rangespec made; a missing section is a clear error."""
    spec = yaml.safe_load(path.read_text())
    for key in ("cmd", "clusterQueueClassesMinUsage", "wlClassesMaxAvgTimeToAdmissionMs"):
        if not isinstance(spec, dict) or not isinstance(spec.get(key), dict):
            raise SystemExit(f"{path}: no {key} section")
    return spec
