"""services.job_submit_or_find: the webhook's idempotent intake, in the jobs service layer."""

import threading

import pytest
import yaml
from django.db import connection

from jobdash.jobs import hot_queries, services
from jobdash.jobs.exceptions import InvalidInput
from jobdash.jobs.models import Job, JobEvent, Namespace, State

from .conftest import KATIB, trial_tfjob


def submit(name="trial-1", namespace="team-a", **kwargs):
    text = kwargs.pop("text", None) or yaml.safe_dump(trial_tfjob(name, namespace))
    return services.job_submit_or_find(
        namespace=namespace, name=name, manifest=text, source="webhook", submitted_by_name=KATIB, **kwargs
    )


@pytest.mark.django_db
def test_first_submits_then_finds(team_a):
    job, created = submit()
    assert created and job.state == State.QUEUED and job.submitted_by_name == KATIB
    again, created_again = submit()
    assert (again.pk, created_again) == (job.pk, False)


@pytest.mark.django_db
def test_a_retry_that_finds_its_job_costs_one_query_and_never_builds_the_text(team_a, django_assert_num_queries):
    submit()

    def text():
        raise AssertionError("built the manifest for a retry")

    with django_assert_num_queries(1):
        job, created = services.job_submit_or_find(
            namespace="team-a", name="trial-1", manifest=text, source="webhook", submitted_by_name=KATIB
        )
    assert not created and job.namespace.name == "team-a"  # namespace came with the same query


@pytest.mark.django_db
def test_unmanaged_namespace(team_a):
    with pytest.raises(services.NamespaceNotManaged):
        submit(namespace="kubeflow")
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_dry_run_validates_and_writes_nothing(team_a):
    assert submit(dry_run=True) == (None, True)
    with pytest.raises(InvalidInput):
        submit(dry_run=True, text="apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: trial-1}\nspec: {}\n")
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0


@pytest.mark.django_db
def test_a_manifest_naming_another_job_is_refused_and_rolled_back(team_a):
    with pytest.raises(InvalidInput) as error:
        submit(name="trial-1", text=yaml.safe_dump(trial_tfjob("trial-2")))
    assert error.value.problems[0].path == "metadata.name"
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0


@pytest.mark.django_db
def test_finished_jobs_do_not_count(team_a):
    job, _ = submit()
    Job.objects.filter(pk=job.pk).update(state=State.CANCELLED)
    new, created = submit()
    assert created and new.pk != job.pk


@pytest.mark.django_db(transaction=True)
def test_racing_retries_make_one_job(monkeypatch):
    """Every thread looks first and finds nothing, then all insert at once: the database's
    index lets one win, the others find the winner."""
    Namespace.objects.create(name="team-a")
    text = yaml.safe_dump(trial_tfjob("trial-1"))
    threads, results, errors = 6, [], []
    barrier = threading.Barrier(threads)
    looked = threading.local()
    lookup = hot_queries.lookup

    def all_look_before_anyone_inserts(namespace, name):
        found = lookup(namespace, name)
        if not getattr(looked, "once", False):
            looked.once = True
            barrier.wait(10)
        return found

    monkeypatch.setattr(hot_queries, "lookup", all_look_before_anyone_inserts)

    def retry():
        try:
            results.append(
                services.job_submit_or_find(
                    namespace="team-a", name="trial-1", manifest=text, source="webhook", submitted_by_name=KATIB
                )
            )
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    workers = [threading.Thread(target=retry) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert errors == []
    assert len({job.pk for job, _ in results}) == 1 and sum(created for _, created in results) == 1
    assert Job.objects.count() == 1 and JobEvent.objects.count() == 1


@pytest.mark.django_db
def test_a_found_job_is_a_whole_job(team_a):
    job, _ = submit()
    found, created = submit()
    assert not created and (found.pk, found.state, found.parsed, found.namespace.name) == (
        job.pk,
        State.QUEUED,
        job.parsed,
        "team-a",
    )
    # fields the lookup did not fetch are loaded when read
    assert found.manifest == job.manifest and found.workload == job.workload


@pytest.mark.django_db
def test_an_unmanaged_namespace_costs_one_query(team_a, django_assert_num_queries):
    with django_assert_num_queries(1), pytest.raises(services.NamespaceNotManaged):
        submit(namespace="kubeflow")
