"""From a ReplayResult to the numbers the report shows (plain dicts, JSON-ready)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from queueing.eta_calibration import BANDS, band_of

from .episodes import by_month, episode_of, interval
from .records import DONE, FAILED, OLD_ESTIMATOR, RELEASED, RUNNING, ReplayResult

SIZE_CLASSES = ((1, 1, "1"), (2, 2, "2"), (3, 4, "4"), (5, 8, "8"), (9, 16, "12-16"), (17, 10**9, "24-32"))
CDF_POINTS = 201
TAIL_POINTS, TAIL_MAX_S = 61, 864_000.0


def size_class(gpus: int) -> str:
    for low, high, label in SIZE_CLASSES:
        if low <= gpus <= high:
            return label
    return str(gpus)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending list; 0 for an empty one."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def queue_tail(sorted_waits: list[float]) -> list[list[float]]:
    """[threshold s, fraction of started jobs that waited longer], thresholds log-spaced from
    1 s to 10 days: the differences between policies live in the few percent that wait."""
    from bisect import bisect_right

    count = len(sorted_waits)
    points = []
    for step in range(TAIL_POINTS):
        threshold = 10 ** (step * math.log10(TAIL_MAX_S) / (TAIL_POINTS - 1))
        above = count - bisect_right(sorted_waits, threshold)
        points.append([round(threshold, 1), round(above / count, 6) if count else 0.0])
    return points


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def summarize(result: ReplayResult) -> dict[str, Any]:
    jobs = result.jobs
    started = [rec for rec in jobs if rec.started_at is not None]
    finished = [rec for rec in jobs if rec.state == DONE]
    # Queueing: submission to the first start, plus the waits after preemptions.
    waits = sorted(rec.wait_s for rec in started)
    jcts = [rec.finished_at - rec.job.submit for rec in finished]
    end = result.end
    # Gangs that hold resources and cannot ever complete: still incomplete when the replay stopped.
    stuck = [rec for rec in jobs if rec.state == RELEASED and rec.n_alive > 0 and rec.n_bound < rec.gang]
    never = [rec for rec in jobs if rec.started_at is None]

    per_vc: dict[str, dict[str, Any]] = {}
    by_vc: dict[str, list] = defaultdict(list)
    for rec in jobs:
        by_vc[rec.job.vc].append(rec)
    for vc, recs in sorted(by_vc.items()):
        vc_waits = [r.wait_s for r in recs if r.started_at is not None]
        vc_jcts = [r.finished_at - r.job.submit for r in recs if r.state == DONE]
        per_vc[vc] = {
            "jobs": len(recs),
            "avg_queue_s": round(_mean(vc_waits), 1),
            "max_queue_s": round(max(vc_waits, default=0.0), 1),
            "avg_jct_s": round(_mean(vc_jcts), 1),
            "not_started": len(recs) - len(vc_waits),
        }

    per_size: dict[str, dict[str, Any]] = {}
    by_size: dict[str, list] = defaultdict(list)
    for rec in jobs:
        by_size[size_class(rec.job.gpus)].append(rec)
    for _, _, label in SIZE_CLASSES:
        recs = by_size.get(label, [])
        size_waits = sorted(r.wait_s for r in recs if r.started_at is not None)
        # A job that never started has waited until the end of the replay (at least).
        unstarted = [end - r.job.submit for r in recs if r.started_at is None]
        per_size[label] = {
            "jobs": len(recs),
            "avg_queue_s": round(_mean(size_waits), 1),
            "p99_queue_s": round(percentile(size_waits, 99), 1),
            "max_queue_s": round(max(size_waits + unstarted, default=0.0), 1),
            "not_started": len(unstarted),
        }

    window = max(result.window_end - result.start, 1.0)
    size = result.config.util_bucket_s
    full = int(window // size)
    in_window = sum(result.util_buckets[:full]) + (
        result.util_buckets[full] * ((window - full * size) / size) if full < len(result.util_buckets) else 0.0
    )
    util_pct = 100.0 * in_window / (result.total_gpus * window) if result.total_gpus else 0.0

    # GPU-hours run (every run, work later thrown away included) and lost to preemption.
    run_gpu_s = sum(
        rec.gpus * (rec.run_s + (end - rec.run_started_at if rec.state == RUNNING else 0.0)) for rec in jobs
    )
    lost_gpu_s = sum(rec.gpus * rec.lost_s for rec in jobs)
    # ... per cluster (issue 49, multi_cluster.py): the runs ended, and those still going.
    by_cluster = dict(result.stats.get("gpu_s_by_cluster") or {})
    for rec in jobs:
        if by_cluster and rec.state == RUNNING:
            by_cluster[rec.cluster] += rec.gpus * (end - rec.run_started_at)
    # ... by cause (issue 48): a lent pool's reclaim, a move (defragmentation), else a preemption.
    reclaim_lost_gpu_s = sum(rec.gpus * rec.lost_reclaim_s for rec in jobs)
    move_lost_gpu_s = sum(rec.gpus * rec.lost_move_s for rec in jobs)
    cluster_lost_gpu_s = sum(rec.gpus * rec.lost_cluster_s for rec in jobs)
    lost_by_cause = {
        "preemption": lost_gpu_s - reclaim_lost_gpu_s - move_lost_gpu_s - cluster_lost_gpu_s,
        "reclaim": reclaim_lost_gpu_s,
        "move": move_lost_gpu_s,
    }
    if cluster_lost_gpu_s or result.config.lose_cluster:  # (issue 49: lost_cluster.py)
        lost_by_cause["cluster"] = cluster_lost_gpu_s
    cdf = [
        percentile(waits, 100.0 * i / (CDF_POINTS - 1)) if i else (waits[0] if waits else 0.0)
        for i in range(CDF_POINTS)
    ]
    summary = {
        "policy": result.policy,
        "jobs": len(jobs),
        "avg_jct_s": round(_mean(jcts), 1),
        "avg_queue_s": round(_mean(waits), 1),
        "p50_queue_s": round(percentile(waits, 50), 1),
        "p90_queue_s": round(percentile(waits, 90), 1),
        "p95_queue_s": round(percentile(waits, 95), 1),
        "p99_queue_s": round(percentile(waits, 99), 1),
        "max_queue_s": round(max(waits, default=0.0), 1),
        "gpu_util_pct": round(util_pct, 2),
        "deadlocked_gangs": len(stuck),
        "max_wait_1gpu_s": per_size["1"]["max_queue_s"],
        "max_wait_8gpu_s": per_size["8"]["max_queue_s"],  # (the class of 5-8 GPUs: 8 on the trace, mostly)
        "runtime_s": round(result.stats.get("runtime_s", 0.0), 1),
        "quota": result.config.quota,
        "preemptions": result.stats.get("preemptions", 0),
        "moves": result.stats.get("moves", 0),
        "preempted_gpu_hours": round(lost_gpu_s / 3600, 1),
        "gpu_hours": round(run_gpu_s / 3600, 1),
        "clusters": result.config.clusters or 1,
        "dispatch": result.config.dispatch,
        "gpu_hours_by_cluster": {name: round(gpu_s / 3600, 1) for name, gpu_s in by_cluster.items()} or None,
        "preempted_pct": round(100.0 * lost_gpu_s / run_gpu_s, 3) if run_gpu_s else 0.0,
        # (issue 48) the same work thrown away, named for what it is, and by cause
        "lost_gpu_hours": round(lost_gpu_s / 3600, 1),
        "lost_gpu_hours_by_cause": {cause: round(gpu_s / 3600, 1) for cause, gpu_s in lost_by_cause.items()},
        # Beyond the JSON line.
        "lost_gpu_s_by_cause": {cause: round(gpu_s, 1) for cause, gpu_s in lost_by_cause.items()},
        "jobs_preempted": sum(1 for rec in jobs if rec.preemptions),
        "max_preemptions": max((rec.preemptions for rec in jobs), default=0),
        "requeued_wait_s": round(sum(rec.requeued_s for rec in jobs), 1),
        "borrowing_admitted": result.stats.get("borrowing_admitted", 0),
        "finished": len(finished),
        "not_started": len(never),
        "gave_up": sum(1 for rec in jobs if rec.state == FAILED),
        "makespan_s": round((max((r.finished_at for r in finished), default=result.start)) - result.start, 1),
        "replay_end_s": round(end - result.start, 1),
        "partial_node_gpu_h": round(result.partial_node_gpu_s / 3600, 1),
        "partial_quota_gpu_h": round(result.partial_quota_gpu_s / 3600, 1),
        "gangs_ever_partial": sum(1 for rec in jobs if rec.ever_partial),
        "gangs_partial_over_1h": sum(1 for rec in jobs if rec.partial_s > 3600),
        "longest_partial_s": round(max((rec.partial_s for rec in jobs), default=0.0), 1),
        "stuck_gpus": sum(rec.n_alive * rec.per_pod_gpus for rec in stuck),
        "per_vc": per_vc,
        "per_size": per_size,
        "queue_cdf_s": [round(v, 1) for v in cdf],
        "queue_tail": queue_tail(waits),
        "util_hourly_pct": [
            round(100.0 * b / (result.total_gpus * size), 2) if result.total_gpus else 0.0 for b in result.util_buckets
        ],
        "held_hourly_pct": [
            round(100.0 * b / (result.total_gpus * size), 2) if result.total_gpus else 0.0 for b in result.held_buckets
        ],
        "estimator": result.config.estimator,
        "eta": (eta := eta_accuracy(result)),
        "eta_median_rel_error": eta["median_rel_error"],
        "eta_late_pct": eta["late_pct"],
        "interval_coverage_pct": eta["interval_coverage_pct"],
        "estimate": estimate_accuracy(result),
        "stats": {key: (round(value, 3) if isinstance(value, float) else value) for key, value in result.stats.items()},
    }
    lent_gpu_s = result.stats.get("lent_gpu_s", 0.0)
    if result.stats.get("lent_share"):  # (issue 48) the work reclaims threw away, against what ran there
        summary["lent_lost_pct"] = round(100.0 * reclaim_lost_gpu_s / lent_gpu_s, 3) if lent_gpu_s else 0.0
    cycles = result.stats.get("cycles", 0)
    if cycles:
        summary["stats"]["avg_queue_len_at_cycle"] = round(result.stats.get("queue_len_sum", 0) / cycles, 1)
    return summary


def _errors(pairs: list[tuple[float, float, float]]) -> dict[str, Any]:
    """(predicted start, actual start, predicted at) -> error figures: |error|, |error| over
    the real wait from the forecast (at least a minute), and the share that started later."""
    errors = sorted(abs(actual - predicted) for predicted, actual, _ in pairs)
    relative = sorted(abs(actual - predicted) / max(actual - at, 60.0) for predicted, actual, at in pairs)
    late = sum(1 for predicted, actual, _ in pairs if actual > predicted)
    return {
        "median_abs_error_s": round(percentile(errors, 50), 1),
        "p90_abs_error_s": round(percentile(errors, 90), 1),
        "median_rel_error": round(percentile(relative, 50), 3),
        "late_pct": round(100.0 * late / len(pairs), 1) if pairs else 0.0,
    }


def _seconds(value: float) -> str:
    return f"{value / 3600:g} h" if value >= 3600 else f"{value / 60:g} min"


def band_label(index: int) -> str:
    """The calibrator's band ``index`` of forecast wait: "< 10 min", "10 min - 1 h", ..., ">= 6 h"."""
    if index == 0:
        return f"< {_seconds(BANDS[0])}"
    if index == len(BANDS):
        return f">= {_seconds(BANDS[-1])}"
    return f"{_seconds(BANDS[index - 1])} - {_seconds(BANDS[index])}"


def eta_accuracy(result: ReplayResult) -> dict[str, Any]:
    """How close the start times the queue gives (sampled hourly) came to the real starts:
    the planner's forecast as it is (``raw_...``), the likely start the calibrator makes of it
    (``median_rel_error``, ``late_pct``, ...) and its 90% late bound (``interval_coverage_pct``:
    the share that started by it).  Per band of forecast wait (the calibrator's bands) too."""
    # A job preempted and queued again is forecast again: its start after the forecast is its
    # last (re)start (exact for one preemption; fixed quotas preempt nothing).
    starts = {rec.job.id: (rec.started_at, rec.run_started_at) for rec in result.jobs}
    namespaces = {rec.job.id: rec.job.vc for rec in result.jobs}
    raw, likely, covered, widths = [], [], 0, []
    scored: list[tuple[str | None, float, bool, bool]] = []  # (namespace, at, late, covered): episodes
    # The same samples' forecasts knowing every run time / the waiting jobs' only (where given).
    yardsticks: dict[str, tuple[list, list]] = {"true_durations": ([], []), "queued_true_durations": ([], [])}
    bands: list[list[tuple[float, float, float, float]]] = [[] for _ in range(len(BANDS) + 1)]
    samples = result.eta_samples
    oracle = result.eta_oracle if len(result.eta_oracle) == len(samples) else [(None, None)] * len(samples)
    for (job_id, predicted, at, likely_at, late_at), knowing in zip(samples, oracle, strict=True):
        first, last = starts.get(job_id, (None, None))
        actual = first if first is not None and first >= at else last
        if actual is None or actual < at:
            continue
        for (forecasts, likelies), known in zip(yardsticks.values(), knowing, strict=True):
            if known is not None:
                forecasts.append((known, actual, at))
                likelies.append((likely_at, actual, at))
        raw.append((predicted, actual, at))
        likely.append((likely_at, actual, at))
        covered += actual <= late_at
        scored.append((namespaces.get(job_id), at, actual > likely_at, actual <= late_at))
        widths.append((late_at - at) / max(likely_at - at, 60.0))
        bands[band_of(max(predicted - at, 0.0))].append((predicted, actual, at, late_at))
    widths.sort()
    seen = result.eta_pending_seen
    figures: dict[str, Any] = {
        "cycles": result.eta_cycles,
        "waiting_seen": seen,
        "with_eta_pct": round(100.0 * result.eta_with_estimate / seen, 1) if seen else 0.0,
        "with_eta_or_note_pct": round(100.0 * (result.eta_with_estimate + result.eta_with_note) / seen, 1)
        if seen
        else 0.0,
        "samples": len(raw),
        **{f"raw_{key}": value for key, value in _errors(raw).items()},
        **_errors(likely),
        "interval_coverage_pct": round(100.0 * covered / len(raw), 1) if raw else 0.0,
        "median_late_over_likely": round(percentile(widths, 50), 2),
    }
    for key, (forecasts, likelies) in yardsticks.items():
        if forecasts:  # (issue 38) the likely start's error against a forecast knowing run times
            known_error = _errors(forecasts)["median_rel_error"]
            likely_error = _errors(likelies)["median_rel_error"]
            figures[key] = {
                "samples": len(forecasts),
                "median_rel_error": known_error,
                "late_pct": _errors(forecasts)["late_pct"],
                "likely_median_rel_error": likely_error,
                "likely_over_known": round(likely_error / known_error, 2) if known_error else None,
            }
    by_band = []
    for index, samples in enumerate(bands):
        if not samples:
            continue
        pairs = [(p, a, at) for p, a, at, _ in samples]
        row = {"band": band_label(index), "samples": len(samples)}
        row.update({f"raw_{key}": value for key, value in _errors(pairs).items() if key != "p90_abs_error_s"})
        row["interval_coverage_pct"] = round(100.0 * sum(a <= late for _, a, _, late in samples) / len(samples), 1)
        by_band.append(row)
    figures["bands"] = by_band
    figures["episodes"] = interval((episode_of(vc, at), late, hit) for vc, at, late, hit in scored)
    figures["months"] = by_month(scored)
    return figures


def estimate_accuracy(result: ReplayResult) -> dict[str, Any]:
    """The no-oracle duration estimate made at each job's submission (the old estimator's:
    the median of the namespace's recent runs of the same shape; the new one's: the
    predictor's median) against the job's real duration; the new one's 90% bound too."""
    pairs = [(rec.estimate, rec.job.duration) for rec in result.jobs if rec.estimate is not None]
    bounds = [
        rec.job.duration <= rec.prediction.p90_s
        for rec in result.jobs
        if rec.prediction is not None and rec.prediction.p90_s is not None
    ]
    if not pairs:
        return {"coverage_pct": 0.0}
    ratios = sorted(estimate / actual for estimate, actual in pairs)
    errors = sorted(abs(estimate - actual) for estimate, actual in pairs)
    within2 = sum(1 for r in ratios if 0.5 <= r <= 2.0)
    # Does the estimate order jobs the right way round?  Over pairs of consecutive
    # submissions with different estimates (a cheap, unbiased sample of pairs).
    recs = [rec for rec in result.jobs if rec.estimate is not None]
    agree = total = 0
    for a, b in zip(recs, recs[1:], strict=False):
        if a.estimate != b.estimate and a.job.duration != b.job.duration:
            total += 1
            agree += (a.estimate < b.estimate) == (a.job.duration < b.job.duration)
    return {
        "coverage_pct": round(100.0 * len(pairs) / len(result.jobs), 1),
        "median_abs_error_s": round(percentile(errors, 50), 1),
        "median_ratio": round(percentile(ratios, 50), 3),
        "within_2x_pct": round(100.0 * within2 / len(pairs), 1),
        "pair_order_agreement_pct": round(100.0 * agree / total, 1) if total else 0.0,
        "median_rel_error": round(percentile(sorted(abs(e - a) / a for e, a in pairs if a > 0), 50), 3),
        **({"p90_coverage_pct": round(100.0 * sum(bounds) / len(bounds), 1)} if bounds else {}),
    }


JSON_KEYS = (
    "label",
    "policy",
    "quota",
    "compress",
    "jobs",
    "avg_jct_s",
    "avg_queue_s",
    "p99_queue_s",
    "max_queue_s",
    "gpu_util_pct",
    "deadlocked_gangs",
    "max_wait_1gpu_s",
    "max_wait_8gpu_s",
    "preemptions",
    "moves",
    "preempted_gpu_hours",
    "gpu_hours",
    "preempted_pct",
    "lost_gpu_hours",
    "lost_gpu_hours_by_cause",
    "runtime_s",
    "clusters",
    "dispatch",
    "gpu_hours_by_cluster",
    "estimator",
    "eta_median_rel_error",
    "eta_late_pct",
    "interval_coverage_pct",
)


def json_line(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary's headline numbers.  ``label`` and ``compress`` are set by the caller
    (bench/trace_replay.py); a bare summary gets the policy name and 1."""
    defaults = {"label": summary["policy"], "compress": 1, "estimator": OLD_ESTIMATOR}
    defaults.update(dict.fromkeys(("eta_median_rel_error", "eta_late_pct", "interval_coverage_pct")))
    # (a summary from before issue 48's part 6)
    defaults.update(dict.fromkeys(("max_wait_8gpu_s", "lost_gpu_hours", "lost_gpu_hours_by_cause", "moves")))
    defaults.update(clusters=1, dispatch="plan", gpu_hours_by_cluster=None)  # (before issue 49)
    line = {key: summary[key] if key in summary else defaults[key] for key in JSON_KEYS}
    stats = summary.get("stats", {})
    if stats.get("lent_share"):  # (issue 35) the share of jobs admitted to lent nodes a reclaim killed
        jobs = stats["lent_jobs"]
        line["reclaim_killed_pct"] = round(100.0 * stats["reclaim_killed_jobs"] / jobs, 2) if jobs else 0.0
        # (issue 48) GPU-hours run on lent nodes, and the share of them reclaims threw away
        line["lent_gpu_hours"] = round(stats["lent_gpu_s"] / 3600, 1)
        if "lent_lost_pct" in summary:
            line["lent_lost_pct"] = summary["lent_lost_pct"]
    if stats.get("lost_cluster"):  # (issue 49, part 6) a cluster lost for a while: lost_cluster.py
        line["lost_cluster"] = stats["lost_cluster"]
    if stats.get("elastic_share"):  # (issue 35) what elastic growth ran, and the jobs shrinking saved
        line["elastic_grown_gpu_h"] = round(stats["elastic_grown_gpu_s"] / 3600, 1)
        line["elastic_lent_extra_gpu_h"] = round(stats["elastic_lent_extra_gpu_s"] / 3600, 1)
        line["reclaim_shrunk_jobs"] = stats["reclaim_shrunk_jobs"]
    return line
