"""One table of what entering each state means for a job's row (jobs/lifecycle.py), and
every transition going through it: a job that leaves the queue keeps none of its waiting
fields, whichever path moved it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobdash.dispatch.writers import transitions
from jobdash.jobs import lifecycle, services
from jobdash.jobs.models import Job, State

from .conftest import with_name

pytestmark = pytest.mark.django_db


def test_the_table_names_every_state_and_only_fields_of_the_job_row():
    assert set(lifecycle.ENTERING) == set(State.values)
    columns = {field.name for field in Job._meta.concrete_fields}
    for state, fields in lifecycle.ENTERING.items():
        assert set(fields) <= columns, state
    # Every field that belongs to waiting is cleared by entering any other state.
    for state in set(State.values) - {State.QUEUED, State.RUNNING}:
        assert {name: lifecycle.ENTERING[state][name] for name in lifecycle.WAITING} == dict(lifecycle.WAITING)


def _waiting_job(alice, example_text, name: str) -> Job:
    """A queued job showing everything a cycle writes of a waiting job."""
    job = services.job_submit(user=alice, manifest=with_name(example_text("mnist-cpu"), name), source="api")
    later = timezone.now() + timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(
        position=3,
        reason="QuotaExceeded",
        message="waits for quota",
        eta=later,
        eta_late=later + timedelta(hours=1),
        backoff_until=timezone.now() - timedelta(seconds=1),
    )
    return job


def _claim(job, staff):
    transitions.take_term(7, "test")
    assert transitions.claim([transitions.Claim(job.pk, (("Worker", 0, "node-0"),))], 7) == [job.pk]


def _mark_released(job, staff):
    transitions.take_term(7, "test")
    assert transitions.mark_released(job.pk, 7, "found its object")


def _fail(job, staff):
    assert transitions.fail(job.pk, "the cluster refused it", from_states=(State.QUEUED,))


def _cancel(job, staff):
    services.job_cancel(job_id=job.pk, user=staff)


def _cancel_object_deleted(job, staff):
    assert services.job_cancel_object_deleted(job_id=job.pk, kind="TFJob", deleted_by="alice")


OUT_OF_QUEUED = {
    "claim": (_claim, State.RELEASED),
    "mark_released": (_mark_released, State.RELEASED),
    "fail": (_fail, State.FAILED),
    "job_cancel": (_cancel, State.CANCELLED),
    "job_cancel_object_deleted": (_cancel_object_deleted, State.CANCELLED),
}


@pytest.mark.parametrize("transition", OUT_OF_QUEUED)
def test_leaving_queued_clears_every_waiting_field(transition, alice, staff, example_text):
    move, to_state = OUT_OF_QUEUED[transition]
    job = _waiting_job(alice, example_text, f"leaves-{transition.replace('_', '-')}")
    move(job, staff)
    row = Job.objects.values(*lifecycle.WAITING, "state").get(pk=job.pk)
    assert row.pop("state") == to_state
    kept = {name: value for name, value in row.items() if value != lifecycle.WAITING[name]}
    if to_state in (State.FAILED, State.CANCELLED):
        kept.pop("message")  # the state's own sentence: why it failed or was cancelled
        assert row["message"] != "waits for quota"
    assert kept == {}


def test_a_job_that_runs_and_finishes_shows_no_start_range(alice, staff, example_text):
    """The bug the table fixed: the late bound stayed on released, running and finished jobs."""
    job = _waiting_job(alice, example_text, "ran")
    _claim(job, staff)
    assert Job.objects.get(pk=job.pk).eta_late is None
    assert transitions.running_many([(job.pk, "all 1 pods are running")], 7) == [job.pk]
    assert transitions.finish_many([(job.pk, State.SUCCEEDED, "it succeeded", False)], 7) == [job.pk]
    done = Job.objects.get(pk=job.pk)
    assert (done.state, done.eta, done.eta_late, done.position, done.reason) == (State.SUCCEEDED, None, None, None, "")
    assert done.started_at is not None and done.finished_at is not None and done.released_at is not None


def test_a_job_queued_again_keeps_nothing_of_its_release(alice, staff, example_text):
    job = _waiting_job(alice, example_text, "again")
    _claim(job, staff)
    transitions.created(job.pk, "uid-1")
    Job.objects.filter(pk=job.pk).update(requeue_requested_at=timezone.now())
    assert transitions.requeue(job.pk, note="taken back", backoff_until=timezone.now(), count_attempt=True, term=7)
    row = Job.objects.values(*lifecycle.RELEASE, *lifecycle.IN_FLIGHT, "state", "reason", "attempts").get(pk=job.pk)
    assert (row.pop("state"), row.pop("reason"), row.pop("attempts")) == (State.QUEUED, "BackingOff", 1)
    assert row == {**lifecycle.RELEASE, **lifecycle.IN_FLIGHT}
