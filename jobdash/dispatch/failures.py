"""A failing dispatcher, told once and recorded. A cycle that raised used to log its whole
traceback every tick and leave no other trace; now each distinct error (its first line) is
logged with its traceback once per run of failures, its repeats as one counted line, and
every failure is recorded in CycleFailures, from which jobs.dispatcher_health tells the
pages, /readyz, the API and /metrics that jobs are not being released.

Both drivers wrap their cycle in `FailureWatch.watch`: the loop without Celery (loop.py)
and the Celery task (tasks.py). A refused term (StaleTerm) is a leader stepping down, not
a failure: it passes through untouched."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django.db import DatabaseError, transaction

from jobdash.dispatch.state.clock import Clock
from jobdash.dispatch.writers import transitions
from jobdash.jobs.dispatcher_health import clock
from jobdash.jobs.models import Cycle, CycleFailures

log = logging.getLogger(__name__)
ERROR_CHARS = 500  # CycleFailures.error's length
REMEMBERED = 100  # distinct errors remembered in one run of failures (their repeats counted)


class CycleFailed(Exception):
    """A cycle failed; the watch has logged and recorded it. Its text: the error's first line."""


def first_line(error: BaseException) -> str:
    """ "OperationalError: unrecognized token ":"": what an operator needs to recognise it."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text[:ERROR_CHARS]


class FailureWatch:
    """One per dispatcher process. What it remembers is only for the log; the record is
    the database's, shared by every process that runs cycles."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._in_a_row = 0
        self._since: datetime | None = None
        self._seen: dict[str, tuple[int, datetime]] = {}  # error -> (times in this run, first time)

    @contextmanager
    def watch(self, term: int) -> Iterator[None]:
        try:
            yield
        except transitions.StaleTerm:
            raise
        except Exception as error:
            line = first_line(error)
            self._tell(line, error)
            record_failure(term, line, self.clock.now())
            raise CycleFailed(line) from error
        else:
            self._completed()

    def _tell(self, line: str, error: Exception) -> None:
        now = self.clock.now()
        if not self._in_a_row:
            self._since = now
        self._in_a_row += 1
        times, first = self._seen.get(line, (0, now))
        if not times and len(self._seen) >= REMEMBERED:
            self._seen.pop(next(iter(self._seen)))
        self._seen[line] = (times + 1, first)
        if times:
            log.error("cycle failed again (x%d since %s): %s", times + 1, clock(first), line)
        else:
            log.error("cycle failed: %s; retrying every tick, repeats counted, not traced", line, exc_info=error)

    def _completed(self) -> None:
        if self._in_a_row:
            log.warning("cycle completed after %d failed cycles since %s", self._in_a_row, clock(self._since))
        self._in_a_row, self._since = 0, None
        self._seen.clear()


def record_failure(term: int, line: str, at: datetime) -> None:
    """One more failure in CycleFailures: the streak goes on unless a cycle completed since
    the last failure. A database that refuses this too is only logged: /readyz and the
    banner still see no cycle completing, after the stall window."""
    try:
        with transaction.atomic():
            row, _ = CycleFailures.objects.select_for_update().get_or_create(id=1)
            completed = Cycle.objects.order_by("-started_at").values_list("started_at", flat=True).first()
            new_run = not row.streak or row.last_at is None or (completed is not None and completed >= row.last_at)
            row.streak = 1 if new_run else row.streak + 1
            row.since = at if new_run else row.since
            row.last_at, row.term, row.error, row.total = at, term, line, row.total + 1
            row.save()
    except DatabaseError as error:
        log.warning("could not record the failed cycle: %s", first_line(error))
