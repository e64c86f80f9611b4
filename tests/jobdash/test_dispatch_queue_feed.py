"""The queue read through the CycleCache on PostgreSQL: between full reads, only the rows
written since the last read's transaction horizon are looked at (migration 0012's stamp),
and a row written by a transaction that was still running at a read is not missed."""

import psycopg
import pytest
from django.db import connection

from jobdash.dispatch.state.cycle_cache import CycleCache, pending_rows, queued_rows
from jobdash.jobs import services
from jobdash.jobs.models import Job

from .dispatch_support import manifest

pytestmark = pytest.mark.django_db(transaction=True)


def other_session() -> psycopg.Connection:
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"], user=s["USER"], dbname=s["NAME"], autocommit=False)


def submit(user, name: str) -> Job:
    return services.job_submit(user=user, manifest=manifest(name, cpu="1"), source="api")


def names(rows) -> set[str]:
    return {Job.objects.get(pk=row["id"]).name for row in rows}


def test_only_what_changed_is_read_and_a_late_commit_is_not_missed(alice):
    a, b, c = submit(alice, "a"), submit(alice, "b"), submit(alice, "c")
    cache = CycleCache()
    rows, touched = queued_rows(cache)
    assert touched is None and names(rows) == {"a", "b", "c"}  # the first read is a full one
    first = {row["id"]: row for row in rows}

    rows, touched = queued_rows(cache)
    assert touched == set() and all(first[row["id"]] is row for row in rows)

    # A transaction that is running while the leader reads, and commits afterwards; one
    # that began after it has committed already (so the read's snapshot ends past both).
    with other_session() as writer:
        writer.execute("UPDATE jobs_job SET priority = 7 WHERE id = %s", [a.pk])
        Job.objects.filter(pk=c.pk).update(priority=3)
        rows, touched = queued_rows(cache)
        assert touched == {c.pk} and {row["id"]: row["priority"] for row in rows}[a.pk] == 0
        writer.commit()
    rows, touched = queued_rows(cache)
    assert touched == {a.pk}
    assert {row["id"]: row["priority"] for row in rows}[a.pk] == 7
    assert any(row is first[b.pk] for row in rows)  # the others are not read again

    services.job_cancel(job_id=b.pk, user=alice)
    d = submit(alice, "d")
    rows, touched = queued_rows(cache)
    assert touched == {b.pk, d.pk} and names(rows) == {"a", "c", "d"}

    # A row deleted outright leaves no stamp: the next full read drops it.
    Job.objects.filter(pk=c.pk).delete()
    rows, touched = queued_rows(cache)
    assert c.pk in {row["id"] for row in rows}
    cache.full_read_at = float("-inf")
    rows, touched = queued_rows(cache)
    assert touched is None and names(rows) == {"a", "d"}


def test_pending_rows_rebuild_only_the_jobs_that_changed(alice):
    a, b = submit(alice, "a"), submit(alice, "b")
    cache = CycleCache()
    built = {row.job.id: row for row in pending_rows(cache, release_mode="create")}
    assert set(built) == {a.pk, b.pk}
    # (Their predictions are stored with their first status; here, by hand.)
    Job.objects.filter(pk__in=[a.pk, b.pk]).update(prediction_source="test", predicted_duration_s=60.0)
    pending_rows(cache, release_mode="create")
    kept = {row.job.id: row for row in pending_rows(cache, release_mode="create")}
    assert cache.unpredicted == set()
    Job.objects.filter(pk=a.pk).update(priority=5)
    again = {row.job.id: row for row in pending_rows(cache, release_mode="create")}
    assert again[b.pk] is kept[b.pk]
    assert again[a.pk] is not kept[a.pk] and again[a.pk].job.priority == 5
    services.job_cancel(job_id=b.pk, user=alice)
    assert [row.job.id for row in pending_rows(cache, release_mode="create")] == [a.pk]


def test_an_edited_queued_manifest_reaches_the_leaders_cached_job(alice):
    """The edit drops the stored prediction; the leader predicts again, maybe the same, and
    must build the job from the workload it read again, not keep the one it held."""
    a = submit(alice, "a")
    cache = CycleCache()
    first = {row.job.id: row for row in pending_rows(cache, release_mode="create")}[a.pk]
    again = cache.learning.predict(first.job.workload, "team-a", "alice").median_s
    Job.objects.filter(pk=a.pk).update(prediction_source="test", predicted_duration_s=again)
    kept = {row.job.id: row for row in pending_rows(cache, release_mode="create")}[a.pk]
    assert kept.job.workload.pods == 1
    services.job_update_queued_manifest(job_id=a.pk, manifest=manifest("a", workers=3, cpu="1"), edited_by="alice")
    edited = {row.job.id: row for row in pending_rows(cache, release_mode="create")}[a.pk]
    assert edited.job.workload.pods == 3 and edited.job.demand["requests.cpu"] == 3000
