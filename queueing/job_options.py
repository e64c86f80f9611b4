"""A job's workflow options: dependencies, retries by failure class, deadlines; and what it
says about its checkpoints (checkpoint_options.py).

One parser for every path: the manifest's ``jobdash.io/*`` annotations (all a kubectl
user has), then the API's fields over them (the CLI and the pages send those). Every bad
value is reported at once, each at its own path, with what would have been accepted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from . import checkpoint_options as checkpoint
from .checkpoint_options import CheckpointLimits
from .errors import FieldError, ManifestError
from .eta import parse_duration
from .failures import DEFAULT_RETRY_ON, FAILURE_CLASSES, MAX_BACKOFF_S, RETRIABLE_CLASSES

__all__ = [
    "CheckpointLimits",
    "DEFAULT_RETRY_ON",
    "FAILURE_CLASSES",
    "Dependency",
    "JobOptions",
    "RetryPolicy",
    "options_from_annotations",
    "parse_after",
    "with_fields",
]

T = TypeVar("T")

CONDITIONS = ("ok", "any", "notok")  # Slurm's afterok, afterany, afternotok
MAX_DEPENDENCIES = 64
MAX_RETRY_LIMIT = 100
MAX_RUN_S = 366 * 86400.0

AFTER = "jobdash.io/after"
KEEP_IF_NEVER = "jobdash.io/keep-if-never-satisfied"
RETRY_LIMIT = "jobdash.io/retry-limit"
RETRY_ON = "jobdash.io/retry-on"
RETRY_EXIT_CODES = "jobdash.io/retry-exit-codes"
RETRY_BACKOFF = "jobdash.io/retry-backoff"
MAX_RUN_TIME = "jobdash.io/max-run-time"
START_BY = "jobdash.io/start-by"

DEFAULT_LIMITS = CheckpointLimits()  # (the settings' defaults)
_TARGET = re.compile(r"\d+|[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)")
_DEPENDENCY_HELP = "use ok:NAME, any:NAME or notok:NAME (NAME a job name or id)"


@dataclass(frozen=True)
class Dependency:
    condition: str  # "ok" | "any" | "notok"
    target: str  # a job id ("42") or a job name in the same namespace ("train-1")


@dataclass(frozen=True)
class RetryPolicy:
    limit: int = 3  # retries after the first attempt
    on: frozenset[str] = DEFAULT_RETRY_ON
    exit_codes: frozenset[int] = frozenset()
    backoff_s: float = 30.0


@dataclass(frozen=True)
class JobOptions:
    after: tuple[Dependency, ...] = ()
    keep_if_never: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_run_s: float | None = None
    start_by: float | None = None  # epoch seconds
    # Checkpoints (issue 48): every so often; how long after a notice; run at least this long.
    checkpoint_every_s: float | None = None
    checkpoint_on_notice_s: float | None = None
    min_runtime_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "after": [[dependency.condition, dependency.target] for dependency in self.after],
            "keep_if_never": self.keep_if_never,
            "retry": {
                "limit": self.retry.limit,
                "on": sorted(self.retry.on, key=FAILURE_CLASSES.index),
                "exit_codes": sorted(self.retry.exit_codes),
                "backoff_s": self.retry.backoff_s,
            },
            "max_run_s": self.max_run_s,
            "start_by": self.start_by,
            "checkpoint_every_s": self.checkpoint_every_s,
            "checkpoint_on_notice_s": self.checkpoint_on_notice_s,
            "min_runtime_s": self.min_runtime_s,
        }

    @staticmethod
    def max_run_of(data: Mapping[str, Any] | None) -> float | None:
        """The stored options' maximum run time alone: what the tracker asks of every running
        job each cycle, without building the whole JobOptions."""
        return _float_or_none((data or {}).get("max_run_s"))

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> JobOptions:
        """The stored shape back (what to_json wrote; a missing key takes its default)."""
        data = data or {}
        retry = data.get("retry") or {}
        default = RetryPolicy()
        return cls(
            after=tuple(Dependency(str(condition), str(target)) for condition, target in data.get("after") or ()),
            keep_if_never=bool(data.get("keep_if_never", False)),
            retry=RetryPolicy(
                limit=int(retry.get("limit", default.limit)),
                on=frozenset(retry["on"]) if "on" in retry else default.on,
                exit_codes=frozenset(int(code) for code in retry.get("exit_codes") or ()),
                backoff_s=float(retry.get("backoff_s", default.backoff_s)),
            ),
            max_run_s=_float_or_none(data.get("max_run_s")),
            start_by=_float_or_none(data.get("start_by")),
            checkpoint_every_s=_float_or_none(data.get("checkpoint_every_s")),
            checkpoint_on_notice_s=_float_or_none(data.get("checkpoint_on_notice_s")),
            min_runtime_s=_float_or_none(data.get("min_runtime_s")),
        )


def parse_after(text: str, path: str) -> tuple[Dependency, ...]:
    """``ok:train-1, any:42, prep`` -> dependencies (a bare target means ok:TARGET)."""
    dependencies, errors = _after_items(text, path)
    if errors:
        raise ManifestError(errors)
    return dependencies


def options_from_annotations(
    annotations: Mapping[str, str], now: float, limits: CheckpointLimits = DEFAULT_LIMITS
) -> JobOptions:
    """The options the manifest's annotations set; a ManifestError lists every bad one.
    `limits`: the admin's bounds of what a job may say of its checkpoints."""
    errors: list[FieldError] = []

    def read(name: str, parse: Callable[[str], T], default: T) -> T:
        text = annotations.get(name)
        if text is None:
            return default
        path = f'metadata.annotations["{name}"]'
        try:
            return parse(str(text))
        except ValueError as error:
            errors.append(FieldError(path, str(error)))
            return default

    after: tuple[Dependency, ...] = ()
    if AFTER in annotations:
        after, bad = _after_items(str(annotations[AFTER]), f'metadata.annotations["{AFTER}"]')
        errors.extend(bad)
    default = RetryPolicy()
    options = JobOptions(
        after=after,
        keep_if_never=read(KEEP_IF_NEVER, _boolean, False),
        retry=RetryPolicy(
            limit=read(RETRY_LIMIT, _retry_limit, default.limit),
            on=read(RETRY_ON, lambda text: frozenset(_classes(_split(text))), default.on),
            exit_codes=read(RETRY_EXIT_CODES, lambda text: frozenset(_exit_codes(_split(text))), frozenset()),
            backoff_s=read(RETRY_BACKOFF, _backoff, default.backoff_s),
        ),
        max_run_s=read(MAX_RUN_TIME, _max_run, None),
        start_by=read(START_BY, lambda text: _start_by(text, now), None),
        checkpoint_every_s=read(checkpoint.CHECKPOINT_EVERY, checkpoint.every_text, None),
        checkpoint_on_notice_s=read(
            checkpoint.CHECKPOINT_ON_NOTICE, lambda text: checkpoint.notice_text(text, limits), None
        ),
        min_runtime_s=read(checkpoint.MIN_RUNTIME, lambda text: checkpoint.min_runtime_text(text, limits), None),
    )
    if errors:
        raise ManifestError(errors)
    return options


def with_fields(
    options: JobOptions, fields: Mapping[str, Any], now: float, limits: CheckpointLimits = DEFAULT_LIMITS
) -> JobOptions:
    """The API's fields over the annotations' options: each given field replaces its option
    (``retry``'s keys one by one). Fields absent or null leave the option as it is."""
    errors: list[FieldError] = []

    def read(value: Any, path: str, parse: Callable[[Any], T], default: T) -> T:
        if value is None:
            return default
        try:
            return parse(value)
        except ValueError as error:
            errors.append(FieldError(path, str(error)))
            return default

    after = options.after
    if fields.get("after") is not None:
        after, bad = _after_field(fields["after"])
        errors.extend(bad)
    retry = options.retry
    given = fields.get("retry")
    if given is not None and not isinstance(given, Mapping):
        errors.append(FieldError("retry", "must be an object with limit, on, exit_codes and backoff_seconds"))
    elif given is not None:
        retry = RetryPolicy(
            limit=read(given.get("limit"), "retry.limit", _retry_limit_field, retry.limit),
            on=_list_field(given.get("on"), "retry.on", _class, retry.on, errors),
            exit_codes=_list_field(
                given.get("exit_codes"), "retry.exit_codes", _exit_code_field, retry.exit_codes, errors
            ),
            backoff_s=read(given.get("backoff_seconds"), "retry.backoff_seconds", _backoff_field, retry.backoff_s),
        )
    result = replace(
        options,
        after=after,
        keep_if_never=read(
            fields.get("keep_if_never_satisfied"), "keep_if_never_satisfied", _bool_field, options.keep_if_never
        ),
        retry=retry,
        max_run_s=read(fields.get("max_run_seconds"), "max_run_seconds", _max_run_field, options.max_run_s),
        start_by=read(fields.get("start_by"), "start_by", lambda value: _start_by(_text(value), now), options.start_by),
        checkpoint_every_s=read(
            fields.get("checkpoint_every"), "checkpoint_every", checkpoint.every_field, options.checkpoint_every_s
        ),
        checkpoint_on_notice_s=read(
            fields.get("checkpoint_on_notice"),
            "checkpoint_on_notice",
            lambda value: checkpoint.notice_field(value, limits),
            options.checkpoint_on_notice_s,
        ),
        min_runtime_s=read(
            fields.get("min_runtime"),
            "min_runtime",
            lambda value: checkpoint.min_runtime_field(value, limits),
            options.min_runtime_s,
        ),
    )
    if errors:
        raise ManifestError(errors)
    return result


def _after_items(text: str, path: str) -> tuple[tuple[Dependency, ...], list[FieldError]]:
    dependencies, errors = _dependencies(text, path)
    errors.extend(FieldError(path, problem) for problem in _dependency_problems(dependencies))
    return tuple(dependencies), errors


def _dependencies(text: str, path: str) -> tuple[list[Dependency], list[FieldError]]:
    dependencies: list[Dependency] = []
    errors: list[FieldError] = []
    for item in _split(text):
        condition, target = item.split(":", 1) if ":" in item else ("ok", item)
        condition, target = condition.strip(), target.strip()
        if condition not in CONDITIONS or not _TARGET.fullmatch(target) or len(target) > 253:
            errors.append(FieldError(path, f'"{item}" is not a dependency: {_DEPENDENCY_HELP}'))
        else:
            dependencies.append(Dependency(condition, target))
    return dependencies, errors


def _after_field(value: Any) -> tuple[tuple[Dependency, ...], list[FieldError]]:
    if isinstance(value, str):
        return _after_items(value, "after")
    if not isinstance(value, list):
        return (), [FieldError("after", f"must be a string or a list of strings: {_DEPENDENCY_HELP}")]
    dependencies: list[Dependency] = []
    errors: list[FieldError] = []
    for index, item in enumerate(value):
        if not isinstance(item, str):
            errors.append(FieldError(f"after[{index}]", f"must be a string: {_DEPENDENCY_HELP}"))
            continue
        found, bad = _dependencies(item, f"after[{index}]")
        dependencies.extend(found)
        errors.extend(bad)
    errors.extend(FieldError("after", problem) for problem in _dependency_problems(dependencies))
    return tuple(dependencies), errors


def _dependency_problems(dependencies: list[Dependency]) -> list[str]:
    problems = []
    if len(dependencies) > MAX_DEPENDENCIES:
        problems.append(f"{len(dependencies)} dependencies: at most {MAX_DEPENDENCIES}")
    seen: set[str] = set()
    for dependency in dependencies:
        if dependency.target in seen:
            problems.append(f'"{dependency.target}" is named twice: one condition per job')
        seen.add(dependency.target)
    return problems


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",")] if text.strip() else []


def _boolean(text: str) -> bool:
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise ValueError(f'"{text}" is not true or false')


def _retry_limit(text: str) -> int:
    if not text.strip().isdigit() or int(text) > MAX_RETRY_LIMIT:
        raise ValueError(f'"{text}" is not a number of retries: use a whole number from 0 to {MAX_RETRY_LIMIT}')
    return int(text)


def _class(name: Any) -> str:
    for cls in RETRIABLE_CLASSES:
        if isinstance(name, str) and name.strip().lower() == cls.lower():
            return cls
    if name == "DeadlineExceeded":
        raise ValueError("DeadlineExceeded is never retried: the max run time would mean nothing")
    raise ValueError(
        f'"{name}" is not a failure class: use {", ".join(RETRIABLE_CLASSES[:-1])} or {RETRIABLE_CLASSES[-1]}'
    )


def _classes(names: list[str]) -> list[str]:
    problems, classes = [], []
    for name in names:
        try:
            classes.append(_class(name))
        except ValueError as error:
            problems.append(str(error))
    if problems:
        raise ValueError("; ".join(problems))
    return classes


def _exit_code(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 255:
        raise ValueError(f'"{text}" is not an exit code: use whole numbers from 1 to 255')
    return int(text)


def _exit_codes(texts: list[str]) -> list[int]:
    problems, codes = [], []
    for text in texts:
        try:
            codes.append(_exit_code(text))
        except ValueError as error:
            problems.append(str(error))
    if problems:
        raise ValueError("; ".join(problems))
    return codes


def _backoff(text: str) -> float:
    seconds = parse_duration(text)
    if seconds is None or seconds > MAX_BACKOFF_S:
        raise ValueError(f'"{text}" is not a backoff: use a duration up to 1h, such as 30s, 5m or 1h')
    return seconds


def _max_run(text: str) -> float:
    seconds = parse_duration(text)
    if seconds is None or seconds > MAX_RUN_S:
        raise ValueError(f'"{text}" is not a max run time: use a duration up to 366d, such as 90m, 12h or 2d')
    return seconds


def _start_by(text: str, now: float) -> float:
    """An RFC 3339 time, or a duration counted from now (the submission)."""
    seconds = parse_duration(text)
    if seconds is not None:
        return now + seconds
    if not _RFC3339.fullmatch(text.strip()):
        raise ValueError(
            f'"{text}" is not a start deadline: use an RFC 3339 time such as 2025-06-01T18:00:00Z, or a duration such as 2h'
        )
    at = datetime.fromisoformat(text.strip().upper().replace("Z", "+00:00")).timestamp()
    if at <= now:
        raise ValueError(f'"{text}" is in the past: a job still queued then would be cancelled at once')
    return at


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string: an RFC 3339 time such as 2025-06-01T18:00:00Z")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValueError("must be a number")
    return float(value)


def _retry_limit_field(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RETRY_LIMIT:
        raise ValueError(f"must be a whole number from 0 to {MAX_RETRY_LIMIT}")
    return value


def _exit_code_field(value: Any) -> int:
    if isinstance(value, str):
        return _exit_code(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 255:
        raise ValueError(f"{value!r} is not an exit code: use whole numbers from 1 to 255")
    return value


def _backoff_field(value: Any) -> float:
    seconds = _number(value)
    if not 0 < seconds <= MAX_BACKOFF_S:
        raise ValueError(f"must be more than 0 and at most {MAX_BACKOFF_S:g} seconds")
    return seconds


def _max_run_field(value: Any) -> float:
    seconds = _number(value)
    if not 0 < seconds <= MAX_RUN_S:
        raise ValueError(f"must be more than 0 and at most {MAX_RUN_S:.0f} seconds (366 days)")
    return seconds


def _bool_field(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _list_field(
    value: Any, path: str, parse: Callable[[Any], T], default: frozenset[T], errors: list[FieldError]
) -> frozenset[T]:
    """A list (or, as the CLI and query parameters send it, a comma-separated string)."""
    if value is None:
        return default
    items = _split(value) if isinstance(value, str) else value
    if not isinstance(items, list):
        errors.append(FieldError(path, "must be a list (or a comma-separated string)"))
        return default
    parsed: set[T] = set()
    for index, item in enumerate(items):
        try:
            parsed.add(parse(item))
        except ValueError as error:
            errors.append(FieldError(f"{path}[{index}]", str(error)))
    return frozenset(parsed)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)
