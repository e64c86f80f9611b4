"""The `jobdash` command's grammar: the subcommands, their arguments and help, each with the
server flags; cli.py runs them."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import UNTIL, cli_options, cli_status, cli_usage
from .options import is_rfc3339

STATES = ("Queued", "Released", "Running", "Succeeded", "Failed", "Cancelled")
WAIT_FOR = UNTIL
Run = Callable[[argparse.Namespace], int]


def _state(text: str, choices: Sequence[str]) -> str:
    for choice in choices:
        if choice.lower() == text.lower():
            return choice
    raise argparse.ArgumentTypeError(f"{text!r}: one of {', '.join(choices)}")


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def _moment(text: str) -> str:
    if not is_rfc3339(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time such as 2025-06-01T18:00:00Z")
    return text.strip()


def parser(runs: Mapping[str, Run]) -> argparse.ArgumentParser:
    """The parser of every command; ``runs``: command -> what runs it (cli.py's)."""
    connection = argparse.ArgumentParser(add_help=False)
    group = connection.add_argument_group("server")
    # SUPPRESS: given before or after the command, the flag is kept (argparse would reset it).
    group.add_argument("--server", default=argparse.SUPPRESS, help="jobdash's URL (else JOBDASH_URL, else the config)")
    group.add_argument("--token", default=argparse.SUPPRESS, help="API token (else JOBDASH_TOKEN, else the config)")
    group.add_argument("--request-timeout", type=_positive, default=argparse.SUPPRESS, help="seconds per request (30)")
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("-o", "--output", choices=("json", "yaml"), help="the API's objects instead of a table")

    parser = argparse.ArgumentParser(
        prog="jobdash",
        parents=[connection],
        description="jobdash's admission queue from the command line. Server and token: --server/--token, else "
        "JOBDASH_URL/JOBDASH_TOKEN, else $JOBDASH_CONFIG or ~/.config/jobdash/config.yaml (`jobdash login`).",
    )
    parser.set_defaults(request_timeout=30.0)
    commands = _Commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"), connection, runs)
    _login_command(commands.subparsers, runs["login"])
    _job_commands(commands, output)
    _wait_command(commands)
    _workflow_commands(commands, output)
    _service_commands(commands, output)
    return parser


class _Commands:
    """The subcommands: each one's help is its description, and it takes the server flags."""

    def __init__(self, subparsers: Any, connection: argparse.ArgumentParser, runs: Mapping[str, Run]):
        self.subparsers = subparsers
        self.connection = connection
        self.runs = runs

    def add(self, name: str, help: str, *parents: Any) -> Any:
        sub = self.subparsers.add_parser(name, help=help, description=help, parents=[self.connection, *parents])
        sub.set_defaults(run=self.runs[name])
        return sub


def _login_command(subparsers: Any, run: Run) -> None:
    # Not _Commands.add: login's --server and --token are what it saves, with their own help.
    sub = subparsers.add_parser("login", help="save the server and token in the config file (mode 0600)")
    sub.add_argument("--server", default=argparse.SUPPRESS, help="jobdash's URL, e.g. http://127.0.0.1:8000")
    sub.add_argument("--token", default=argparse.SUPPRESS, help="API token (asked for when not given)")
    sub.set_defaults(run=run)


def _job_commands(commands: _Commands, output: argparse.ArgumentParser) -> None:
    """submit, list, queue, describe, cancel."""
    sub = commands.add(
        "submit",
        "submit manifests: one job per file (or per YAML document); several go in one request, all or none",
        output,
    )
    sub.add_argument("files", nargs="+", metavar="FILE", help="a manifest file; - reads standard input")
    sub.add_argument("-n", "--namespace", help="the namespace, when the manifest names none")
    sub.add_argument("--priority-class", help="a PriorityClass of the cluster, within the namespace's limit")
    sub.add_argument("--priority", type=int, default=0, help="a numeric priority (staff only)")
    cli_options.add_flags(sub)

    sub = commands.add("list", "list jobs", output)
    sub.add_argument("-n", "--namespace")
    sub.add_argument("--state", type=lambda t: _state(t, STATES), metavar="|".join(STATES))
    sub.add_argument("--kind", help="e.g. TFJob, PyTorchJob")
    sub.add_argument("--name", help="the job's name, exactly")
    sub.add_argument("--name-contains", metavar="PART", help="a part of the name, any case")
    sub.add_argument("--mine", action="store_true", help="only my jobs (those I created with kubectl too)")

    sub = commands.add("queue", "a namespace's waiting jobs in admission order, with their start ranges", output)
    sub.add_argument("namespace", metavar="NS")

    sub = commands.add("describe", "a job: state, reason, start range, predicted run time, events", output)
    sub.add_argument("id", type=int, metavar="ID")

    sub = commands.add("cancel", "cancel jobs", output)
    sub.add_argument("ids", nargs="+", type=int, metavar="ID")

    sub = commands.add("checkpointed", "report that a running job has written a checkpoint", output)
    sub.add_argument("id", type=int, metavar="JOB", help="the job's id")
    sub.add_argument("--at", type=_moment, metavar="TIME", help="when it was written, RFC 3339 (default: now)")


def _wait_command(commands: _Commands) -> None:
    sub = commands.add(
        "wait",
        "wait until a job reaches a state; exit 0 reached, 1 ended in another final state, 2 timed out, 3 error",
    )
    sub.add_argument("id", type=int, metavar="ID")
    sub.add_argument(
        "--for",
        dest="state",
        required=True,
        type=lambda t: _state(t, WAIT_FOR),
        metavar="|".join(WAIT_FOR),
        help="finished: any final state",
    )
    sub.add_argument("--timeout", type=_positive, help="seconds (default: no limit)")
    sub.add_argument("--poll", type=_positive, default=2.0, help="seconds between reads (2)")
    sub.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")


def _workflow_commands(commands: _Commands, output: argparse.ArgumentParser) -> None:
    sub = commands.add("workflows", "list workflows: jobs submitted as one graph or one array", output)
    sub.add_argument("-n", "--namespace")

    sub = commands.add("workflow", "a workflow: its jobs in dependency order, what each waits for", output)
    sub.add_argument("id", type=int, metavar="ID")
    sub.add_argument("--cancel", action="store_true", help="cancel every active job of it")


def _service_commands(commands: _Commands, output: argparse.ArgumentParser) -> None:
    """usage, status, watch: the service as a whole rather than one job."""
    cli_usage.add_arguments(commands.add("usage", "GPU-, CPU- and memory-hours used per day, namespace, user..."))

    cli_status.add_arguments(
        commands.add(
            "status",
            "whether jobs are being released (the dispatcher's cycles), the leader, job counts; "
            "exit 0 releasing, 2 not, 1 error",
        )
    )

    sub = commands.add("watch", "reprint the queue every few seconds until Ctrl-C", output)
    sub.add_argument("namespace", nargs="?", metavar="NS", help="default: every namespace you see")
    sub.add_argument("-i", "--interval", type=_positive, default=5.0, help="seconds (5)")
    sub.add_argument("--once", action="store_true", help="print once and exit")
