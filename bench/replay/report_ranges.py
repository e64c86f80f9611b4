"""The report's section on start-time ranges (issue #16): the forecast against the likely
start and its late bound, by run and by band of the forecast wait, with the targets.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from .episodes import chance_inside, judged
from .records import FIXED, NEW_ESTIMATOR, OLD_ESTIMATOR
from .report_format import DEFAULT, ORDER, QUOTA_ORDER, TARGET_RUNTIME_S, pace, whole_seconds

ESTIMATOR_TEXT = {OLD_ESTIMATOR: "old (VC median)", NEW_ESTIMATOR: "new (predictor)"}
RANGES_HEADING = """## Start-time ranges (issue #16)

<!-- generated:ranges -->
<!-- /generated:ranges -->

By band of the forecast wait (the calibrator's bands):

<!-- generated:ranges-bands -->
<!-- /generated:ranges-bands -->

<!-- generated:targets-ranges -->
<!-- /generated:targets-ranges -->
"""


def range_runs(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs with start ranges (made since issue #16), ordered by pace, quota, policy, estimator."""
    runs = [s for s in summaries if s["policy"] != "none" and "interval_coverage_pct" in s.get("eta", {})]

    def key(s: dict[str, Any]) -> tuple:
        policy = s["policy"]
        return (
            s.get("compress", 1),
            QUOTA_ORDER.index(s.get("quota", FIXED)),
            ORDER.index(policy) if policy in ORDER else len(ORDER),
            s.get("estimator") != OLD_ESTIMATOR,
            s["label"],
        )

    return sorted(runs, key=key)


def ranges_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| window | run | duration estimator | avg queueing (s) | ETA median relative error: forecast / likely | "
        "started later than: forecast / likely | late bound covers | late bound / likely wait (median) | "
        "ETA samples (calibrator's observations) | waiting jobs with an ETA (or a note) | "
        "duration estimate within 2x (90% bound covers) | replay wall time (CPU) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in runs:
        a, e, st = s["eta"], s.get("estimate", {}), s.get("stats", {})
        bound = f" ({e['p90_coverage_pct']:.0f}%)" if "p90_coverage_pct" in e else ""
        if a["samples"]:
            scores = (
                f"{a['raw_median_rel_error']:.2f} / {a['median_rel_error']:.2f} | "
                f"{a['raw_late_pct']:.0f}% / {a['late_pct']:.0f}% | {a['interval_coverage_pct']:.1f}% | "
                f"{a['median_late_over_likely']:.1f} x"
            )
        else:  # no job was waiting at a forecast that started later
            scores = "- | - | - | -"
        rows.append(
            f"| {pace(s)} | {s['label']} | {ESTIMATOR_TEXT.get(s.get('estimator', ''), '?')} | "
            f"{whole_seconds(s['avg_queue_s'])} | {scores} | {a['samples']:,} ({st.get('calibration_observed', 0):,}) | "
            f"{_with_eta(a)} | "
            f"{e.get('within_2x_pct', 0):.0f}%{bound} | {s['runtime_s']:.0f} s ({st.get('cpu_s', 0):.0f} s) |"
        )
    return "\n".join(rows)


def _with_eta(eta: dict[str, Any]) -> str:
    if not eta.get("waiting_seen"):
        return "none waiting"
    return f"{eta['with_eta_pct']:.1f}% ({eta.get('with_eta_or_note_pct', eta['with_eta_pct']):.1f}%)"


def bands_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| window | run | forecast wait | samples | forecast: median relative error | started later than forecast | "
        "late bound covers |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for s in runs:
        for band in s["eta"].get("bands", []):
            rows.append(
                f"| {pace(s)} | {s['label']} | {band['band']} | {band['samples']:,} | "
                f"{band['raw_median_rel_error']:.2f} | {band['raw_late_pct']:.0f}% | "
                f"{band['interval_coverage_pct']:.1f}% |"
            )
    return "\n".join(rows)


def _versus(old: dict[str, Any] | None, key: str, unit: str = "", digits: int = 2) -> str:
    """The old estimator's figure, as an aside."""
    return f"; old estimator {old[key]:.{digits}f}{unit}" if old else ""


def _met(ok: bool) -> str:
    return "yes" if ok else "no"


def ranges_targets(runs: list[dict[str, Any]]) -> str:
    """Issue #16's targets, for the default policy with the new estimator (fixed quotas)."""
    rows = ["| target (issue #16) | measured | met |", "|---|---|---|"]
    here = {(s.get("compress", 1), s["policy"], s.get("estimator")): s for s in runs if s.get("quota", FIXED) == FIXED}
    for factor in sorted({key[0] for key in here}):
        where = pace({"compress": factor})
        new, old = here.get((factor, DEFAULT, NEW_ESTIMATOR)), here.get((factor, DEFAULT, OLD_ESTIMATOR))
        oracle = here.get((factor, "sjf-oracle", NEW_ESTIMATOR)) or here.get((factor, "sjf-oracle", OLD_ESTIMATOR))
        if new:
            a = new["eta"]
            o = old["eta"] if old else None
            rows.append(
                f"| {where}: ETA median relative error of the likely start <= 0.25 | {a['median_rel_error']:.2f} "
                f"(the forecast: {a['raw_median_rel_error']:.2f}){_versus(o, 'median_rel_error')} | "
                f"{_met(a['median_rel_error'] <= 0.25)} |"
            )
            rows.append(
                f"| {where}: 40-60% start later than the likely start | {a['late_pct']:.0f}% "
                f"(the forecast: {a['raw_late_pct']:.0f}%){_versus(o, 'late_pct', '%', 0)} | "
                f"{_met(40 <= a['late_pct'] <= 60)} |"
            )
            rows.append(
                f"| {where}: the 90% late bound covers >= 88% of starts | {a['interval_coverage_pct']:.1f}% "
                f"of {a['samples']:,} samples{_versus(o, 'interval_coverage_pct', '%', 1)} | "
                f"{_met(a['interval_coverage_pct'] >= 88)} |"
            )
            noted = a.get("with_eta_or_note_pct", a["with_eta_pct"])
            rows.append(
                f"| {where}: every waiting job has an ETA or a note | {a['with_eta_pct']:.1f}% an ETA, "
                f"{noted:.1f}% an ETA or a note, of {a['waiting_seen']:,} seen | {_met(noted >= 100.0)} |"
            )
        if new and oracle:
            ratio = new["avg_queue_s"] / oracle["avg_queue_s"] if oracle["avg_queue_s"] else float("inf")
            rows.append(
                f"| {where}: {DEFAULT} avg queueing <= 1.5 x sjf-oracle | {whole_seconds(new['avg_queue_s'])} s vs "
                f"{whole_seconds(oracle['avg_queue_s'])} s = {ratio:.2f} x | {_met(ratio <= 1.5)} |"
            )
    if runs:
        slowest = max(runs, key=lambda s: s["runtime_s"])
        shown = [
            f"{s['label']}: {s['runtime_s']:.0f} s wall, {s.get('stats', {}).get('cpu_s', 0):.0f} s CPU"
            for s in runs
            if s["policy"] == DEFAULT and s.get("estimator") == NEW_ESTIMATOR
        ]
        rows.append(
            f"| a full replay in <= 10 min | {'; '.join(shown)}{'; ' if shown else ''}slowest ({slowest['label']}): "
            f"{slowest['runtime_s']:.0f} s wall | {_met(slowest['runtime_s'] <= TARGET_RUNTIME_S)} |"
        )
    return "\n".join(rows)


# Issue 38: calibration per window and per load, from the summaries of every window.
CALIBRATION_HEADING = """### Calibrated in every regime (issue 38)

<!-- generated:calibration -->
<!-- /generated:calibration -->
"""
LATER_GOAL, COVERAGE_GOAL, ERROR_GOAL = (40.0, 60.0), (88.0, 93.0), 1.2


def _default_run(s: dict[str, Any]) -> bool:
    """The default policy with the new estimator, fixed quotas, no lent nodes."""
    return (
        s["policy"] == DEFAULT
        and s.get("estimator") == NEW_ESTIMATOR
        and s.get("quota", FIXED) == FIXED
        and not s.get("lent")
    )


def calibration_runs(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The default runs with start ranges and the forecast knowing run times beside them
    (``--eta-oracle``): by window, then pace."""
    runs = [s for s in summaries if _default_run(s) and "true_durations" in s.get("eta", {})]
    return sorted(runs, key=lambda s: (s.get("compress", 1), s.get("window", ["", ""]), s["label"]))


# Issue 47: per month, each replayed with nothing carried over but what a new leader reads of
# another month's starts (--calibration-bootstrap), beside the calibrator before issue 47 on
# the same forecasts (calibration_log --annotate: the forecasts do not depend on it).
MONTHS_HEADING = """### Calibrated on months never seen (issue 47)

<!-- generated:calibration-months -->
<!-- /generated:calibration-months -->
"""


def month_runs(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    runs = [s for s in calibration_runs(summaries) if s.get("calibration_bootstrap")]
    return sorted(runs, key=lambda s: (s.get("window", [""])[0][:7], s.get("compress", 1), s["label"]))


def months_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| month replayed | trace | run | bootstrap from | samples | later than likely: before / after "
        "(goal 40-60 %) | late bound covers: before / after (goal 88-93 %) | likely's median relative error: "
        "before / after | replay wall (CPU) |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for s in runs:
        a, st, old = s["eta"], s.get("stats", {}), s.get("eta_before") or {}
        later, covered = a["late_pct"], a["interval_coverage_pct"]
        trace = s.get("trace", "?")
        where = "the repo's" if trace == "philly_2017-10-01_11-30_11vc.csv" else f"{trace} (not in the repo)"
        rows.append(
            f"| {window_text(s)} | {where} | {s['label']} | {s['calibration_bootstrap']} | {a['samples']:,} | "
            f"{_old(old, 'late_pct')} / {later:.1f}% {_mark(LATER_GOAL, later)} | "
            f"{_old(old, 'covered_pct')} / {covered:.1f}% {_mark(COVERAGE_GOAL, covered)} | "
            f"{_old(old, 'error', '')} / {a['median_rel_error']:.2f} | {s['runtime_s']:.0f} s ({st.get('cpu_s', 0):.0f} s) |"
        )
    return "\n".join(rows)


# Issue 47: every run's figures split by the month of the forecast, each with the number of
# episodes (namespace-days) behind it and its 95 % interval over them (bench/replay/episodes.py).
PER_MONTH_HEADING = """### Per month, and what chance allows (issue 47)

<!-- generated:calibration-per-month -->
<!-- /generated:calibration-per-month -->
"""


def per_month_runs(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    runs = [s for s in summaries if _default_run(s) and s.get("eta", {}).get("months")]
    return sorted(runs, key=lambda s: (s.get("trace", ""), s.get("window", [""])[0], s.get("compress", 1), s["label"]))


def per_month_table(runs: list[dict[str, Any]]) -> str:
    """A row per run and month; the last column: how often a month of as many episodes drawn
    from the run with the most (``reference``) lands inside both goals (episodes.chance_inside)."""
    reference = max(runs, key=lambda s: s["eta"].get("episodes", {}).get("episodes", 0))
    counts = reference["eta"].get("episodes", {}).get("counts", [])
    rows = [
        "| trace | window replayed | run | month | samples | episodes (namespace-days) | later than likely "
        "[95 % interval] (goal 40-60 %) | late bound covers [95 % interval] (goal 88-93 %) | "
        f"a month of as many episodes from {reference['label']} ({len(counts)} episodes): inside both goals |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for s in runs:
        trace = s.get("trace", "?")
        where = "the repo's" if trace == "philly_2017-10-01_11-30_11vc.csv" else trace
        for month, m in s["eta"]["months"].items():
            late, covered = m["late_pct"], m["covered_pct"]
            chance = chance_inside(counts, m["episodes"], LATER_GOAL, COVERAGE_GOAL)
            rows.append(
                f"| {where} | {window_text(s)} | {s['label']} | {month} | {m['samples']:,} | {m['episodes']} | "
                f"{late:.1f}% {_interval(m['late_pct_95'])} ({judged(LATER_GOAL, late, m['late_pct_95'])}) | "
                f"{covered:.1f}% {_interval(m['covered_pct_95'])} "
                f"({judged(COVERAGE_GOAL, covered, m['covered_pct_95'])}) | {chance:.0f}% |"
            )
    return "\n".join(rows)


def _interval(bounds: list[float]) -> str:
    return f"[{bounds[0]:.1f}-{bounds[1]:.1f}]"


def _old(old: dict[str, Any], key: str, unit: str = "%") -> str:
    value = old.get(key)
    return "-" if value is None else f"{value:.2f}" if not unit else f"{value:.1f}{unit}"


def window_text(summary: dict[str, Any]) -> str:
    """The submissions replayed (a compressed window's as the trace has them) and the pace."""
    start, end = (summary.get("window") or ["?", "?"])[:2]
    factor = summary.get("compress", 1)
    if factor == 1:
        return f"{start[:10]} to {end[:10]}"
    try:
        first, last = datetime.fromisoformat(start), datetime.fromisoformat(end)
    except ValueError:
        return f"{start[:10]}, {pace(summary)}"
    return f"{start[:10]} to {(first + (last - first) * factor).isoformat()[:10]}, {pace(summary)}"


def calibration_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| window | run | samples | start later than the likely time (goal 40-60 %) | "
        "90 % late bound covers (goal 88-93 %) | likely time: median relative error | "
        "the forecast knowing every run time / the queued jobs' only | likely / knowing every run time "
        f"(goal <= {ERROR_GOAL:g} x) | likely / knowing the queued jobs' | replay wall (CPU) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in runs:
        a, st = s["eta"], s.get("stats", {})
        known, queued = a["true_durations"], a.get("queued_true_durations", {})
        later, covered = a["late_pct"], a["interval_coverage_pct"]
        ratio, queued_ratio = known.get("likely_over_known"), queued.get("likely_over_known")
        rows.append(
            f"| {window_text(s)} | {s['label']} | {a['samples']:,} | {later:.1f}% {_mark(LATER_GOAL, later)} | "
            f"{covered:.1f}% {_mark(COVERAGE_GOAL, covered)} | {a['median_rel_error']:.2f} | "
            f"{known['median_rel_error']:.3f} / {queued.get('median_rel_error', float('nan')):.2f} | "
            f"{_ratio(ratio)} {_mark((0.0, ERROR_GOAL), ratio)} | {_ratio(queued_ratio)} | "
            f"{s['runtime_s']:.0f} s ({st.get('cpu_s', 0):.0f} s) |"
        )
    return "\n".join(rows)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f} x"


def _mark(goal: tuple[float, float], value: float | None) -> str:
    return "(met)" if value is not None and goal[0] <= value <= goal[1] else "(not met)"


def write_calibration(summaries: list[dict[str, Any]], out: Path) -> Path | None:
    """Rewrite the block on calibration per window and load (issue 38), at the end of the
    start-time ranges section, from the summaries of every window; None if none qualifies."""
    from .report import REPORT, SKELETON, _replace

    runs = [s for s in calibration_runs(summaries) if not s.get("calibration_bootstrap")]
    months = month_runs(summaries)
    per_month = per_month_runs(summaries)
    if not runs and not months and not per_month:
        return None
    path = out / REPORT
    text = path.read_text() if path.exists() else SKELETON
    if "<!-- generated:calibration -->" not in text:
        anchor = "<!-- /generated:targets-ranges -->"
        text = text.replace(anchor, f"{anchor}\n\n{CALIBRATION_HEADING.rstrip()}", 1) if anchor in text else text
    if runs:  # (issue 38's block: replays started with nothing learned)
        text = _replace(text, "calibration", calibration_table(runs))
    if months:
        if "<!-- generated:calibration-months -->" not in text:
            anchor = "<!-- /generated:calibration -->"
            text = text.replace(anchor, f"{anchor}\n\n{MONTHS_HEADING.rstrip()}", 1) if anchor in text else text
        text = _replace(text, "calibration-months", months_table(months))
    if per_month:
        if "<!-- generated:calibration-per-month -->" not in text:
            anchor = "<!-- /generated:calibration-months -->"
            if anchor not in text:
                anchor = "<!-- /generated:calibration -->"
            text = text.replace(anchor, f"{anchor}\n\n{PER_MONTH_HEADING.rstrip()}", 1) if anchor in text else text
        text = _replace(text, "calibration-per-month", per_month_table(per_month))
    path.write_text(text)
    return path
