"""The job table's partial indexes still serve the reads they exist for. A partial index
is used only when the query's conditions imply its own; were a read to lose that, PostgreSQL
would scan the whole table instead, silently. With sequential scans and sorts disabled,
the plan names the index only if it can use it."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobdash.jobs.estimates import estimate_record
from jobdash.jobs.models import Job


def _plan(queryset) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")  # (an index that gives the order wins: no flaky choice)
        sql, params = queryset.query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs_job'")
        return dict(cursor.fetchall())


@pytest.mark.django_db
def test_the_start_time_calibration_reads_latest_starts_through_the_partial_index():
    mark = timezone.now() - timedelta(minutes=5)
    starts = Job.objects.filter(started_at__isnull=False, preemptions=0, started_at__gte=mark).order_by("started_at")
    # ("Index Scan using job_started on jobs_job", or "Bitmap Index Scan on job_ns_started":
    # both are partial, either proves the read implies their condition)
    assert re.search(r"Index.* (using|on) job_(ns_)?started\b", _plan(starts.values_list("id", "started_at")))
    assert "WHERE (started_at IS NOT NULL)" in _indexes()["job_started"]


@pytest.mark.django_db
def test_a_namespace_track_record_reads_through_the_partial_index(team_a):
    rows = (
        Job.objects.filter(started_at__isnull=False, eta_first__isnull=False, namespace=team_a)
        .order_by("-started_at", "-id")
        .values_list("started_at", "eta_first", "eta_first_late")
    )
    assert re.search(r"Index.* (using|on) job_(ns_)?started\b", _plan(rows))
    assert estimate_record(team_a).jobs == 0


@pytest.mark.django_db
def test_preemption_links_are_indexed_only_where_set():
    indexes = _indexes()
    assert "WHERE (preempted_for_id IS NOT NULL)" in indexes["job_preempted_for"]
    assert "WHERE (preempted_by_id IS NOT NULL)" in indexes["job_preempted_by"]
    assert "job_preempted_for" in _plan(Job.objects.filter(preempted_for_id=7).values_list("id"))


@pytest.mark.django_db
def test_a_namespace_jobs_are_found_through_an_index_that_starts_with_it(team_a):
    """No single-column index on namespace_id: the (namespace, ...) indexes serve it, also
    for the PROTECT check when a namespace is deleted."""
    assert not [name for name, definition in _indexes().items() if definition.endswith("(namespace_id)")]
    plan = _plan(Job.objects.filter(namespace=team_a).values_list("id"))
    assert "Index" in plan and "namespace_id" in plan
