"""bench/results/trace_replay.md (its generated sections) and the PNG plots, from replay summaries.

The report is part generated, part written: everything between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` is rewritten from the
summaries; the prose around it is kept as it is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .metrics import SIZE_CLASSES

REPORT = "trace_replay.md"
CDF_PNG = "trace_replay_queue_cdf.png"
UTIL_PNG = "trace_replay_utilisation.png"
ORDER = ("none", "seed", "fifo", "fifo-besteffort", "priority", "fair", "shortest", "sjf-oracle")
DEFAULT = "priority"
HELIOS = (
    ("FIFO", 86_072, 56_531),
    ("SJF (knows durations)", 34_272, 4_731),
    ("SRTF (knows durations, preempts)", 30_683, 1_138),
    ("QSSF (predicted durations)", 37_324, 7_783),
)
TARGET_RUNTIME_S = 600.0


def _rank(summary: dict[str, Any]) -> tuple:
    label = summary["label"]
    base = summary["policy"]
    return (ORDER.index(base) if base in ORDER else len(ORDER), label != base, label)


def _s(value: float) -> str:
    return f"{value:,.0f}"


def _h(seconds: float) -> str:
    """Seconds as a short duration: 45 s, 12 min, 3.4 h, 5.1 d."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def results_table(summaries: list[dict[str, Any]]) -> str:
    rows = [
        "| policy | jobs | finished | avg JCT (s) | avg queueing (s) | p50 | p95 | p99 | max | "
        "1-GPU longest wait | GPU util | makespan | deadlocked gangs | partial-gang GPU-h (nodes / quota) | "
        "replay wall time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        finished = f"{s['finished']:,}" + (f" ({s['not_started']:,} never started)" if s["not_started"] else "")
        rows.append(
            f"| {s['label']} | {s['jobs']:,} | {finished} | {_s(s['avg_jct_s'])} | {_s(s['avg_queue_s'])} | "
            f"{_h(s['p50_queue_s'])} | {_h(s['p95_queue_s'])} | {_h(s['p99_queue_s'])} | {_h(s['max_queue_s'])} | "
            f"{_h(s['max_wait_1gpu_s'])} | {s['gpu_util_pct']:.1f}% | {_h(s['makespan_s'])} | "
            f"{s['deadlocked_gangs']} | {s['partial_node_gpu_h']:,.0f} / {s['partial_quota_gpu_h']:,.0f} | "
            f"{s['runtime_s']:.0f} s |"
        )
    return "\n".join(rows)


def helios_table() -> str:
    rows = ["| Helios policy (same window, per-VC simulator) | avg JCT (s) | avg queueing (s) |", "|---|---:|---:|"]
    rows += [f"| {name} | {_s(jct)} | {_s(queue)} |" for name, jct, queue in HELIOS]
    return "\n".join(rows)


def targets_table(by_label: dict[str, dict[str, Any]]) -> str:
    default, fifo, oracle, seed = (by_label.get(name) for name in (DEFAULT, "fifo", "sjf-oracle", "seed"))
    rows = ["| target | measured | met |", "|---|---|---|"]
    jobdash = [s for s in by_label.values() if s["policy"] != "none"]
    if jobdash:
        worst = max(s["deadlocked_gangs"] for s in jobdash)
        rows.append(
            f"| zero deadlocked gangs for every jobdash policy | max {worst} over {len(jobdash)} runs | "
            f"{'yes' if worst == 0 else 'no'} |"
        )
    if default and fifo:
        ratio = default["avg_queue_s"] / fifo["avg_queue_s"] if fifo["avg_queue_s"] else float("inf")
        rows.append(
            f"| {DEFAULT}: avg queueing <= 0.3 x strict FIFO | {_s(default['avg_queue_s'])} s vs "
            f"{_s(fifo['avg_queue_s'])} s = {ratio:.2f} x | {'yes' if ratio <= 0.3 else 'no'} |"
        )
    if default and oracle:
        ratio = default["avg_queue_s"] / oracle["avg_queue_s"] if oracle["avg_queue_s"] else float("inf")
        rows.append(
            f"| {DEFAULT}: avg queueing <= 1.5 x sjf-oracle | {_s(default['avg_queue_s'])} s vs "
            f"{_s(oracle['avg_queue_s'])} s = {ratio:.2f} x | {'yes' if ratio <= 1.5 else 'no'} |"
        )
    if default and seed:
        ratio = default["max_wait_1gpu_s"] / seed["max_wait_1gpu_s"] if seed["max_wait_1gpu_s"] else float("inf")
        rows.append(
            f"| {DEFAULT}: longest 1-GPU wait <= 1/2 of seed's | {_h(default['max_wait_1gpu_s'])} vs "
            f"{_h(seed['max_wait_1gpu_s'])} = {ratio:.2f} x | {'yes' if ratio <= 0.5 else 'no'} |"
        )
    if by_label:
        # Wall time on a machine shared with other work; CPU time says what the replay itself costs.
        slowest = max(by_label.values(), key=lambda s: s["runtime_s"])
        cpu = default["stats"].get("cpu_s", 0.0) if default else 0.0
        shown = f"{DEFAULT}: {default['runtime_s']:.0f} s wall, {cpu:.0f} s CPU; " if default else ""
        rows.append(
            f"| a full replay of one policy in <= 10 min | {shown}slowest ({slowest['label']}): "
            f"{slowest['runtime_s']:.0f} s wall | "
            f"{'yes' if slowest['runtime_s'] <= TARGET_RUNTIME_S else 'no'} |"
        )
    return "\n".join(rows)


def size_table(summaries: list[dict[str, Any]]) -> str:
    labels = [label for _, _, label in SIZE_CLASSES]
    head = "| policy | " + " | ".join(f"{label} GPU" for label in labels) + " |"
    rows = [head, "|---|" + "---:|" * len(labels)]
    for s in summaries:
        cells = []
        for label in labels:
            c = s["per_size"].get(label, {})
            cell = f"{_h(c.get('avg_queue_s', 0))} / {_h(c.get('max_queue_s', 0))}"
            if c.get("not_started"):
                cell += f" ({c['not_started']} never)"
            cells.append(cell)
        rows.append(f"| {s['label']} | " + " | ".join(cells) + " |")
    jobs = summaries[0]["per_size"] if summaries else {}
    rows.append("| jobs | " + " | ".join(f"{jobs.get(label, {}).get('jobs', 0):,}" for label in labels) + " |")
    return "\n".join(rows)


def vc_table(summaries: list[dict[str, Any]]) -> str:
    vcs = sorted(
        {vc for s in summaries for vc in s["per_vc"]}, key=lambda vc: -summaries[0]["per_vc"].get(vc, {}).get("jobs", 0)
    )
    rows = ["| VC (jobs) | " + " | ".join(s["label"] for s in summaries) + " |", "|---|" + "---:|" * len(summaries)]
    for vc in vcs:
        jobs = summaries[0]["per_vc"].get(vc, {}).get("jobs", 0)
        cells = []
        for s in summaries:
            c = s["per_vc"].get(vc, {})
            cell = _s(c.get("avg_queue_s", 0))
            if c.get("not_started"):
                cell += f" ({c['not_started']} never)"
            cells.append(cell)
        rows.append(f"| {vc} ({jobs:,}) | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def eta_table(summaries: list[dict[str, Any]]) -> str:
    rows = [
        "| policy | estimate at submission: coverage | within 2x | median |est - real| | pair order right | "
        "hourly ETA cycles | waiting jobs with an ETA | ETA median |error| | ETA p90 |error| | "
        "ETA median relative error | started later than ETA |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        if s["policy"] == "none":
            continue
        e, a = s["estimate"], s["eta"]
        rows.append(
            f"| {s['label']} | {e.get('coverage_pct', 0):.0f}% | {e.get('within_2x_pct', 0):.0f}% | "
            f"{_h(e.get('median_abs_error_s', 0))} | {e.get('pair_order_agreement_pct', 0):.0f}% | {a['cycles']:,} | "
            f"{a['with_eta_pct']:.0f}% | {_h(a['median_abs_error_s'])} | {_h(a['p90_abs_error_s'])} | "
            f"{a['median_rel_error']:.2f} | {a['late_pct']:.0f}% |"
        )
    return "\n".join(rows)


def cost_table(summaries: list[dict[str, Any]]) -> str:
    rows = [
        "| policy | replay wall time | cycles | avg queue length at a cycle | max queue | time in plan() | "
        "building snapshots | kubesim (controllers, API) | start timeouts | gave up | CPU time | "
        "load average at end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in summaries:
        st = s["stats"]
        load = s.get("machine", {}).get("load_avg", [])
        rows.append(
            f"| {s['label']} | {s['runtime_s']:.0f} s | {st.get('cycles', 0):,} | "
            f"{st.get('avg_queue_len_at_cycle', 0):,} | {st.get('max_pending', 0):,} | {st.get('plan_s', 0):.0f} s | "
            f"{st.get('snapshot_s', 0):.0f} s | {st.get('cluster_s', 0):.0f} s | {st.get('timeouts', 0):,} | "
            f"{st.get('gave_up', 0):,} | {st.get('cpu_s', 0):.0f} s | {', '.join(f'{x:.1f}' for x in load)} |"
        )
    return "\n".join(rows)


def plots(summaries: list[dict[str, Any]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    with_tail = [s for s in summaries if s.get("queue_tail")]
    fig, axes = plt.subplots(1, 2 if with_tail else 1, figsize=(14 if with_tail else 9, 5.5), squeeze=False)
    ax = axes[0][0]
    for s in summaries:
        cdf = s["queue_cdf_s"]
        ys = [i / (len(cdf) - 1) for i in range(len(cdf))]
        ax.step(
            [max(x, 1.0) for x in cdf],
            ys,
            where="post",
            label=s["label"],
            linestyle="--" if s["policy"] in ("none", "sjf-oracle") else "-",
        )
    if with_tail:
        # Most jobs start at once under most policies: the tail is where they differ.
        tail = axes[0][1]
        for s in with_tail:
            points = [(x, y) for x, y in s["queue_tail"] if y > 0]
            tail.step(
                [x for x, _ in points],
                [y for _, y in points],
                where="post",
                label=s["label"],
                linestyle="--" if s["policy"] in ("none", "sjf-oracle") else "-",
            )
        tail.set_xscale("log")
        tail.set_yscale("log")
        tail.set_xlabel("queueing delay x (s, log scale)")
        tail.set_ylabel("fraction of started jobs waiting longer than x (log scale)")
        tail.set_title("the tail: who waits, and how long")
        for seconds in (60, 3600, 86400):
            tail.axvline(seconds, color="grey", linewidth=0.5)
        tail.grid(alpha=0.3, which="both")
        tail.legend(loc="lower left", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("queueing delay (s, submission to whole gang running; log scale)")
    ax.set_ylabel("fraction of started jobs")
    jobs = summaries[0]["jobs"] if summaries else 0
    ax.set_title(f"Philly 2017-10/11, {jobs:,} jobs: queueing delay CDF per policy")
    for seconds, text in ((60, "1 min"), (3600, "1 h"), (86400, "1 d")):
        ax.axvline(seconds, color="grey", linewidth=0.5)
        ax.text(seconds, 0.02, f" {text}", color="grey", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path = out / CDF_PNG
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    for s in summaries:
        hourly = s["util_hourly_pct"]
        days = [sum(hourly[i : i + 24]) / len(hourly[i : i + 24]) for i in range(0, len(hourly), 24)]
        top.plot(
            [d + 0.5 for d in range(len(days))],
            days,
            label=s["label"],
            linestyle="--" if s["policy"] in ("none", "sjf-oracle") else "-",
            linewidth=1.2,
        )
        held = s["held_hourly_pct"]
        idle = [h - u for h, u in zip(held, hourly, strict=False)]
        idle_days = [sum(idle[i : i + 24]) / len(idle[i : i + 24]) for i in range(0, len(idle), 24)]
        bottom.plot(
            [d + 0.5 for d in range(len(idle_days))],
            idle_days,
            label=s["label"],
            linewidth=1.0,
            linestyle="--" if s["policy"] in ("none", "sjf-oracle") else "-",
        )
    top.set_ylabel("GPUs doing work (% of 2,816), daily mean")
    top.set_title("GPU utilisation over time (GPUs of gangs that run)")
    top.grid(alpha=0.3)
    top.legend(fontsize=8, ncol=2)
    bottom.set_ylabel("held, not working (%)")
    bottom.set_xlabel("days since 2017-10-01 (replay continues past the last submission until jobs end)")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    path = out / UTIL_PNG
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


SKELETON = """# Trace replay: two months of Philly through jobdash

<!-- generated:results -->
<!-- /generated:results -->
"""


def _replace(text: str, name: str, body: str) -> str:
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    block = f"{start}\n{body}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def write_report(summaries: list[dict[str, Any]], out: Path) -> list[Path]:
    summaries = sorted(summaries, key=_rank)
    main = [s for s in summaries if s["label"] == s["policy"]]
    by_label = {s["label"]: s for s in main}
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT
    text = path.read_text() if path.exists() else SKELETON
    sections = {
        "results": results_table(summaries),
        "helios": helios_table(),
        "targets": targets_table(by_label),
        "sizes": size_table(summaries),
        "vcs": vc_table(main),
        "eta": eta_table(summaries),
        "cost": cost_table(summaries),
    }
    for name, body in sections.items():
        text = _replace(text, name, body)
    path.write_text(text)
    return [path, *plots(main, out)]
