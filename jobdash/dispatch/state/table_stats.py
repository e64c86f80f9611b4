"""Fresh planner statistics for the jobs table, kept by the leader.

A queue table changes faster than autovacuum looks at it. Its launcher visits a database
once per `autovacuum_naptime` (a minute by default), so a fresh table (a new installation,
a burst of submissions after a quiet spell) goes a minute or more without statistics, and
PostgreSQL plans the cycle's reads of a few hundred rows as reads of the whole table: the
queue read by change stamp as a sequential scan (5,843 pages for 730 rows in the Kueue
baseline), the Released/Running jobs through an index on another column. The leader
applies autovacuum's own rule (the server's `autovacuum_analyze_threshold` and
`autovacuum_analyze_scale_factor`), only more often, and analyzes the table when it says
so, for the columns queries filter, join and sort on: the job's text and JSON (manifest,
parsed, workload, message, placement) are never compared, and analyzing them was nearly
all of an ANALYZE's second on 15,000 jobs. `SKIP_LOCKED`: if autovacuum is busy with the
table, it is not waited for.
"""

import time
from collections.abc import Callable

from django.db import connection, models, transaction

from jobdash.jobs.models import Job

CHECK_EVERY_S = 10.0
STATISTICS_TARGET = 10

_COUNTS = """
SELECT s.n_mod_since_analyze, current_setting('autovacuum_analyze_threshold')::float8
       + current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0)
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.relid = %s::regclass
"""


class TableStatistics:
    def __init__(self, every_s: float = CHECK_EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.every_s = every_s
        self.clock = clock
        self._next_check = float("-inf")
        self._modified_at_analyze = 0  # the table's modification counter when we last analyzed

    def refresh(self) -> bool:
        """Analyze the jobs table if autovacuum's rule says it is due; look at most once
        per `every_s`. Returns whether it analyzed."""
        now = self.clock()
        if now < self._next_check:
            return False
        self._next_check = now + self.every_s
        table = Job._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(_COUNTS, [table])
            counts = cursor.fetchone()
        if counts is None:
            return False
        modified, threshold = counts
        # Analyzing some columns leaves the table's counter as it was (only analyzing all of
        # them resets it, as autovacuum does): count from where it stood at our last.
        since = modified - self._modified_at_analyze if modified >= self._modified_at_analyze else modified
        if since <= threshold:
            return False
        with transaction.atomic(), connection.cursor() as cursor:
            # A sample of 3,000 rows, not 30,000: what these plans need is the share of
            # each state and the range of each stamp, not fine histograms; autovacuum's own
            # analyzes, when they come, use the server's target.
            cursor.execute(f"SET LOCAL default_statistics_target = {STATISTICS_TARGET}")
            cursor.execute(f"ANALYZE (SKIP_LOCKED) {_quote(table)} ({', '.join(map(_quote, _compared_columns()))})")
        self._modified_at_analyze = modified
        return True


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def _compared_columns() -> list[str]:
    columns = [
        column
        for field in Job._meta.concrete_fields
        if (column := field.column) and not isinstance(field, models.TextField | models.JSONField)
    ]
    return [*columns, "changed_xid"]  # (the change stamp: migration 0012, not a model field)
