"""The report's section on elastic quota (issue #15): strict FIFO and the default policy
under each quota mode, at each pace, with their targets.
"""

from __future__ import annotations

from typing import Any

from .records import BORROW, ELASTIC, FIXED, NEW_ESTIMATOR, OLD_ESTIMATOR, run_label
from .report_format import DEFAULT, QUOTA_ORDER, TARGET_RUNTIME_S, duration, pace, whole_seconds

QUOTA_TEXT = {FIXED: "fixed quotas", BORROW: "borrowing, no reclaim", ELASTIC: "borrowing + reclaim"}
ELASTIC_HEADING = """## Elastic quota (issue #15)

<!-- generated:elastic -->
<!-- /generated:elastic -->

Average queueing (s) by VC:

<!-- generated:elastic-vcs -->
<!-- /generated:elastic-vcs -->
"""


def default_path(s: dict[str, Any]) -> bool:
    """Whether the run released jobs the dispatcher's way of its time: since issue #31 pinned
    (``release`` gated); before it, left to the scheduler (``pin`` was the node-affinity
    experiment)."""
    return s["release"] == "gated" if "release" in s else not s.get("pin")


def plain_label(s: dict[str, Any]) -> str:
    """The label of the run without variants (policy options, grace or limit not the
    default). Before issue #31 unpinned runs went unnamed and the node-affinity experiment
    was ``+pin``; since, pinning is the default and ``+no-pin`` the other."""
    policy = s["policy"]
    before = "release" not in s
    label = run_label(
        policy,
        True if before else bool(s.get("pin", True)),
        quota=s.get("quota", FIXED),
        factor=s.get("compress", 1),
        estimator=s.get("estimator", NEW_ESTIMATOR),  # (runs before issue #16 were unnamed)
    )
    return label.replace(policy, f"{policy}+pin", 1) if before and s.get("pin") else label


def elastic_runs(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the section compares: strict FIFO and the default policy, under each quota
    mode, at each pace; ordered by pace, then policy, then quota mode."""
    runs = [
        s
        for s in summaries
        if s["policy"] in ("fifo", DEFAULT)
        # no other variants (policy options, grace or limit not the default); --pin is shown too
        and s["label"] == plain_label(s)
    ]

    def key(s: dict[str, Any]) -> tuple:
        quota = s.get("quota", FIXED)
        return (
            s.get("compress", 1),
            s["policy"] != "fifo",
            not default_path(s),
            QUOTA_ORDER.index(quota),
            s.get("estimator") != OLD_ESTIMATOR,
            s["label"],
        )

    return sorted(runs, key=key)


def elastic_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| window | run | quota | jobs | avg queueing (s) | p99 | 1-GPU longest wait | 8-GPU avg / longest | "
        "preemptions (jobs, called off) | GPU-h lost to preemption | % of GPU-h run | GPU util | deadlocked gangs | "
        "start timeouts (gave up) | replay wall time (CPU) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes: list[str] = []
    for s in runs:
        st = s.get("stats", {})
        preemptions = s.get("preemptions", 0)
        detail = (
            f" ({s.get('jobs_preempted', 0):,}, {st.get('preemptions_called_off', 0):,})"
            if preemptions or st.get("preemptions_called_off")
            else ""
        )
        label = s["label"]
        if s.get("note"):
            notes.append(s["note"])
            label += f" [{len(notes)}]"
        eight = s.get("per_size", {}).get("8", {})
        rows.append(
            f"| {pace(s)} | {label} | {QUOTA_TEXT[s.get('quota', FIXED)]} | {s['jobs']:,} | "
            f"{whole_seconds(s['avg_queue_s'])} | {duration(s['p99_queue_s'])} | {duration(s['max_wait_1gpu_s'])} | "
            f"{duration(eight.get('avg_queue_s', 0))} / {duration(eight.get('max_queue_s', 0))} | "
            f"{preemptions:,}{detail} | {s.get('preempted_gpu_hours', 0.0):,.1f} | {s.get('preempted_pct', 0.0):.2f}% | "
            f"{s['gpu_util_pct']:.1f}% | {s['deadlocked_gangs']} | {st.get('timeouts', 0):,} ({s.get('gave_up', 0)}) | "
            f"{s['runtime_s']:.0f} s ({st.get('cpu_s', 0):.0f} s) |"
        )
    rows += ["", *(f"[{number}] {note}" for number, note in enumerate(notes, start=1))] if notes else []
    return "\n".join(rows)


def elastic_targets(runs: list[dict[str, Any]]) -> str:
    rows = ["| target (issue #15) | measured | met |", "|---|---|---|"]
    for factor in sorted({s.get("compress", 1) for s in runs}):
        here = {
            (s["policy"], s.get("quota", FIXED)): s for s in runs if s.get("compress", 1) == factor and default_path(s)
        }
        elastic, fifo = here.get((DEFAULT, ELASTIC)), here.get(("fifo", FIXED))
        where = pace({"compress": factor})
        if elastic and fifo:
            ratio = elastic["avg_queue_s"] / fifo["avg_queue_s"] if fifo["avg_queue_s"] else float("inf")
            rows.append(
                f"| {where}: {DEFAULT} with elastic quota, avg queueing <= 0.3 x strict FIFO with fixed quotas | "
                f"{whole_seconds(elastic['avg_queue_s'])} s vs {whole_seconds(fifo['avg_queue_s'])} s = {ratio:.2f} x | "
                f"{'yes' if ratio <= 0.3 else 'no'} |"
            )
        if elastic:
            pct = elastic.get("preempted_pct", 0.0)
            rows.append(
                f"| {where}: GPU-hours lost to preemption <= 2% of those run | "
                f"{elastic.get('preempted_gpu_hours', 0.0):,.1f} of {elastic.get('gpu_hours', 0.0):,.0f} GPU-h "
                f"= {pct:.2f}% | {'yes' if pct <= 2.0 else 'no'} |"
            )
    if runs:
        worst = max(s["deadlocked_gangs"] for s in runs)
        gave_up = [f"{s['gave_up']} in {s['label']}" for s in runs if s.get("gave_up")]
        aside = f" (jobs given up after repeated start timeouts: {', '.join(gave_up)})" if gave_up else ""
        rows.append(
            f"| zero deadlocked gangs | max {worst} over {len(runs)} runs{aside} | {'yes' if worst == 0 else 'no'} |"
        )
        slowest = max(runs, key=lambda s: s["runtime_s"])
        # Wall time on a machine shared with other work; CPU time says what the replay itself costs.
        shown = [
            f"{s['label']}: {s['runtime_s']:.0f} s wall, {s.get('stats', {}).get('cpu_s', 0):.0f} s CPU"
            for s in runs
            if s["policy"] == DEFAULT and s.get("quota") == ELASTIC and default_path(s)
        ]
        rows.append(
            f"| a full replay in <= 10 min | {'; '.join(shown)}{'; ' if shown else ''}slowest ({slowest['label']}): "
            f"{slowest['runtime_s']:.0f} s wall | {'yes' if slowest['runtime_s'] <= TARGET_RUNTIME_S else 'no'} |"
        )
    return "\n".join(rows)
