"""What a leader keeps from one cycle for the next, and the queue read through it.

CycleCache holds the queued rows as last read (with their row versions), the PendingJob
made of each, the parsed workloads of the active jobs, and what the leader has learned of
run times and start estimates. queued_rows/pending_rows read the queue through it: on
PostgreSQL a cycle looks only at the rows written since the last read (by transaction
horizon), reads in full only those whose version it does not hold, and rebuilds only
their PendingRows; the cycle's own status writes are handed back to it
(CycleCache.written) instead of being read again.
"""

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import FloatField, Func, QuerySet, TextField
from django.db.models.functions import MD5, Cast

from jobdash.cluster import kinds
from jobdash.dispatch.state.predictions import Learning
from jobdash.dispatch.writers import bulk
from jobdash.jobs.models import Job, Namespace, State
from queueing import Reason, Workload, capabilities
from queueing.predictor import Prediction
from queueing.snapshot import Node, PendingJob

if TYPE_CHECKING:
    from jobdash.dispatch.phases.active import ActiveJob


def epoch(moment) -> float | None:
    return moment.timestamp() if moment is not None else None


def as_datetime(seconds: float | None) -> datetime | None:
    """epoch's inverse: seconds since the epoch as an aware UTC datetime."""
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)


class Epoch(Func):
    """A timestamp column as seconds since the epoch, computed by PostgreSQL."""

    output_field = FloatField()
    template = "date_part('epoch', %(expressions)s)"


def values_with_epochs(
    rows: QuerySet, fields: Iterable[str], times: Iterable[str], **expressions: Any
) -> list[dict[str, Any]]:
    """`rows.values(*fields, *times, **expressions)`, the `times` (timestamp columns) as
    seconds since the epoch (float or None), computed by the server: the timestamptz loader
    Django installs in psycopg is pure Python, and parsing the queue's timestamps every cycle
    was most of the snapshot's cost of reading it."""
    times = tuple(times)
    read = list(rows.values(*fields, **expressions, **{f"epoch_{name}": Epoch(name) for name in times}))
    for row in read:
        for name in times:
            row[name] = row.pop(f"epoch_{name}")
    return read


@dataclass
class PendingRow:
    """What the cycle needs of a queued job, plus its last written status (to skip unchanged rows)."""

    job: PendingJob
    position: int | None
    reason: str
    message: str
    eta: float | None
    eta_late: float | None = None
    eta_first_at: float | None = None  # when it was first given a start range (None: not yet)
    eta_first_late: float | None = None
    prediction: Prediction | None = None  # made this cycle, to be stored with the status


class CycleCache:
    """What one snapshot keeps for the next, because it never changes once built and
    building it is most of a snapshot's per-job cost:

    - the PendingJob of each queued job (its parsed workload and pod groups), rebuilt only
      when the row's priority, attempts, backoff or workload (its digest) change;
    - the active (Released/Running) jobs as ActiveJobs, read again only where their rows
      changed, with their parsed workloads;
    - the Namespace rows, read again when their versions move;
    - what the leader has learned of run times and start estimates (predictions.Learning).
    """

    def __init__(self) -> None:
        self._jobs: dict[int, tuple[tuple, PendingJob]] = {}
        # A job's workload never changes after submission: parsed once while it is active.
        self.workloads: dict[int, Workload] = {}
        # The queued rows as last read, with their versions (queued_rows, PostgreSQL).
        self.rows: dict[int, tuple[str, dict[str, Any]]] = {}
        # The PendingRow made of each queued row last time (pending_rows), with that row.
        self.pending: dict[int, tuple[dict[str, Any], PendingRow]] = {}
        # Jobs whose PendingRow carries a prediction not stored yet: built again until it is.
        self.unpredicted: set[int] = set()
        # The last read's transaction horizon, and when the whole queue was last read (queued_rows).
        self.horizon: int | None = None
        self.full_read_at = float("-inf")
        self.learning = Learning()
        # Each node's Node as the last snapshot made it, with what it was made of (snapshot_phase._nodes).
        self.nodes: dict[str, tuple[tuple, Node]] = {}
        # The Released and Running jobs: per id its row's version, its ActiveJob, its workload
        # as submitted (active.kept_active).
        self.active: dict[int, tuple[str, ActiveJob, Workload]] = {}
        # The Namespace rows as last read, and the digest of the namespace and lent pool rows
        # (quiet.Seen.tables) they were read at: read again when it moves (world.refresh).
        self.namespaces: tuple[Mapping[str, Any], ...] = ()
        self.tables: str | None = None

    @staticmethod
    def _version(row: Mapping[str, Any], drop_count: bool) -> tuple:
        preempting = row["reason"] == str(Reason.PREEMPTING)
        return (
            row["priority"],
            row["attempts"],
            row["backoff_until"],
            drop_count,
            row["preempted_by_id"],
            preempting,
            row["predicted_duration_s"],
            row["workload_digest"],
        )

    def fresh(self, row: Mapping[str, Any], *, drop_count: bool) -> bool:
        """Whether get(row) can answer without the row's workload."""
        cached = self._jobs.get(row["id"])
        return cached is not None and cached[0] == self._version(row, drop_count)

    def cached_workload(self, job_id: int) -> Workload | None:
        cached = self._jobs.get(job_id)
        return None if cached is None else cached[1].workload

    def workloads_of(self, job_ids: Iterable[int]) -> dict[int, Workload]:
        """The parsed workloads of these queued jobs that the cache holds."""
        found = {}
        for job_id in job_ids:
            cached = self._jobs.get(job_id)
            if cached is not None:
                found[job_id] = cached[1].workload
        return found

    def get(self, row: Mapping[str, Any], workload: Workload | None, *, drop_count: bool) -> PendingJob:
        """`workload`: the row's parsed workload; only read when the row is not fresh().
        `row`: pending_rows' (timestamps as seconds since the epoch)."""
        version = self._version(row, drop_count)
        cached = self._jobs.get(row["id"])
        if cached is not None and cached[0] == version:
            return cached[1]
        assert workload is not None  # (the caller parses it for every row not fresh)
        # In unsuspend mode the suspended object already exists and counts in quota used; so
        # does the object of a job preempted by suspending it.
        exists = drop_count or (row["preemptions"] and kinds.can_suspend(row["kind_key"]))
        demand = capabilities.waiting_demand(kinds.adapter(row["kind_key"]), workload, count_object=not exists)
        job = PendingJob(
            id=row["id"],
            namespace=row["namespace__name"],
            priority=row["priority"],
            submitted_at=row["submitted_at"],
            workload=workload,
            attempts=row["attempts"],
            backoff_until=row["backoff_until"],
            expected_duration=row["predicted_duration_s"],
            bound=_bound(row),
            demand=demand,
            preempted_by=row["preempted_by_id"],
            preempting=row["reason"] == str(Reason.PREEMPTING),
            group=row["workflow_id"],  # (an array's limit holds it: queueing/holds.py)
            # (the API's field, as its annotation would: it writes one when told, so lent nodes are its)
            checkpoints_on_notice=row["checkpoint_on_notice_s"] is not None,
            cluster=row["cluster"] if exists else "",  # (its object waits there: it goes back there)
        )
        self._jobs[row["id"]] = (version, job)
        return job

    def version(self, job_id: int) -> str | None:
        """The version of a queued row as last read (queued_rows; None off PostgreSQL)."""
        entry = self.rows.get(job_id)
        return None if entry is None else entry[0]

    def written(self, versions: Mapping[int, str], values: Mapping[int, Mapping[str, Any]]) -> None:
        """The cycle's own writes of queued rows (statuses): their new `versions` and the
        `values` written (datetimes), so that the next snapshot need not read them back."""
        for job_id, version in versions.items():
            entry = self.rows.get(job_id)
            if entry is None:
                continue
            row = entry[1]
            for name, value in values[job_id].items():
                if name in row:
                    row[name] = epoch(value) if name in _PENDING_TIMES else value
            self.rows[job_id] = (version, row)
            kept = self.pending.get(job_id)
            if kept is not None and kept[0] is row:
                pending = kept[1]
                pending.position, pending.reason, pending.message = row["position"], row["reason"], row["message"]
                pending.eta, pending.eta_late = row["eta"], row["eta_late"]
                pending.eta_first_at, pending.eta_first_late = row["eta_first_at"], row["eta_first_late"]
                if row["prediction_source"]:
                    pending.prediction = None  # stored

    def forget(self, ids: Iterable[int]) -> None:
        """These jobs left the queue."""
        for job_id in ids:
            entry = self._jobs.pop(job_id, None)
            if entry is not None:
                # Most jobs leave the queue by release: the snapshot wants the workload next.
                self.workloads.setdefault(job_id, entry[1].workload)


_PENDING_FIELDS = (
    "id",
    "namespace__name",
    "priority",
    "attempts",
    "position",
    "reason",
    "message",
    "preemptions",
    "kind_key",
    "preempted_by_id",
    "submitted_by_name",
    "predicted_duration_s",
    "predicted_p90_s",
    "predicted_tail_s",
    "prediction_source",
    "workflow_id",
    "checkpoint_on_notice_s",
    "cluster",
)


def _bound(row: Mapping[str, Any]) -> float | None:
    """What lent nodes judge the job by: its tail bound; inf if it has a prediction but no key
    with runs enough to bound its tail (stored as NULL); None: no prediction."""
    tail = row["predicted_tail_s"]
    return tail if tail is not None else (math.inf if row["predicted_p90_s"] is not None else None)


_PENDING_TIMES = ("submitted_at", "backoff_until", "eta", "eta_late", "eta_first_at", "eta_first_late")
# A queued job's workload changes when its held object is edited (jobs/queued_edit.py): its
# digest is part of the cached job's version, computed by the database for the rows read.
_DIGEST = {"workload_digest": MD5(Cast("workload", TextField()))}
FULL_READ_EVERY_S = 30.0  # the whole queue's versions read again (incremental reads between)


_ACTIVE = (State.RELEASED, State.RUNNING)
_FEED_STATES = (State.QUEUED, *_ACTIVE)  # a full read's: the rows the cache keeps


def _feed_query(full: bool) -> str:
    """The transaction horizon of the statement's snapshot (every transaction below it has
    ended), then per row its id, version (PostgreSQL's xmin and ctid: each update of a row
    makes a new version), namespace's name and state: of every Queued, Released and Running
    row (`full`), or of every row written at or after a given horizon. A row of nulls after
    the horizon when none matches."""
    job, namespace = Job._meta, Namespace._meta
    where = 'j."state" IN (%s, %s, %s)' if full else 'j."changed_xid" >= %s'
    return (
        f'SELECT h.x, j."id", {bulk.row_version("j")}, n."name", j."state" '
        "FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS x) h "
        f'LEFT JOIN ("{job.db_table}" j JOIN "{namespace.db_table}" n ON n."id" = j."namespace_id") ON {where}'
    )


@dataclass(frozen=True)
class Feed:
    """One cycle's look at the job rows (_feed_query): the queue and the active jobs are
    both kept from it, so a cycle asks once. The horizon moves (taken) only once both took
    what they need: a read that fails half way is made again from the same horizon."""

    horizon: int
    seen: list[tuple[int, str, str, str]]  # (id, version, namespace's name, state)
    full: bool  # every Queued, Released and Running row, not only those written since
    at: float  # monotonic

    def taken(self, cache: "CycleCache") -> None:
        cache.horizon = self.horizon
        if self.full:
            cache.full_read_at = self.at


def read_feed(cache: "CycleCache") -> Feed:
    """The rows written since the last feed's horizon, or every FULL_READ_EVERY_S the
    versions of every row the cache keeps (which also drops rows deleted outright and picks
    up renamed namespaces)."""
    now = time.monotonic()
    full = cache.horizon is None or now - cache.full_read_at >= FULL_READ_EVERY_S
    with connections[Job.objects.db].cursor() as cursor:
        cursor.execute(_feed_query(full), list(_FEED_STATES) if full else [cache.horizon])
        feed = cursor.fetchall()
    seen = [(job_id, version, namespace, state) for _, job_id, version, namespace, state in feed if job_id is not None]
    return Feed(feed[0][0], seen, full, now)


def queued_rows(cache: CycleCache, feed: Feed | None = None) -> tuple[list[dict[str, Any]], set[int] | None]:
    """The Queued rows (_PENDING_FIELDS, _PENDING_TIMES as seconds since the epoch), and the
    ids of the rows that changed or left the queue since the last call (None: any may have).
    `feed`: this cycle's (read_feed; its caller takes it); None: one is read and taken here.

    A row is read in full only when its version is not the one the cache
    holds, and most calls look only at the rows written since the last one: every write
    stamps a job row with its transaction's id (migration 0012), and a call reads the rows
    stamped at or after the last call's horizon, the oldest transaction still running then
    (one that committed since was running then, or began later). Every FULL_READ_EVERY_S
    the versions of the whole queue are read instead. A queue of thousands costs what
    changed, not its length."""
    own = feed is None
    if feed is None:
        feed = read_feed(cache)
    queued = Job.objects.filter(state=State.QUEUED)
    seen = feed.seen
    known = cache.rows
    changed = [
        job_id
        for job_id, version, _ns, state in seen
        if state == State.QUEUED and (known.get(job_id) or ("",))[0] != version
    ]
    fetched: dict[int, dict[str, Any]] = {}
    if changed:
        # Still Queued: a row that left the queue since the light query is not this cycle's.
        changed_rows = queued.filter(bulk.pk_among(changed))
        for row in values_with_epochs(changed_rows, _PENDING_FIELDS, _PENDING_TIMES, **_DIGEST):
            fetched[row["id"]] = row
    if own:
        feed.taken(cache)
    if not feed.full:
        touched: set[int] = set()
        for job_id, version, namespace, state in seen:
            current = fetched.get(job_id)
            if current is not None:
                current["namespace__name"] = namespace
                known[job_id] = (version, current)
                touched.add(job_id)
            elif (state != State.QUEUED or job_id in changed) and known.pop(job_id, None) is not None:
                touched.add(job_id)  # left the queue (perhaps between the two reads)
        return [row for _version, row in known.values()], touched
    rows, fresh = [], {}
    for job_id, version, namespace, state in seen:
        if state != State.QUEUED:
            continue
        current = fetched.get(job_id)
        if current is None:
            entry = known.get(job_id)
            if entry is None or entry[0] != version:
                continue  # left the queue between the two reads
            current = entry[1]
        current["namespace__name"] = namespace
        fresh[job_id] = (version, current)
        rows.append(current)
    cache.rows = fresh
    return rows, None


def queue_unchanged(cache: CycleCache) -> bool:
    """Whether no job row was written since the last read but by this leader's own status
    writes (queued rows whose versions it holds); if so the read's horizon moves on, as
    queued_rows would have moved it, having nothing to read. False after a read that was
    never made, and while predictions wait to be stored."""
    if cache.horizon is None or cache.unpredicted:
        return False
    with connections[Job.objects.db].cursor() as cursor:
        cursor.execute(_feed_query(False), [cache.horizon])
        feed = cursor.fetchall()
    known = cache.rows
    for _horizon, job_id, version, _namespace, state in feed:
        if job_id is not None and (state != State.QUEUED or (known.get(job_id) or ("",))[0] != version):
            return False
    cache.horizon = feed[0][0]
    return True


def pending_rows(cache: CycleCache, *, release_mode: str, feed: Feed | None = None) -> list[PendingRow]:
    """The queued jobs' PendingRows, rebuilt only where their rows changed (queued_rows)."""
    read, touched = queued_rows(cache, feed)
    previous = cache.pending
    if touched is None:
        # A full read: a row that is not the very dict queued_rows returned last time is new.
        rows_by_id = {row["id"]: row for row in read}
        touched = {job_id for job_id, row in rows_by_id.items() if (previous.get(job_id) or (None,))[0] is not row}
        touched |= previous.keys() - rows_by_id.keys()
    else:
        rows_by_id = {job_id: cache.rows[job_id][1] for job_id in touched | cache.unpredicted if job_id in cache.rows}
    # Changed rows are built again, and so are those whose prediction is not stored yet.
    rebuild = [rows_by_id[job_id] for job_id in touched | cache.unpredicted if job_id in rows_by_id]
    built = _build(cache, rebuild, release_mode == "unsuspend")
    cache.unpredicted = {job_id for job_id, pending in built.items() if pending.prediction is not None}
    gone = [job_id for job_id in touched if job_id not in rows_by_id]
    for job_id in gone:
        previous.pop(job_id, None)
    cache.forget(gone)
    for row in rebuild:
        previous[row["id"]] = (row, built[row["id"]])
    return [pending for _row, pending in previous.values()]


def _build(cache: CycleCache, rows: list[dict[str, Any]], drop_count: bool) -> dict[int, PendingRow]:
    """The PendingRow of each row, its workload parsed only where the cache cannot answer."""
    unpredicted = {row["id"] for row in rows if not row["prediction_source"]}
    stale = [
        row["id"]
        for row in rows
        if not cache.fresh(row, drop_count=drop_count)
        or (row["id"] in unpredicted and cache.cached_workload(row["id"]) is None)
    ]
    workloads = {
        job_id: Workload.from_json(data)
        for job_id, data in (Job.objects.filter(pk__in=stale).values_list("id", "workload") if stale else ())
    }
    built: dict[int, PendingRow] = {}
    for row in rows:
        prediction = None
        if row["id"] in unpredicted:
            # First sight: predicted once, stored with its status, its expected duration from now on.
            workload = workloads.get(row["id"]) or cache.cached_workload(row["id"])
            assert workload is not None
            prediction = cache.learning.predict(workload, row["namespace__name"], row["submitted_by_name"])
            row["predicted_duration_s"] = prediction.median_s
            row["predicted_p90_s"] = prediction.p90_s
            row["predicted_tail_s"] = prediction.tail_s
        built[row["id"]] = PendingRow(
            cache.get(row, workloads.get(row["id"]), drop_count=drop_count),
            row["position"],
            row["reason"],
            row["message"],
            row["eta"],
            row["eta_late"],
            row["eta_first_at"],
            row["eta_first_late"],
            prediction,
        )
    return built
