"""`jobdash status`: whether jobs are being released (the server's GET /api/v1/status/), for
people and for scripts: exit 0 when the dispatcher is completing cycles, NOT_RELEASING when
it is not (failing, stalled or never elected), 1 on an error, as every command."""

from __future__ import annotations

import argparse
from typing import Any

from . import Client
from . import cli_output as out

NOT_RELEASING = 2


def add_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("-o", "--output", choices=("json", "yaml"), help="the API's answer instead of the summary")


def run(client: Client, args: argparse.Namespace) -> int:
    status = client.status()
    print(out.dump(status, args.output) if args.output else summary(status))
    return 0 if status["dispatcher"]["healthy"] else NOT_RELEASING


def summary(status: dict[str, Any]) -> str:
    health, leader, cycle = status["dispatcher"], status["dispatcher"]["leader"], status["dispatcher"]["last_cycle"]
    if health["healthy"]:
        lines = ["Jobs are being released: the dispatcher is completing cycles"]
    else:
        lines = [health["message"]]
        if health.get("error"):
            lines.append(f"  last error: {health['error']}")
    who = f"{leader['identity']}, " if leader.get("identity") else ""
    elected = f"since {out.moment(leader['since'])}" if leader.get("since") else "none yet"
    term = f"term {leader['term']}, " if leader.get("term") is not None else ""
    lines.append(f"Leader: {who}{term}{elected} (election: {leader['backend']})")
    if cycle:
        finished = f"{out.moment(cycle['finished_at'])} ({out.relative(cycle['finished_at'])})"
        lines.append(f"Last completed cycle: {finished}, term {cycle['term']}")
    else:
        lines.append("Last completed cycle: none")
    counts = ", ".join(f"{state} {n}" for state, n in status.get("jobs", {}).items() if n)
    lines.append(f"Jobs: {counts or 'none'}")
    return "\n".join(lines)
