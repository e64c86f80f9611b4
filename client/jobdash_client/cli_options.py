"""`jobdash submit`'s workflow flags: dependencies, arrays, retries, deadlines. Values the
command can read itself (numbers, durations, times) are checked here, so that a bad one is
argparse's error naming the flag; the rest (a dependency, an array, a failure class) the
server checks, naming the field."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from .options import is_rfc3339, parse_duration

WORKFLOW = ("jobdash.io/v1", "Workflow")


def add_flags(sub: argparse.ArgumentParser) -> None:
    group = sub.add_argument_group("workflow (each flag over the manifest's jobdash.io/* annotation)")
    group.add_argument(
        "--after",
        action="append",
        metavar="ok:NAME|any:NAME|notok:NAME",
        help="run after that job succeeds (ok), finishes (any) or fails (notok); NAME a job name or id, "
        "a bare one meaning ok; repeatable",
    )
    group.add_argument(
        "--keep-if-never-satisfied",
        action="store_true",
        default=None,
        help="stay queued when a dependency can never be met (else the job is cancelled)",
    )
    group.add_argument(
        "--array", metavar="0-99[%N]", help="one job per index ({{index}} in the manifest replaced); %%N: N at once"
    )
    group.add_argument("--retry-limit", type=_count, metavar="N", help="retries after the first attempt (3)")
    group.add_argument(
        "--retry-on",
        type=_words,
        metavar="CLASSES",
        help="failure classes retried (NodeLost,Evicted,Preempted by default; also ImagePull, OOMKilled, ExitCode, Unknown)",
    )
    group.add_argument("--retry-exit-codes", type=_exit_codes, metavar="3,42", help="exit codes retried")
    group.add_argument(
        "--retry-backoff", type=_duration, metavar="DURATION", help="wait before the first retry, doubling (30s)"
    )
    group.add_argument(
        "--max-run-time",
        type=_duration,
        metavar="DURATION",
        help="stop the job once it has run this long: 90s, 30m, 2h",
    )
    group.add_argument(
        "--start-by",
        type=_start_by,
        metavar="TIME",
        help="cancel the job if still queued then: RFC 3339 (2025-06-01T18:00:00Z) or a duration from now (2h)",
    )
    group = sub.add_argument_group("checkpoints (each flag over the manifest's jobdash.io/* annotation)")
    group.add_argument(
        "--checkpoint-every",
        type=_duration_text,
        metavar="DURATION",
        help="the job writes a checkpoint this often: 10m",
    )
    group.add_argument(
        "--checkpoint-on-notice",
        type=_duration_or_zero,
        metavar="DURATION",
        help="how long it needs, once told it is preempted, to write one: 90s",
    )
    group.add_argument(
        "--min-runtime",
        type=_duration_or_zero,
        metavar="DURATION",
        help="not preempted before it has run this long: 30m (default: the namespace's)",
    )


def from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The options given, as Client.submit's keywords."""
    given = {
        "after": args.after,
        "keep_if_never_satisfied": args.keep_if_never_satisfied,
        "retry_limit": args.retry_limit,
        "retry_on": args.retry_on,
        "retry_exit_codes": args.retry_exit_codes,
        "retry_backoff_seconds": args.retry_backoff,
        "max_run_seconds": args.max_run_time,
        "start_by": args.start_by,
        "checkpoint_every": args.checkpoint_every,
        "checkpoint_on_notice": args.checkpoint_on_notice,
        "min_runtime": args.min_runtime,
    }
    return {key: value for key, value in given.items() if value is not None}


def declares_workflow(text: str) -> bool:
    """Whether a YAML document is a jobdash.io/v1 Workflow (the head of a workflow stream)."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        return False  # a job's document, then: the server says what is wrong with it
    return isinstance(document, dict) and (document.get("apiVersion"), document.get("kind")) == WORKFLOW


def _count(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def _words(text: str) -> list[str]:
    words = [word.strip() for word in text.split(",") if word.strip()]
    if not words:
        raise argparse.ArgumentTypeError("give one or more, separated by commas")
    return words


def _exit_codes(text: str) -> list[int]:
    words = _words(text)
    bad = [word for word in words if not word.isdigit()]
    if bad:
        raise argparse.ArgumentTypeError(f"{', '.join(map(repr, bad))}: exit codes are whole numbers, e.g. 3,42")
    return [int(word) for word in words]


def _duration(text: str) -> float:
    seconds = parse_duration(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: use 90s, 30m, 2h, 1h30m, 2d or plain seconds")
    return seconds


def _duration_text(text: str) -> str:
    """Sent as written (the server reads the same syntax and names the field of a value over its limits)."""
    if _is_zero(text):
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0 (a job that never checkpoints says nothing)")
    _duration(text)
    return text.strip()


def _is_zero(text: str) -> bool:
    """0, 0s, 0.0, 0m: no time at all."""
    return text.strip().rstrip("dhms").replace(".", "").strip("0") == "" and text.strip()[:1] == "0"


def _duration_or_zero(text: str) -> str:
    if _is_zero(text):
        return text.strip()  # none needed
    return _duration_text(text)


def _start_by(text: str) -> str:
    """Sent as given: the server counts a duration from the submission, by its own clock."""
    if parse_duration(text) is None and not is_rfc3339(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an RFC 3339 time (2025-06-01T18:00:00Z) nor a duration (2h)"
        )
    return text.strip()
