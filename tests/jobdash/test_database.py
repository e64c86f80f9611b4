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
