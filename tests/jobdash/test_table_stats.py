"""The leader keeps the jobs table's planner statistics fresh (dispatch/state/table_stats.py),
against the harness's PostgreSQL: its statistics views are what is under test."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobdash.dispatch.state.table_stats import TableStatistics
from jobdash.jobs.submission import Submission, jobs_submit_many

from .dispatch_support import manifest

# Committed writes: the statistics count only those.
pytestmark = pytest.mark.django_db(transaction=True)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def submit(user, count: int, prefix: str) -> None:
    jobs_submit_many(user=user, submissions=[Submission(manifest(f"{prefix}-{i}")) for i in range(count)], source="api")
    with connection.cursor() as cursor:
        # A backend reports its counts at most once a second; a test does not wait for it.
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT 1")


def analyzed_columns() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT attname FROM pg_stats WHERE tablename = 'jobs_job'")
        return {name for (name,) in cursor.fetchall()}


def analyze_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'jobs_job'")
        return cursor.fetchone()[0]


@pytest.fixture
def fresh_table():
    """No statistics, as after installation (the test database is shared with other tests)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = 'jobs_job'::regclass")
        cursor.execute("SELECT pg_stat_reset_single_table_counters('jobs_job'::regclass)")


def test_a_table_changed_beyond_autovacuums_rule_is_analyzed_for_the_columns_queries_compare(user, fresh_table):
    clock = Clock()
    statistics = TableStatistics(every_s=10, clock=clock)
    submit(user, 80, "burst")  # beyond autovacuum's 50 rows on a table never analyzed
    before = analyze_count()
    assert statistics.refresh()
    assert analyze_count() == before + 1
    columns = analyzed_columns()
    assert {"state", "changed_xid", "namespace_id", "submitted_at"} <= columns
    assert not columns & {"manifest", "parsed", "workload"}  # never compared: not worth a second


def test_it_looks_at_most_once_per_interval_and_analyzes_again_only_after_more_changes(user, fresh_table):
    clock = Clock()
    statistics = TableStatistics(every_s=10, clock=clock)
    submit(user, 80, "first")
    assert statistics.refresh()
    submit(user, 80, "second")
    clock.now = 9.9
    with CaptureQueriesContext(connection) as queries:
        assert not statistics.refresh()
    assert not queries.captured_queries  # inside the interval: not even a look
    clock.now = 10.0
    assert statistics.refresh()  # 80 more rows: beyond 50 + 10 % of the 80 it counted
    clock.now = 20.0
    # Nothing changed since. The table's own counter still says 160 (analyzing some columns
    # does not reset it), so it counts from the value at its last analyze.
    before = analyze_count()
    assert not statistics.refresh()
    assert analyze_count() == before


def test_a_few_changes_on_an_analyzed_table_are_not_worth_an_analyze(user, fresh_table):
    clock = Clock()
    statistics = TableStatistics(every_s=10, clock=clock)
    submit(user, 200, "many")
    assert statistics.refresh()
    submit(user, 60, "few")  # 60 rows: below 50 + 10 % of 200
    clock.now = 10.0
    assert not statistics.refresh()
