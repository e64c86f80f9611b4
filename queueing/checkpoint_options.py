"""What a job says about its checkpoints (issue 48), read by job_options' one parser.

- ``jobdash.io/checkpoint-every``: it writes a checkpoint every so often (more than 0, at
  most job_options' MAX_RUN_S);
- ``jobdash.io/checkpoint-on-notice``: how long it needs, once told it is preempted, to
  write one (0 or more, at most the admin's maximum, JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS);
- ``jobdash.io/min-runtime``: how long it runs before it may be preempted (0 or more, at
  most the admin's ceiling, JOBDASH_MAX_MIN_RUNTIME_SECONDS);
- ``jobdash.io/checkpointed-at``: set on its own object by a running job, an RFC 3339 time:
  the last checkpoint it wrote (read by the dispatcher's tracker, not at submission).

Durations in parse_duration's syntax (``90s``, ``10m``, ``1h30m``, plain seconds), ``0``
too where 0 means something. A value over a limit is refused, naming the limit: never
quietly cut to it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .checkpoint_names import CHECKPOINT_EVERY, CHECKPOINT_ON_NOTICE, CHECKPOINTED_AT, MIN_RUNTIME
from .eta import parse_duration

__all__ = ["CHECKPOINTED_AT", "CHECKPOINT_EVERY", "CHECKPOINT_ON_NOTICE", "MIN_RUNTIME"]

MAX_EVERY_S = 366 * 86400.0  # (job_options.MAX_RUN_S: a checkpoint less often is none)
_ZERO = re.compile(r"0+(\.0*)?(d|h|m|s)?(0+(\.0*)?(d|h|m|s))*")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")


@dataclass(frozen=True)
class CheckpointLimits:
    """The admin's bounds (settings JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS and
    JOBDASH_MAX_MIN_RUNTIME_SECONDS): a job asking for more is refused."""

    max_notice_s: float = 600.0
    max_min_runtime_s: float = 7200.0


def every_text(text: str) -> float:
    return _every(_duration(text, zero=False, what="a checkpoint interval", example="10m, 1h or 90s"))


def notice_text(text: str, limits: CheckpointLimits) -> float:
    return _notice(_duration(text, zero=True, what="a checkpoint notice", example="0s, 90s or 5m"), limits)


def min_runtime_text(text: str, limits: CheckpointLimits) -> float:
    return _min_runtime(_duration(text, zero=True, what="a minimum run time", example="0s, 30m or 1h"), limits)


def every_field(value: Any) -> float:
    return _every(_field(value, zero=False, example="10m"))


def notice_field(value: Any, limits: CheckpointLimits) -> float:
    return _notice(_field(value, zero=True, example="90s"), limits)


def min_runtime_field(value: Any, limits: CheckpointLimits) -> float:
    return _min_runtime(_field(value, zero=True, example="30m"), limits)


def checkpointed_at(text: str) -> float:
    """``jobdash.io/checkpointed-at``'s RFC 3339 time -> epoch seconds; ValueError if it is none."""
    text = text.strip()
    if not _RFC3339.fullmatch(text):
        raise ValueError(f'"{text[:64]}" is not an RFC 3339 time such as 2025-06-01T18:00:00Z')
    try:
        return datetime.fromisoformat(text.upper().replace("Z", "+00:00")).timestamp()
    except ValueError:  # (a month 13, a day 32)
        raise ValueError(f'"{text[:64]}" is not a time: out of range') from None


def words(seconds: float) -> str:
    """600 -> "10m", 5400 -> "1h30m", 90 -> "90s" (for messages)."""
    if seconds >= 60 and seconds % 60 == 0:
        hours, minutes = divmod(int(seconds) // 60, 60)
        return (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return f"{seconds:g}s"


# One message for a zero interval, whichever path and spelling ("0", "0s", 0).
ZERO_INTERVAL = "must be more than 0 (a job that never checkpoints says nothing)"


def _duration(text: str, *, zero: bool, what: str, example: str) -> float:
    stripped = text.strip()
    if _ZERO.fullmatch(stripped):
        if not zero:
            raise ValueError(f'"{text}": {ZERO_INTERVAL}')
        return 0.0
    seconds = parse_duration(stripped)
    if seconds is None:
        raise ValueError(f'"{text}" is not {what}: use a duration such as {example}')
    return seconds


def _field(value: Any, *, zero: bool, example: str) -> float:
    """The API's field: a duration as the annotation takes it, or a number of seconds."""
    if isinstance(value, str):
        return _duration(value, zero=zero, what="a duration", example=example)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"must be a duration such as {example}, or a number of seconds")
    if value == 0 and not zero:
        raise ValueError(f'"0": {ZERO_INTERVAL}')
    if value < 0:
        raise ValueError("must be 0 or more seconds" if zero else f"{value:g}: {ZERO_INTERVAL}")
    return float(value)


def _every(seconds: float) -> float:
    if seconds > MAX_EVERY_S:
        raise ValueError(f"{words(seconds)} is longer than a job may run: at most 366d")
    return seconds


def _notice(seconds: float, limits: CheckpointLimits) -> float:
    return _at_most(
        seconds,
        limits.max_notice_s,
        "a job may take to checkpoint after a notice",
        "JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS",
    )


def _min_runtime(seconds: float, limits: CheckpointLimits) -> float:
    return _at_most(seconds, limits.max_min_runtime_s, "a job may run unpreempted", "JOBDASH_MAX_MIN_RUNTIME_SECONDS")


def _at_most(seconds: float, limit: float, what: str, setting: str) -> float:
    """``seconds``, or refused naming the admin's ``setting`` when above its ``limit``."""
    if seconds > limit:
        raise ValueError(f"{words(seconds)} is more than the {words(limit)} {what} ({setting}={limit:g})")
    return seconds
