"""job_requeue: what the web process does from the database, and what the dispatcher does
with the cluster when the job has a TFJob."""

import pytest
from django.contrib.auth.models import User

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.exceptions import Conflict, NotMember
from jobdash.jobs.models import Job, Namespace, State

from .dispatch_support import eventually, manifest, settings

pytestmark = pytest.mark.django_db


@pytest.fixture
def user(db):
    user = User.objects.create_user("ana")
    Namespace.objects.get_or_create(name="team-a")[0].members.add(user)
    return user


@pytest.fixture
def operator(db):
    return User.objects.create_user("op", is_staff=True)


def submit(user, name, **kwargs) -> Job:
    return services.job_submit(user=user, manifest=manifest(name, **kwargs), source="api")


def events(job) -> list[tuple[str, str]]:
    return list(job.events.values_list("type", "actor"))


def test_only_staff_may_requeue(user):
    job = submit(user, "mine")
    with pytest.raises(NotMember):
        services.job_requeue(job_id=job.pk, user=user)


@pytest.mark.parametrize("state", [State.QUEUED, State.SUCCEEDED, State.CANCELLED])
def test_queued_and_finished_jobs_are_a_conflict_and_unchanged(user, operator, state):
    job = submit(user, "j")
    Job.objects.filter(pk=job.pk).update(state=state)
    with pytest.raises(Conflict):
        services.job_requeue(job_id=job.pk, user=operator)
    assert Job.objects.get(pk=job.pk).state == state
    assert [t for t, _ in events(job)] == ["Submitted"]


def test_a_failed_job_that_ran_is_not_requeued(user, operator):
    job = submit(user, "ran")
    assert transitions.fail(job.pk, "boom")
    Job.objects.filter(pk=job.pk).update(started_at=job.submitted_at)
    with pytest.raises(Conflict):
        services.job_requeue(job_id=job.pk, user=operator)
    assert Job.objects.get(pk=job.pk).state == State.FAILED


def test_a_never_started_failed_job_goes_straight_back_to_queued(user, operator):
    job = submit(user, "refused")
    Job.objects.filter(pk=job.pk).update(attempts=3)
    assert transitions.fail(job.pk, "gave up")
    job = services.job_requeue(job_id=job.pk, user=operator, reason="node fixed")
    assert job.state == State.QUEUED and job.attempts == 0 and job.finished_at is None
    assert events(job)[-1] == ("Requeued", "op")
    assert "node fixed" in job.events.last().message


def test_requeue_of_a_failed_job_whose_name_is_taken_again_is_a_conflict(user, operator):
    old = submit(user, "same")
    assert transitions.fail(old.pk, "gave up")
    submit(user, "same")  # a newer active job with that name
    with pytest.raises(Conflict, match="already exists"):
        services.job_requeue(job_id=old.pk, user=operator)
    assert Job.objects.get(pk=old.pk).state == State.FAILED


def test_a_released_job_is_only_marked_and_a_second_request_is_a_conflict(user, operator):
    job = submit(user, "out")
    Job.objects.filter(pk=job.pk).update(state=State.RELEASED)
    job = services.job_requeue(job_id=job.pk, user=operator)
    assert job.state == State.RELEASED and job.requeue_requested_at is not None
    assert events(job)[-1] == ("RequeueRequested", "op")
    with pytest.raises(Conflict, match="already"):
        services.job_requeue(job_id=job.pk, user=operator)


def test_the_dispatcher_takes_the_tfjob_back_and_requeues_a_running_job(user, operator, sim, gateway):
    transitions.take_term(1, "test")
    job = submit(user, "long", duration=3600)
    dispatcher = Dispatcher(gateway, settings(backoff_s=1000.0))
    for _ in range(20):
        dispatcher.cycle(1)
        if Job.objects.get(pk=job.pk).state == State.RUNNING:
            break
        sim.advance(1.0)
        eventually(lambda: len(gateway.pods()) == len(sim.cluster.pods("team-a")), timeout=3)
    assert Job.objects.get(pk=job.pk).state == State.RUNNING
    services.job_requeue(job_id=job.pk, user=operator)
    dispatcher.cycle(1)
    job.refresh_from_db()
    assert job.state == State.QUEUED and job.requeue_requested_at is None and job.started_at is None
    assert job.attempts == 0 and job.backoff_until is not None  # waits out the TFJob's deletion
    assert events(job)[-1] == ("Requeued", "dispatcher")
    eventually(lambda: sim.cluster.tfjob("team-a", "long") is None, message="TFJob not taken back")
