"""Logs through structlog, one line per record: JSON (JOBDASH_LOG_FORMAT=json, the deployment's)
or readable text (console: `make run`, tests).

stdlib loggers (`log.info("...%s", x)`, Django's, Celery's) and structlog's go through the
same handler and ProcessorFormatter, so every line carries the same fields: timestamp,
level, logger, event, and what the context holds. The dispatcher binds the leader's
`term` for each cycle (contextvars) and passes `job_id` / `namespace` with its log calls
(`extra=logs.job(...)`)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

FORMATS = ("console", "json")


def _shared() -> list[Any]:
    """The processors every record goes through, whether from stdlib logging or structlog."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def formatter(fmt: str) -> structlog.stdlib.ProcessorFormatter:
    if fmt == "json":
        renderers: list[Any] = [
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=False),
        ]
    else:
        renderers = [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_shared(),
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderers],
    )


class ClientErrorOneLine(logging.Filter):
    """A 4xx response logs one line, not a traceback. Django's `django.request` logs the
    PermissionDenied, Http404 or BadRequest behind a 4xx with the exception attached, which
    the console renders as a traceback: noise for what is the client's doing, not a fault.
    The exception's message (written for the person refused) ends the line instead; a 5xx
    keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500 and record.exc_info:
            error = record.exc_info[1]
            reason = error.args[0] if error is not None and error.args else None
            if isinstance(reason, str) and reason:  # (a Resolver404's argument is a dict of routes)
                record.msg = f"{record.msg} ({reason.replace('%', '%%')})"
            record.exc_info, record.exc_text = None, None
        return True


def configure(fmt: str, level: str = "INFO") -> dict:
    """Configure structlog for `fmt`, and return the LOGGING dict (settings.LOGGING) whose
    one handler renders stdlib records the same way."""
    structlog.configure(
        processors=[
            *_shared(),
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"structlog": {"()": formatter, "fmt": fmt}},
        "filters": {"client_error_one_line": {"()": ClientErrorOneLine}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structlog"}},
        "loggers": {"django.request": {"filters": ["client_error_one_line"]}},
        "root": {"handlers": ["console"], "level": level},
    }


def job(job_id: int, namespace: str | None = None) -> dict[str, Any]:
    """`extra=` for a log call about one job: its id and namespace in the line's fields."""
    return {"job_id": job_id, "namespace": namespace} if namespace else {"job_id": job_id}


def bind_term(term: int | None) -> None:
    """The leader's term on every line this thread (or task) logs from now on."""
    structlog.contextvars.bind_contextvars(term=term)


def get_logger(name: str) -> Any:
    return structlog.stdlib.get_logger(name)
