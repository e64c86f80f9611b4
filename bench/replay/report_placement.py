"""The report's section on pinned placement (issue #31): the runs made since, on the
dispatcher's release path (templates held, each pod sent to its planned node) or, for
comparison, with the cluster's scheduler alone (``+no-pin``), with the issue's goals.

Runs made before #31 (their summaries have no ``release``) stay in the sections above,
which were made with the scheduler placing every pod (but for the node-affinity
``+pin`` experiment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .records import ELASTIC, FIXED
from .report_elastic import QUOTA_TEXT
from .report_format import DEFAULT, QUOTA_ORDER, TARGET_RUNTIME_S, duration, pace, whole_seconds

PLACEMENT_HEADING = """## Placement that holds (issue #31)

<!-- generated:placement -->
<!-- /generated:placement -->

<!-- generated:targets-placement -->
<!-- /generated:targets-placement -->

![pinned placement: utilisation and the queueing tail](trace_replay_placement.png)

Where the time of a replay goes:

<!-- generated:placement-cost -->
<!-- /generated:placement-cost -->
"""
RELEASE_TEXT = {"gated": "pinned (gated, sent to the planned node)", "scheduler": "scheduler alone"}


def placement_runs(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs made since issue #31, by pace, quota mode, release path, label."""
    runs = [s for s in summaries if "release" in s]
    return sorted(
        runs,
        key=lambda s: (
            s.get("compress", 1),
            QUOTA_ORDER.index(s.get("quota", FIXED)),
            s["release"] != "gated",
            s["label"],
        ),
    )


def _code(s: dict[str, Any]) -> str:
    code = s.get("code") or {}
    commit = code.get("commit") or "?"
    return commit + ("+" if code.get("uncommitted") else "")


def placement_table(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| window | run | pods placed by | quota | jobs | avg queueing (s) | p99 | 1-GPU longest wait | "
        "8-GPU avg / longest | 12-32 GPU avg | preemptions (jobs) | GPU-h lost | GPU util | deadlocked gangs | "
        "start timeouts (gave up) | pods off the plan | replay wall time (CPU) | code |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in runs:
        st = s.get("stats", {})
        sizes = s.get("per_size", {})
        eight = sizes.get("8", {})
        big = [sizes[k] for k in ("12-16", "24-32") if sizes.get(k, {}).get("jobs")]
        big_jobs = sum(b["jobs"] for b in big)
        big_avg = sum(b["avg_queue_s"] * b["jobs"] for b in big) / big_jobs if big_jobs else 0.0
        off = st.get("off_plan", 0) if s.get("release") == "gated" else "-"
        rows.append(
            f"| {pace(s)} | {s['label']} | {RELEASE_TEXT.get(s['release'], s['release'])} | "
            f"{QUOTA_TEXT[s.get('quota', FIXED)]} | {s['jobs']:,} | {whole_seconds(s['avg_queue_s'])} | "
            f"{duration(s['p99_queue_s'])} | {duration(s['max_wait_1gpu_s'])} | "
            f"{duration(eight.get('avg_queue_s', 0))} / {duration(eight.get('max_queue_s', 0))} | "
            f"{duration(big_avg)} | {s.get('preemptions', 0):,} ({s.get('jobs_preempted', 0):,}) | "
            f"{s.get('preempted_gpu_hours', 0.0):,.1f} | {s['gpu_util_pct']:.1f}% | {s['deadlocked_gangs']} | "
            f"{st.get('timeouts', 0):,} ({s.get('gave_up', 0)}) | {off} | "
            f"{s['runtime_s']:.0f} s ({st.get('cpu_s', 0):.0f} s) | {_code(s)} |"
        )
    return "\n".join(rows)


def placement_cost(runs: list[dict[str, Any]]) -> str:
    rows = [
        "| run | cycles | max queue | plan() | snapshots | kubesim (controllers, API) | pin (patches, binding) | "
        "pods sent | gangs placed again (evicted) | wall (CPU) | load average at end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in runs:
        st = s.get("stats", {})
        load = ", ".join(f"{x:.1f}" for x in (s.get("machine") or {}).get("load_avg", []))
        rows.append(
            f"| {s['label']} | {st.get('cycles', 0):,} | {st.get('max_pending', 0):,} | {st.get('plan_s', 0):.0f} s | "
            f"{st.get('snapshot_s', 0):.0f} s | {st.get('cluster_s', 0):.0f} s | {st.get('pin_s', 0):.0f} s | "
            f"{st.get('ungated', 0):,} | {st.get('replaced', 0)} ({st.get('evicted', 0)}) | "
            f"{s['runtime_s']:.0f} s ({st.get('cpu_s', 0):.0f} s) | {load} |"
        )
    return "\n".join(rows)


def _met(ok: bool) -> str:
    return "yes" if ok else "no"


def placement_targets(runs: list[dict[str, Any]]) -> str:
    """The goals of issue #31, on the default release path (pinned), arrivals x3."""
    rows = ["| goal (issue #31), arrivals x3, pinned | measured | met |", "|---|---|---|"]
    here = {
        s.get("quota", FIXED): s
        for s in runs
        if s.get("compress", 1) == 3 and s["release"] == "gated" and s["policy"] == DEFAULT
    }
    elastic, fixed = here.get(ELASTIC), here.get(FIXED)
    if elastic is not None:
        st = elastic.get("stats", {})
        eight = elastic.get("per_size", {}).get("8", {}).get("avg_queue_s", 0.0)
        rows += [
            f"| elastic quota: avg queueing <= 5 s (34 s before) | {elastic['avg_queue_s']:.1f} s | "
            f"{_met(elastic['avg_queue_s'] <= 5)} |",
            f"| elastic quota: 8-GPU jobs wait <= 60 s on average (23 min before) | {eight:.1f} s | {_met(eight <= 60)} |",
            f"| elastic quota: 0 start timeouts (60 before) | {st.get('timeouts', 0)} | "
            f"{_met(st.get('timeouts', 0) == 0)} |",
            f"| elastic quota: 0 gangs given up (2 before) | {elastic.get('gave_up', 0)} | "
            f"{_met(elastic.get('gave_up', 0) == 0)} |",
        ]
    if fixed is not None:
        timeouts = fixed.get("stats", {}).get("timeouts", 0)
        rows.append(f"| fixed quotas: 0 start timeouts (17 before) | {timeouts} | {_met(timeouts == 0)} |")
    full = [s for s in (elastic, fixed) if s is not None]
    if full:
        shown = "; ".join(
            f"{s['label']}: {s['runtime_s']:.0f} s wall, {s.get('stats', {}).get('cpu_s', 0):.0f} s CPU" for s in full
        )
        slowest = max(s["runtime_s"] for s in full)
        rows.append(
            f"| a full x3 replay <= 10 min wall (1,469 s before) | {shown} | {_met(slowest <= TARGET_RUNTIME_S)} |"
        )
    return "\n".join(rows)


PLACEMENT_PNG = "trace_replay_placement.png"


def placement_plot(runs: list[dict[str, Any]], out: Path) -> Path | None:
    """The busiest runs since #31 at a glance: GPUs doing work over time (6-hour means; at
    x5 the cluster is nearly full) and the tail of the queueing delay, per run."""
    shown = [s for s in runs if s.get("quota") == ELASTIC or s.get("compress", 1) != 1]
    if not shown:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5))
    for number, s in enumerate(shown):
        style, color = "--" if s["release"] != "gated" else "-", f"C{number}"
        hourly = s["util_hourly_pct"]
        means = [sum(hourly[i : i + 6]) / len(hourly[i : i + 6]) for i in range(0, len(hourly), 6)]
        left.plot(
            [(i * 6 + 3) / 24 for i in range(len(means))],
            means,
            label=s["label"],
            linestyle=style,
            color=color,
            linewidth=1,
        )
        points = [(x, y) for x, y in s.get("queue_tail") or () if y > 0]
        if points:  # (none: every job started within the kubelet's second)
            xs, ys = [x for x, _ in points], [y for _, y in points]
            right.step(xs, ys, where="post", label=s["label"], linestyle=style, color=color)
    left.set_ylim(0, 100)
    left.set_xlabel("days since 2017-10-01 (arrivals compressed K times: the window is 61/K days)")
    left.set_ylabel("GPUs of running gangs (% of 2,816), 6-hour means")
    left.set_title("utilisation, pinned placement (dashed: the scheduler alone)")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("queueing delay x (s, log scale)")
    right.set_ylabel("fraction of started jobs waiting longer than x (log scale)")
    right.set_title("the tail of the queueing delay (a run not shown: no job waited over 1 s)")
    for seconds in (60, 3600, 86400):
        right.axvline(seconds, color="grey", linewidth=0.5)
    right.grid(alpha=0.3, which="both")
    right.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    path = out / PLACEMENT_PNG
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
