"""The archive files of retention: one JSON object per job (its row's fields, its namespace's
name, its events and its dependency rows), gzip-compressed, one file per sweep and month.

A sweep appends each batch as its own gzip member and fsyncs it before the batch's delete
commits; the batch's counts go into the file's `Archive` row in that same transaction. So
the first `Archive.jobs` objects of a file are exactly the jobs deleted; a sweep killed
between writing and committing leaves a complete or truncated last member whose jobs are
still in the database (the next sweep archives them again, in a file of its own), and
`read` stops at the committed count."""

import gzip
import json
import os
import zlib
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from django.db import models

from jobdash.jobs.models import Job, JobEvent

from .models import Archive

_JOB_TIMES = frozenset(f.attname for f in Job._meta.concrete_fields if isinstance(f, models.DateTimeField))
_EVENT_TIMES = frozenset(f.attname for f in JobEvent._meta.concrete_fields if isinstance(f, models.DateTimeField))


def json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def decode(line: bytes | str) -> dict:
    """A job back as written, its times as datetimes again (the archive holds ISO strings)."""
    record = json.loads(line)
    for name in _JOB_TIMES:
        if record.get(name) is not None:
            record[name] = datetime.fromisoformat(record[name])
    for event in record["events"]:
        for name in _EVENT_TIMES:
            if event.get(name) is not None:
                event[name] = datetime.fromisoformat(event[name])
    return record


def member(lines: list[bytes]) -> bytes:
    """`lines` as one gzip member. Level 1: most of the size saving at a fraction of the time."""
    return gzip.compress(b"".join(lines), compresslevel=1)


def append_member(path: Path, data: bytes) -> int:
    """Append a gzip member, on disk when this returns; the file's size before it (what to
    truncate to when its batch does not commit)."""
    with open(path, "ab") as file:
        size = file.tell()
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    return size


def truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as file:
        file.truncate(size)
        file.flush()
        os.fsync(file.fileno())


def _lines(path: Path) -> Iterator[bytes]:
    with gzip.open(path, "rb") as file:
        try:
            yield from file
        except (EOFError, zlib.error, gzip.BadGzipFile):
            return  # a last member cut short by a killed sweep: its batch never committed


def read(path: Path | str) -> Iterator[dict]:
    """The jobs archived in a file, as `decode` gives them: only those whose deletion
    committed when the file has its `Archive` row, every complete line otherwise (a file
    copied elsewhere)."""
    path = Path(path)
    committed = Archive.objects.filter(path=str(path.resolve())).values_list("jobs", flat=True).first()
    for count, line in enumerate(_lines(path)):
        if committed is not None and count >= committed:
            return
        if line.endswith(b"\n"):
            yield decode(line)
