"""`jobdash usage`: what each team used, as a table, JSON, YAML or CSV (the server's CSV columns)."""

from __future__ import annotations

import argparse
import csv
import io
from typing import Any

from . import Client
from . import cli_output as out

HOURS = ("gpu_hours", "cpu_hours", "memory_gib_hours", "lost_gpu_hours")
HEADERS = ("GPU-HOURS", "CPU-HOURS", "MEMORY-GIB-HOURS", "GPU-HOURS-LOST")
# The server's CSV columns: the hours, then the GPU-hours lost (redone) by cause.
CSV_COLUMNS = (
    *HOURS,
    "lost_preemption_gpu_hours",
    "lost_reclaim_gpu_hours",
    "lost_move_gpu_hours",
    "lost_cluster_gpu_hours",
)


def add_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--from", dest="from_day", metavar="YYYY-MM-DD", help="first UTC day (default: the 1st of the month)"
    )
    sub.add_argument("--to", dest="to_day", metavar="YYYY-MM-DD", help="last UTC day, included (default: today)")
    sub.add_argument(
        "--group-by",
        default="namespace",
        metavar="G1,G2",
        help="any of namespace, user, kind, priority_class, day, borrowed, cluster (default: namespace)",
    )
    sub.add_argument("-o", "--output", choices=("json", "yaml", "csv"), help="the API's answer, or CSV")


def run(client: Client, args: argparse.Namespace) -> str:
    groups = [g.strip() for g in args.group_by.split(",") if g.strip()]
    report = client.usage(args.from_day, args.to_day, groups)
    if args.output == "csv":
        return as_csv(report).rstrip("\n")
    if args.output:
        return out.dump(report, args.output)
    return as_table(report)


def as_csv(report: dict[str, Any]) -> str:
    """The same CSV as the server's ?format=csv."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*report["group_by"], *CSV_COLUMNS])
    for row in report["rows"]:
        writer.writerow([*(row[g] for g in report["group_by"]), *(f"{row.get(h, 0.0):.6f}" for h in CSV_COLUMNS)])
    return buffer.getvalue()


def as_table(report: dict[str, Any]) -> str:
    title = f"UTC days {report['from']} to {report['to']}"
    if not report["rows"]:
        return f"{title}: no usage."
    groups = report["group_by"]
    rows = [[*(row[g] for g in groups), *(f"{row.get(h, 0.0):.2f}" for h in HOURS)] for row in report["rows"]]
    total = sum(row["gpu_hours"] for row in report["rows"])
    lost = sum(row.get("lost_gpu_hours", 0.0) for row in report["rows"])
    return f"{title}: {total:.2f} GPU-hours, {lost:.2f} of them lost (redone)\n" + out.table(
        [g.upper() for g in groups] + list(HEADERS), rows
    )
