"""The dispatcher's view of the database, kept between cycles: the queued jobs, the active
(Released and Running) jobs and the Namespace rows, so that a cycle's snapshot clones them
instead of reading them.

One light query a cycle (cycle_cache.read_feed: the id, version and state of every job row
written since the last read's transaction horizon) keeps both kinds of job: a queued row
whose version moved is read again and its PendingRow rebuilt (cycle_cache.pending_rows), an
active row whose version moved is read again and its ActiveJob rebuilt (active.kept_active),
a row that left either set is dropped; every FULL_READ_EVERY_S the feed names every row the
cache keeps, so rows deleted outright go too. The Namespace rows are read again only when
the digest of their versions (quiet.Seen.tables, read at phase 0 anyway) moved, and on the
full reads. The nodes are kept by what each was made of (CycleCache.nodes, snapshot_phase).
tests/jobdash/test_dispatch_world_cache.py checks the kept view against one rebuilt from
nothing, after random sequences of writes.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobdash.dispatch.phases.active import ActiveJob, kept_active
from jobdash.dispatch.state.cycle_cache import CycleCache, PendingRow, pending_rows, read_feed
from jobdash.jobs.models import Namespace
from queueing import Workload

NAMESPACE_FIELDS = (
    "name",
    "weight",
    "policy",
    "guaranteed",
    "cohort",
    "borrowing_limit",
    "gpu_hour_budget",
    "over_budget",
)


@dataclass(frozen=True)
class Kept:
    """The kept view after a refresh. Its lists are the cycle's own; the objects in them
    are the cache's (ActiveJobs are frozen; the rows and PendingRows only the cycle's own
    status writes change, through CycleCache.written)."""

    namespaces: tuple[Mapping[str, Any], ...]
    rows: list[PendingRow]
    active: list[ActiveJob]
    # The parsed workloads of the jobs active before this refresh, and of those that left
    # the queue since (predictions.Learning learns run times of the finished among them).
    workloads_before: dict[int, Workload]


def refresh(cache: CycleCache, *, release_mode: str, tables: str | None) -> Kept:
    """The kept view brought up to date from one feed. `tables`: this cycle's digest of the
    namespace and lent pool rows (None: unknown, the namespaces are read)."""
    feed = read_feed(cache)
    rows = pending_rows(cache, release_mode=release_mode, feed=feed)
    before = cache.workloads
    active = kept_active(cache, feed)
    cache.workloads = {job.id: job.workload for job in active}
    if feed.full or tables is None or tables != cache.tables:
        cache.namespaces = tuple(Namespace.objects.values(*NAMESPACE_FIELDS))
        cache.tables = tables
    # (last: a refresh that failed before this point is made again from the same horizon)
    feed.taken(cache)
    return Kept(cache.namespaces, rows, active, before)
