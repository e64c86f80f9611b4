"""Retention (issue 37): finished jobs older than JOBDASH_RETENTION_DAYS are archived with their
events and dependency rows (archive.py) and removed, a batch of BATCH jobs per transaction.

A batch's job rows are locked (FOR UPDATE SKIP LOCKED) only from its selection to its commit,
and every row that references a job is deleted by an index on its job column (the constraints
PostgreSQL checks at commit use the same ones), so no lock is held long and no table is
scanned. Kept: a job another active job depends on, and a job with an event the usage fold
has not passed yet (UsageMark.event_id): its hours must be in UsageDay before its timeline
goes. UsageDay itself is never touched."""

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from jobdash.jobs.models import (
    ACTIVE_STATES,
    FINISHED_STATES,
    EventOutbox,
    Job,
    JobDependency,
    JobEvent,
    Namespace,
    PodGroupMember,
    QueuedMirror,
)

from . import archive
from .models import Archive, UsageMark

log = logging.getLogger(__name__)
BATCH = 5000

_JOB = Job._meta.db_table
_EVENT = JobEvent._meta.db_table
_DEPENDENCY = JobDependency._meta.db_table

# Every table with a foreign key to a job, and its column: deleted before the jobs (Django's
# CASCADE is the ORM's, not the database's). tests/jobdash/test_retention.py checks that this
# names every such constraint and that each column leads an index.
REFERENCES = (
    (QueuedMirror._meta.db_table, "job_id"),
    (PodGroupMember._meta.db_table, "job_id"),
    (_DEPENDENCY, "job_id"),
    (_DEPENDENCY, "on_id"),
    (_EVENT, "job_id"),
)
# Links without a constraint (Django's SET_NULL): cleared on the jobs that point at a removed one.
SELF_LINKS = ("preempted_for_id", "preempted_by_id")

# A row's version: every update of a row makes a new one, elsewhere (xmin and ctid).
_VERSION = "j.xmin::text || ' ' || j.ctid::text"
_ELIGIBLE = f"""
    FROM {_JOB} j
    WHERE j.state = ANY(%(finished)s) AND j.finished_at < %(cutoff)s
      AND NOT EXISTS (SELECT 1 FROM {_EVENT} e WHERE e.job_id = j.id AND e.id > %(mark)s)
      AND NOT EXISTS (
        SELECT 1 FROM {_DEPENDENCY} d JOIN {_JOB} a ON a.id = d.job_id
        WHERE d.on_id = j.id AND a.state = ANY(%(active)s))
"""


@dataclass
class Sweep:
    """What one sweep did (or, dry, would do)."""

    cutoff: datetime
    mark: int
    jobs: int = 0
    events: int = 0
    batches: int = 0
    longest_transaction_s: float = 0.0  # the longest any job row was locked
    files: dict[str, int] = field(default_factory=dict)  # path (or month, dry) -> jobs

    def as_dict(self) -> dict:
        return {
            "cutoff": self.cutoff.isoformat(),
            "usage_mark": self.mark,
            "jobs": self.jobs,
            "events": self.events,
            "batches": self.batches,
            "longest_transaction_s": round(self.longest_transaction_s, 3),
            "files": self.files,
        }


def _params(cutoff: datetime, mark: int) -> dict:
    return {
        "finished": [str(s) for s in FINISHED_STATES],
        "active": [str(s) for s in ACTIVE_STATES],
        "cutoff": cutoff,
        "mark": mark,
    }


def _mark() -> int:
    return UsageMark.objects.filter(id=1).values_list("event_id", flat=True).first() or 0


def sweep(
    days: int | None = None, *, dry_run: bool = False, batch: int = BATCH, directory: Path | None = None
) -> Sweep:
    """Archive and remove the finished jobs older than `days` (JOBDASH_RETENTION_DAYS; 0:
    nothing goes). Dry: count them by month, write and delete nothing."""
    days = settings.JOBDASH_RETENTION_DAYS if days is None else days
    done = Sweep(cutoff=timezone.now() - timedelta(days=days), mark=_mark())
    if days <= 0:
        return done
    params = _params(done.cutoff, done.mark)
    if dry_run:
        return _count(done, params)
    writer = _Writer(Path(directory or settings.JOBDASH_ARCHIVE_DIR))
    idle = 0
    while idle < 3:  # jobs held by someone else through three reads wait for the next sweep
        count = _batch(params, batch, writer, done)
        if not count:
            break
        idle = idle + 1 if count < 0 else 0
    done.files = {str(path): row.jobs for path, row in writer.rows.items()}
    if done.jobs:
        log.info(
            "retention: archived and removed %s jobs (%s events) finished before %s",
            done.jobs,
            done.events,
            done.cutoff,
        )
    return done


def _count(done: Sweep, params: dict) -> Sweep:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT to_char(date_trunc('month', j.finished_at AT TIME ZONE 'UTC'), 'YYYY-MM'), count(*), "
            f"sum((SELECT count(*) FROM {_EVENT} e WHERE e.job_id = j.id)) {_ELIGIBLE} GROUP BY 1 ORDER BY 1",
            params,
        )
        for month, jobs, events in cursor.fetchall():
            done.files[month] = jobs
            done.jobs += jobs
            done.events += int(events or 0)
    return done


class _Writer:
    """This sweep's files: one per month the jobs finished in, YYYY-MM.<n>.jsonl.gz, n the
    first number no earlier sweep used; its Archive row committed before anything is written
    to it (outside any batch), so every file has one and `archive.read` trusts its counts."""

    def __init__(self, directory: Path):
        self.directory = directory.resolve()
        self.paths: dict[date, Path] = {}
        self.rows: dict[Path, Archive] = {}

    def open(self, month: date) -> None:
        n = 1
        while (path := self.directory / f"{month:%Y-%m}.{n}.jsonl.gz").exists() or Archive.objects.filter(
            path=str(path)
        ).exists():
            n += 1
        self.directory.mkdir(parents=True, exist_ok=True)
        path.touch()
        self.rows[path] = Archive.objects.create(month=month, path=str(path))
        self.paths[month] = path


def _month(moment: datetime) -> date:
    moment = moment.astimezone(UTC)
    return date(moment.year, moment.month, 1)


@dataclass
class _Line:
    month: date
    data: bytes
    events: int


def _batch(params: dict, size: int, writer: _Writer, done: Sweep) -> int:
    """One batch: up to `size` eligible jobs read and encoded without a lock, then in one
    short transaction those still as read locked, appended to their files, deleted with what
    references them, and counted in their files' rows. The jobs removed, 0 when none is left."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT j.id, {_VERSION}, j.finished_at {_ELIGIBLE} LIMIT %(limit)s", {**params, "limit": size})
        read = cursor.fetchall()
    if not read:
        return 0
    for month in {_month(finished) for *_, finished in read} - writer.paths.keys():
        writer.open(month)
    versions = {job_id: version for job_id, version, _ in read}
    lines = _records(list(versions))
    members = _members(lines)  # compressed now, outside the lock, for when every job is still as read
    written: list[tuple[Path, int]] = []
    started = time.monotonic()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                # Rechecked under the lock: a job written since (a new version, a new event,
                # an active dependent) or held by someone else waits for another sweep.
                cursor.execute(
                    f"SELECT j.id, {_VERSION} {_ELIGIBLE} AND j.id = ANY(%(ids)s) FOR UPDATE OF j SKIP LOCKED",
                    {**params, "ids": list(versions)},
                )
                ids = sorted(job_id for job_id, version in cursor.fetchall() if versions[job_id] == version)
            if len(ids) < len(versions):
                members = _members({job_id: lines[job_id] for job_id in ids})
            for month, (data, _, _) in members.items():
                path = writer.paths[month]
                written.append((path, archive.append_member(path, data)))
            _delete(ids)
            for month, (_, jobs, events) in members.items():
                row = writer.rows[writer.paths[month]]
                Archive.objects.filter(id=row.id).update(jobs=row.jobs + jobs, events=row.events + events)
    except BaseException:
        for path, size_before in written:  # the batch did not commit: neither does its archive
            archive.truncate(path, size_before)
        raise
    done.longest_transaction_s = max(done.longest_transaction_s, time.monotonic() - started)
    done.batches += 1
    for month, (_, jobs, events) in members.items():
        row = writer.rows[writer.paths[month]]
        row.jobs += jobs
        row.events += events
        done.events += events
    done.jobs += len(ids)
    # Every job read was eligible: one that was not removed is kept only for now (written or
    # locked meanwhile); -1 asks for the next batch without counting this one as the end.
    return len(ids) or -1


def _members(lines: dict[int, _Line]) -> dict[date, tuple[bytes, int, int]]:
    """Per month: one gzip member of its lines, the jobs in it, their events."""
    by_month: dict[date, list[_Line]] = {}
    for job_id in sorted(lines):
        by_month.setdefault(lines[job_id].month, []).append(lines[job_id])
    return {
        month: (archive.member([line.data for line in group]), len(group), sum(line.events for line in group))
        for month, group in by_month.items()
    }


def _records(ids: list[int]) -> dict[int, _Line]:
    """Each job's archive line: its row, its namespace's name, its events and dependency rows,
    made into JSON by PostgreSQL (a tenth of the time the ORM and json.dumps take)."""
    dependency = "jsonb_build_object('id', d.id, 'job_id', d.job_id, 'on_id', d.on_id, 'condition', d.condition)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT j.id, j.finished_at, x.events, (to_jsonb(j) - 'changed_xid' || jsonb_build_object(
                    'namespace', n.name,
                    'events', x.timeline,
                    'dependencies', (SELECT coalesce(jsonb_agg({dependency} ORDER BY d.id), '[]')
                                     FROM {_DEPENDENCY} d WHERE d.job_id = j.id),
                    'dependents', (SELECT coalesce(jsonb_agg({dependency} ORDER BY d.id), '[]')
                                   FROM {_DEPENDENCY} d WHERE d.on_id = j.id)))::text
                FROM {_JOB} j JOIN {Namespace._meta.db_table} n ON n.id = j.namespace_id,
                LATERAL (SELECT count(*) AS events, coalesce(jsonb_agg(to_jsonb(e) ORDER BY e.created_at, e.id), '[]')
                         AS timeline FROM {_EVENT} e WHERE e.job_id = j.id) x
                WHERE j.id = ANY(%s)""",
            [ids],
        )
        return {
            job_id: _Line(_month(finished), line.encode() + b"\n", events)
            for job_id, finished, events, line in cursor.fetchall()
        }


def _delete(ids: list[int]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {EventOutbox._meta.db_table} WHERE event_id IN (SELECT id FROM {_EVENT} WHERE job_id = ANY(%s))",
            [ids],
        )
        for table, column in REFERENCES:
            cursor.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", [ids])
        for column in SELF_LINKS:
            cursor.execute(f"UPDATE {_JOB} SET {column} = NULL WHERE {column} = ANY(%s)", [ids])
        cursor.execute(f"DELETE FROM {_JOB} WHERE id = ANY(%s)", [ids])
