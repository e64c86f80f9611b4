"""The report's two plots, as PNGs beside it: the queueing-delay CDF (and its tail) per
policy, and GPU utilisation over time with the GPUs held but not working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CDF_PNG = "trace_replay_queue_cdf.png"
UTIL_PNG = "trace_replay_utilisation.png"


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
