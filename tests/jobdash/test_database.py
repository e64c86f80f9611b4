import pytest
from django.db import IntegrityError, connection, transaction

from jobdash.jobs.models import Job, State


def test_suite_runs_on_postgresql(db):
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("select version()")
        assert cursor.fetchone()[0].startswith("PostgreSQL")


def _job(namespace, name, state):
    return Job.objects.create(
        namespace=namespace,
        name=name,
        kind="TFJob",
        api_version="kubeflow.org/v1",
        manifest="x",
        parsed={},
        workload={},
        state=state,
        source="api",
    )


@pytest.mark.django_db
def test_database_allows_one_active_job_per_name(team_a):
    _job(team_a, "train", State.QUEUED)
    with pytest.raises(IntegrityError), transaction.atomic():
        _job(team_a, "train", State.RUNNING)


@pytest.mark.django_db
def test_finished_jobs_do_not_block_a_name(team_a, team_b):
    _job(team_a, "train", State.SUCCEEDED)
    _job(team_a, "train", State.FAILED)
    _job(team_a, "train", State.QUEUED)
    _job(team_b, "train", State.QUEUED)  # other namespace, same name
    assert Job.objects.filter(name="train").count() == 4


@pytest.mark.django_db
def test_database_refuses_unknown_state(team_a):
    with pytest.raises(IntegrityError), transaction.atomic():
        _job(team_a, "train", "Exploded")


@pytest.mark.django_db
def test_a_statement_run_again_and_again_is_prepared_once(team_a):
    """Parameters are bound by the server and psycopg prepares a statement from its fifth
    run: the dispatcher's cycle repeats the same statements, and planning them from their
    text every time was a sixth of PostgreSQL's statement time."""
    _job(team_a, "train", State.QUEUED)
    for _ in range(6):
        assert list(Job.objects.filter(state=State.QUEUED, namespace=team_a).values_list("name", flat=True)) == [
            "train"
        ]
    with connection.cursor() as cursor:
        cursor.execute("select statement from pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any('FROM "jobs_job"' in text and "$1" in text for text in prepared), prepared
