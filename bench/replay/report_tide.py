"""The report's section on nodes lent for the night (issue 35): per window and pace, the
tide-aware replay, the tide-blind one and the same cluster without the night nodes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .records import FIXED, run_label
from .report_format import duration, pace, whole_seconds

TIDE_HEADING = """## Nodes lent for the night (issue 35)

<!-- generated:tide -->
<!-- /generated:tide -->
"""
GOAL_KILLED_PCT = 1.0
GOAL_LOST_PCT = 1.0  # (issue 48) GPU-h reclaims throw away, of the GPU-h run on lent nodes


def lent_share(s: dict[str, Any]) -> float:
    return float(s.get("stats", {}).get("lent_share", 0.0))


def tide_runs(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs with lent nodes, and for each of their windows and paces the run of the same
    policy without them (fixed quotas, no other variant); by window, pace, policy, share."""
    lent = [s for s in summaries if lent_share(s)]
    keys = {(tuple(s["window"]), s.get("compress", 1), s["policy"]) for s in lent}
    plain = [
        s
        for s in summaries
        if not lent_share(s)
        and (tuple(s.get("window", ())), s.get("compress", 1), s["policy"]) in keys
        and s.get("quota", FIXED) == FIXED
        and s["label"] == run_label(s["policy"], factor=s.get("compress", 1))
    ]

    def key(s: dict[str, Any]) -> tuple:
        blind = bool(s["stats"].get("tide_blind"))
        elastic = float(s["stats"].get("elastic_share", 0.0))
        return (s["window"], s.get("compress", 1), s["policy"], lent_share(s) == 0, lent_share(s), blind, elastic)

    return sorted(lent + plain, key=key)


def submissions(s: dict[str, Any]) -> str:
    """The trace's days whose submissions the run replays (its window is that, compressed)."""
    start, end = (datetime.fromisoformat(text) for text in s["window"])
    days = (end - start) * s.get("compress", 1)
    last = start + days - timedelta(seconds=1)
    return f"{start:%Y-%m-%d} .. {last:%m-%d}, {pace(s)}"


def _hours(gpu_s: float) -> str:
    return f"{gpu_s / 3600:,.0f}"


def reclaim_lost(s: dict[str, Any]) -> tuple[float, float] | None:
    """(GPU-s reclaims threw away, that share of the GPU-s run on lent nodes in %); None for a
    summary from before issue 48 counted lost work by cause."""
    by_cause = s.get("lost_gpu_s_by_cause")
    if by_cause is None:
        return None
    lent = s["stats"].get("lent_gpu_s", 0.0)
    lost = by_cause.get("reclaim", 0.0)
    return lost, 100.0 * lost / lent if lent else 0.0


def _lost_cell(s: dict[str, Any]) -> str:
    lost = reclaim_lost(s)
    return "-" if lost is None else f"{lost[0] / 3600:,.1f} ({lost[1]:.2f}%)"


def tide_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| submissions | run | night nodes | nights | GPU-h on lent nodes | jobs admitted to lent nodes (runs) | "
        "killed by a reclaim: jobs (share) | placed there past the reclaim by their bound | "
        "GPU-h of killed runs | GPU-h lost by reclaims (of GPU-h there) | avg queueing (s) | p95 | jobs | "
        "replay wall / CPU time |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in runs:
        st = s["stats"]
        window = submissions(s)
        timing = f"{duration(s['runtime_s'])} / {duration(st.get('cpu_s', 0.0))}"
        if not lent_share(s):
            rows.append(
                f"| {window} | {s['label']} (no night nodes) | 0 | | | | | | | | {whole_seconds(s['avg_queue_s'])} | "
                f"{duration(s['p95_queue_s'])} | {s['jobs']:,} | {timing} |"
            )
            continue
        jobs, killed = st["lent_jobs"], st["reclaim_killed_jobs"]
        share = f"{100.0 * killed / jobs:.1f}%" if jobs else "-"
        rows.append(
            f"| {window} | {s['label']} ({'tide-blind' if st.get('tide_blind') else 'tide-aware'}) | "
            f"{st['lent_node_count']} | {st['nights']} | {_hours(st['lent_gpu_s'])} | {jobs:,} ({st['lent_runs']:,}) | "
            f"{killed:,} ({share}) | {st['lent_admitted_outlasting']:,} | {_hours(st['reclaim_killed_gpu_s'])} | "
            f"{_lost_cell(s)} | {whole_seconds(s['avg_queue_s'])} | {duration(s['p95_queue_s'])} | {s['jobs']:,} | {timing} |"
        )
    aware = [s for s in runs if lent_share(s) and not s["stats"].get("tide_blind")]
    goal = []
    for s in aware:
        st = s["stats"]
        pct = 100.0 * st["reclaim_killed_jobs"] / st["lent_jobs"] if st["lent_jobs"] else 0.0
        met = "yes" if pct <= GOAL_KILLED_PCT else "no"
        goal.append(f"- {submissions(s)}, {s['label']}: {pct:.1f}% killed - {met}")
    if goal:
        rows += [
            "",
            f"Goal: at most {GOAL_KILLED_PCT:g}% of the jobs admitted to lent nodes killed by a reclaim:",
            *goal,
        ]
    lost_goal = []
    for s in runs:
        lost = reclaim_lost(s) if lent_share(s) else None
        if lost is not None:
            met = "yes" if lost[1] <= GOAL_LOST_PCT else "no"
            lost_goal.append(f"- {submissions(s)}, {s['label']}: {lost[1]:.2f}% lost - {met}")
    if lost_goal:
        rows += ["", f"Goal (issue 48): reclaims throw away at most {GOAL_LOST_PCT:g}% of the GPU-h run on lent nodes:"]
        rows += lost_goal
    elastic = [s for s in runs if s["stats"].get("elastic_share")]
    if elastic:
        rows += ["", elastic_table(elastic)]
    return "\n".join(rows)


def elastic_table(runs: list[dict[str, Any]]) -> str:
    """The runs with elastic jobs: what growth ran, and the jobs shrinking kept running."""
    rows = [
        "Elastic jobs (`--elastic`): GPU-h run by Workers above the count admitted (of them on lent "
        "nodes), work lost when Workers joined (back to the last checkpoint), jobs shrunk instead of "
        "preempted at a reclaim (the lent replays have fixed quotas and one priority: nothing is preempted otherwise):",
        "",
        "| submissions | run | elastic jobs | admitted partly | grown: jobs (resizes) | GPU-h by growth | "
        "... on lent nodes | GPU-h lost at growth restarts | shrunk at a reclaim: jobs (times) | "
        "killed by a reclaim (share) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in runs:
        st = s["stats"]
        jobs, killed = st.get("lent_jobs", 0), st.get("reclaim_killed_jobs", 0)
        share = f"{killed:,} ({100.0 * killed / jobs:.1f}%)" if jobs else "-"
        rows.append(
            f"| {submissions(s)} | {s['label']} | {st['elastic_jobs']:,} | {st['elastic_partial_admissions']:,} | "
            f"{st['elastic_grown_jobs']:,} ({st['elastic_grows']:,}) | {_hours(st['elastic_grown_gpu_s'])} | "
            f"{_hours(st['elastic_lent_extra_gpu_s'])} | {_hours(st['elastic_restart_lost_gpu_s'])} | "
            f"{st['reclaim_shrunk_jobs']:,} ({st['reclaim_shrinks']:,}) | {share} |"
        )
    return "\n".join(rows)
