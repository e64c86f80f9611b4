"""A job's workflow options (dependencies, retries, deadlines) as the API takes them: fields
of a JSON submission, or query parameters beside a YAML body. The server checks the values
and names the field of a bad one; durations are read here so that the CLI can refuse
`--max-run-time soon` itself."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, TypedDict, Union

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")

# Union, not |: the client supports Python 3.9.
Moment = Union[str, datetime]  # noqa: UP007


class Options(TypedDict, total=False):
    """Workflow options of a submission (`Client.submit`'s keywords); each over the
    manifest's jobdash.io/* annotation of the same option."""

    after: str | Iterable[str]  # "ok:NAME", "any:ID", "notok:NAME"; a bare name or id means ok
    keep_if_never_satisfied: bool  # stay Queued when a dependency can never be met (else cancelled)
    retry_limit: int  # retries after the first attempt (0..100; default 3)
    retry_on: str | Iterable[str]  # failure classes retried (default NodeLost, Evicted, Preempted)
    retry_exit_codes: Iterable[int]  # exit codes retried (1..255)
    retry_backoff_seconds: float  # before the first retry, doubling (at most 1 h; default 30)
    max_run_seconds: float  # stopped (DeadlineExceeded) once it has run this long
    start_by: Moment  # RFC 3339, a datetime, or a duration ("2h") from now: cancelled if still queued then
    checkpoint_every: str | float  # it writes a checkpoint this often: "10m", or seconds
    checkpoint_on_notice: str | float  # it needs this long, after a notice, to write one: "90s", or seconds
    min_runtime: str | float  # not preempted before it has run this long: "30m", or seconds


def parse_duration(text: str) -> float | None:
    """'5400', '90s', '30m', '2h', '1h30m', '2d' -> seconds (as the server reads them); None if not one."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        position, seconds = 0, 0.0
        for match in _DURATION_PART.finditer(text):
            if match.start() != position:
                return None
            seconds += float(match[1]) * _UNIT_SECONDS[match[2]]
            position = match.end()
        if position != len(text) or not text:
            return None
    return seconds if 0 < seconds < float("inf") else None


def is_rfc3339(text: str) -> bool:
    return bool(_RFC3339.fullmatch(text.strip()))


def option_fields(
    *,
    after: str | Iterable[str] | None = None,
    keep_if_never_satisfied: bool | None = None,
    retry_limit: int | None = None,
    retry_on: str | Iterable[str] | None = None,
    retry_exit_codes: Iterable[int] | None = None,
    retry_backoff_seconds: float | None = None,
    max_run_seconds: float | None = None,
    start_by: Moment | None = None,
    checkpoint_every: str | float | None = None,
    checkpoint_on_notice: str | float | None = None,
    min_runtime: str | float | None = None,
) -> dict[str, Any]:
    """The JSON submission's option fields for the options given (None: the manifest's
    annotation, else the server's default). `start_by`: an RFC 3339 time, a datetime, or a
    duration such as "2h" counted by the server from the submission."""
    fields: dict[str, Any] = {}
    if after is not None:
        fields["after"] = after if isinstance(after, str) else list(after)  # "ok:a,any:b" as the annotation
    if keep_if_never_satisfied is not None:
        fields["keep_if_never_satisfied"] = keep_if_never_satisfied
    retry = {
        "limit": retry_limit,
        "on": _words(retry_on),
        "exit_codes": None if retry_exit_codes is None else list(retry_exit_codes),
        "backoff_seconds": retry_backoff_seconds,
    }
    if any(value is not None for value in retry.values()):
        fields["retry"] = {key: value for key, value in retry.items() if value is not None}
    if max_run_seconds is not None:
        fields["max_run_seconds"] = max_run_seconds
    if start_by is not None:
        fields["start_by"] = moment_text(start_by)
    checkpoints = {
        "checkpoint_every": checkpoint_every,
        "checkpoint_on_notice": checkpoint_on_notice,
        "min_runtime": min_runtime,
    }
    fields.update((key, value) for key, value in checkpoints.items() if value is not None)
    return fields


def query_parameters(fields: dict[str, Any]) -> list[tuple[str, str]]:
    """The same options as the query parameters of a YAML body (`after` repeated)."""
    after = fields.get("after", [])
    params = [("after", item) for item in ([after] if isinstance(after, str) else after)]
    if "keep_if_never_satisfied" in fields:
        params.append(("keep_if_never_satisfied", "true" if fields["keep_if_never_satisfied"] else "false"))
    for key, value in fields.get("retry", {}).items():
        shown = ",".join(str(item) for item in value) if isinstance(value, list) else str(value)
        params.append((f"retry_{key}", shown))
    for key in ("max_run_seconds", "start_by", "checkpoint_every", "checkpoint_on_notice", "min_runtime"):
        if key in fields:
            params.append((key, str(fields[key])))
    return params


def _words(value: str | Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    return [word.strip() for word in value.split(",") if word.strip()] if isinstance(value, str) else list(value)


def moment_text(value: Moment) -> str:
    if isinstance(value, str):
        return value
    utc = timezone.utc  # noqa: UP017 (Python 3.9 has no datetime.UTC)
    moment = value.astimezone(utc) if value.tzinfo else value.replace(tzinfo=utc)
    return moment.isoformat().replace("+00:00", "Z")
