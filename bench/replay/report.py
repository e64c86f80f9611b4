"""bench/results/trace_replay.md (its generated sections) and the PNG plots, from replay summaries.

The report is part generated, part written: everything between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` is rewritten from the
summaries; the prose around it is kept as it is.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from .metrics import SIZE_CLASSES
from .records import BORROW, ELASTIC, FIXED, NEW_ESTIMATOR, OLD_ESTIMATOR, run_label

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
        # The planner's forecast as it is (raw_...; summaries before issue #16 had no other).
        raw = {key: a.get(f"raw_{key}", a.get(key, 0)) for key in _ERROR_KEYS}
        rows.append(
            f"| {s['label']} | {e.get('coverage_pct', 0):.0f}% | {e.get('within_2x_pct', 0):.0f}% | "
            f"{_h(e.get('median_abs_error_s', 0))} | {e.get('pair_order_agreement_pct', 0):.0f}% | {a['cycles']:,} | "
            f"{a['with_eta_pct']:.0f}% | {_h(raw['median_abs_error_s'])} | {_h(raw['p90_abs_error_s'])} | "
            f"{raw['median_rel_error']:.2f} | {raw['late_pct']:.0f}% |"
        )
    return "\n".join(rows)


_ERROR_KEYS = ("median_abs_error_s", "p90_abs_error_s", "median_rel_error", "late_pct")


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


def _insert_after(text: str, after: str, name: str, body: str) -> str:
    """``_replace``, but a new block goes right after block ``after`` (if there is one)."""
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    anchor = f"<!-- /generated:{after} -->"
    if start in text or anchor not in text:
        return _replace(text, name, body)
    return text.replace(anchor, f"{anchor}\n\n{start}\n{body}\n{end}", 1)


def _shown_labels(text: str) -> set[str]:
    """The runs the results table shows now (its first column)."""
    match = re.search(r"<!-- generated:results -->(.*?)<!-- /generated:results -->", text, re.S)
    if not match:
        return set()
    rows = [line for line in match.group(1).splitlines() if line.startswith("| ")]
    return {row.split("|")[1].strip() for row in rows[1:]}


def is_base(summary: dict[str, Any]) -> bool:
    """A run of the main tables: fixed quotas, the trace's own arrival times."""
    return summary.get("quota", FIXED) == FIXED and summary.get("compress", 1) == 1


def write_report(summaries: list[dict[str, Any]], out: Path) -> list[Path]:
    """Rewrite the generated sections.  The main ones (fixed quotas, the trace's own pace)
    are rewritten only if the summaries cover every run they show now, so a report over a
    partial cache (another machine, a few runs) keeps the numbers it had; the section on
    elastic quota only if there are summaries for it."""
    summaries = sorted(summaries, key=_rank)
    base = [s for s in summaries if is_base(s)]
    main = [s for s in base if s["label"] == s["policy"]]
    by_label = {s["label"]: s for s in main}
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT
    text = path.read_text() if path.exists() else SKELETON
    written = [path]
    missing = _shown_labels(text) - {s["label"] for s in base}
    if base and not missing:
        sections = {
            "results": results_table(base),
            "helios": helios_table(),
            "targets": targets_table(by_label),
            "sizes": size_table(base),
            "vcs": vc_table(main),
            "eta": eta_table(base),
            "cost": cost_table(base),
        }
        for name, body in sections.items():
            text = _replace(text, name, body)
        written += plots(main, out)
    elif missing:
        print(f"# the main tables are kept as they are: no summary for {', '.join(sorted(missing))}", file=sys.stderr)
    runs = elastic_runs(summaries)
    if any(not is_base(s) for s in runs):
        if "<!-- generated:elastic -->" not in text:
            text = text.rstrip() + "\n\n" + ELASTIC_HEADING
        text = _replace(text, "elastic", elastic_table(runs))
        text = _replace(text, "elastic-vcs", vc_table(runs))
        text = _insert_after(text, "targets", "targets-elastic", elastic_targets(runs))
    ranged = range_runs(summaries)
    if ranged:
        if "<!-- generated:ranges -->" not in text:
            text = text.rstrip() + "\n\n" + RANGES_HEADING
        text = _replace(text, "ranges", ranges_table(ranged))
        text = _replace(text, "ranges-bands", bands_table(ranged))
        text = _replace(text, "targets-ranges", ranges_targets(ranged))
    path.write_text(text)
    return written


# -- issue #15: elastic quota ------------------------------------------------------------------

QUOTA_ORDER = (FIXED, BORROW, ELASTIC)
QUOTA_TEXT = {FIXED: "fixed quotas", BORROW: "borrowing, no reclaim", ELASTIC: "borrowing + reclaim"}
ELASTIC_HEADING = """## Elastic quota (issue #15)

<!-- generated:elastic -->
<!-- /generated:elastic -->

Average queueing (s) by VC:

<!-- generated:elastic-vcs -->
<!-- /generated:elastic-vcs -->
"""


def elastic_runs(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs the section compares: strict FIFO and the default policy, under each quota
    mode, at each pace; ordered by pace, then policy, then quota mode."""
    runs = [
        s
        for s in summaries
        if s["policy"] in ("fifo", DEFAULT)
        # no other variants (policy options, grace or limit not the default); --pin is shown too
        and s["label"]
        == run_label(
            s["policy"],
            bool(s.get("pin")),
            quota=s.get("quota", FIXED),
            factor=s.get("compress", 1),
            estimator=s.get("estimator", NEW_ESTIMATOR),  # (runs before issue #16 were unnamed)
        )
    ]

    def key(s: dict[str, Any]) -> tuple:
        quota = s.get("quota", FIXED)
        return (
            s.get("compress", 1),
            s["policy"] != "fifo",
            bool(s.get("pin")),
            QUOTA_ORDER.index(quota),
            s.get("estimator") != OLD_ESTIMATOR,
            s["label"],
        )

    return sorted(runs, key=key)


def _pace(summary: dict[str, Any]) -> str:
    factor = summary.get("compress", 1)
    return "shared window" if factor == 1 else f"arrivals x{factor:g}"


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
            f"| {_pace(s)} | {label} | {QUOTA_TEXT[s.get('quota', FIXED)]} | {s['jobs']:,} | "
            f"{_s(s['avg_queue_s'])} | {_h(s['p99_queue_s'])} | {_h(s['max_wait_1gpu_s'])} | "
            f"{_h(eight.get('avg_queue_s', 0))} / {_h(eight.get('max_queue_s', 0))} | "
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
            (s["policy"], s.get("quota", FIXED)): s for s in runs if s.get("compress", 1) == factor and not s.get("pin")
        }
        elastic, fifo = here.get((DEFAULT, ELASTIC)), here.get(("fifo", FIXED))
        where = _pace({"compress": factor})
        if elastic and fifo:
            ratio = elastic["avg_queue_s"] / fifo["avg_queue_s"] if fifo["avg_queue_s"] else float("inf")
            rows.append(
                f"| {where}: {DEFAULT} with elastic quota, avg queueing <= 0.3 x strict FIFO with fixed quotas | "
                f"{_s(elastic['avg_queue_s'])} s vs {_s(fifo['avg_queue_s'])} s = {ratio:.2f} x | "
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
            if s["policy"] == DEFAULT and s.get("quota") == ELASTIC and not s.get("pin")
        ]
        rows.append(
            f"| a full replay in <= 10 min | {'; '.join(shown)}{'; ' if shown else ''}slowest ({slowest['label']}): "
            f"{slowest['runtime_s']:.0f} s wall | {'yes' if slowest['runtime_s'] <= TARGET_RUNTIME_S else 'no'} |"
        )
    return "\n".join(rows)


# -- issue #16: start-time ranges ----------------------------------------------------------------

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
            f"| {_pace(s)} | {s['label']} | {ESTIMATOR_TEXT.get(s.get('estimator', ''), '?')} | "
            f"{_s(s['avg_queue_s'])} | {scores} | {a['samples']:,} ({st.get('calibration_observed', 0):,}) | "
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
                f"| {_pace(s)} | {s['label']} | {band['band']} | {band['samples']:,} | "
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
        where = _pace({"compress": factor})
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
                f"| {where}: {DEFAULT} avg queueing <= 1.5 x sjf-oracle | {_s(new['avg_queue_s'])} s vs "
                f"{_s(oracle['avg_queue_s'])} s = {ratio:.2f} x | {_met(ratio <= 1.5)} |"
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
