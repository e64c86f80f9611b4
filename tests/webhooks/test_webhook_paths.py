"""Every path into the cluster goes through the queue (issue #14): an update by others that
clears the suspend flag of an object jobdash holds is refused; a delete of it cancels its
Queued job; jobdash's own writes stay fenced; other updates and deletes pass."""

import copy

import pytest

from jobdash.jobs.models import Job, JobEvent, State

from .conftest import ALICE, JOBDASH, KATIB, trial_tfjob


def held(webhook) -> tuple[dict, Job]:
    """A TFJob queued in suspend mode, as the cluster stores it (suspended, labelled)."""
    response = webhook(trial_tfjob("trial-1"))
    assert response["allowed"] is True
    obj = trial_tfjob("trial-1", suspend=True)
    obj["metadata"]["labels"]["jobdash.io/queued"] = "true"
    return obj, Job.objects.get()


def unsuspended(obj: dict) -> dict:
    new = copy.deepcopy(obj)
    new["spec"]["runPolicy"]["suspend"] = False
    return new


def test_clearing_suspend_on_a_held_object_is_refused_with_the_job_named(webhook, team_a, suspend_mode):
    obj, job = held(webhook)
    response = webhook(unsuspended(obj), old_object=obj, operation="UPDATE", user=ALICE)
    assert response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert message.startswith(f"TFJob team-a/trial-1 is held by jobdash job #{job.pk}, Queued, ")
    assert "jobdash unsuspends it when the quota allows" in message
    assert Job.objects.get().state == State.QUEUED
    # a dry run: the same verdict, the job not named
    dry = webhook(unsuspended(obj), old_object=obj, operation="UPDATE", user=ALICE, dry_run=True)
    assert dry["allowed"] is False and f"#{job.pk}" not in dry["status"]["message"]


def test_other_updates_by_others_pass(webhook, team_a, suspend_mode):
    obj, _ = held(webhook)
    relabelled = copy.deepcopy(obj)
    relabelled["metadata"]["labels"]["team"] = "x"
    assert webhook(relabelled, old_object=obj, operation="UPDATE", user=ALICE)["allowed"] is True
    # an object jobdash does not hold: unsuspending it passes
    other = trial_tfjob("free", suspend=True)
    assert webhook(unsuspended(other), old_object=other, operation="UPDATE", user=ALICE)["allowed"] is True


def test_jobdash_own_unsuspend_passes(webhook, team_a, suspend_mode):
    obj, _ = held(webhook)
    assert webhook(unsuspended(obj), old_object=obj, operation="UPDATE", user=JOBDASH)["allowed"] is True


def test_a_released_jobs_object_may_be_unsuspended(webhook, team_a, suspend_mode):
    obj, job = held(webhook)
    Job.objects.filter(pk=job.pk).update(state=State.RELEASED)
    assert webhook(unsuspended(obj), old_object=obj, operation="UPDATE", user=ALICE)["allowed"] is True


@pytest.mark.parametrize("mode", ["deny_mode", "suspend_mode"])
def test_deleting_a_held_object_cancels_its_queued_job(webhook, team_a, request, mode):
    request.getfixturevalue("suspend_mode")
    obj, job = held(webhook)
    request.getfixturevalue(mode)
    # a dry run changes nothing
    dry = webhook(None, old_object=obj, operation="DELETE", user=KATIB, dry_run=True)
    assert dry["allowed"] is True and Job.objects.get().state == State.QUEUED
    response = webhook(None, old_object=obj, operation="DELETE", user=KATIB)
    assert response["allowed"] is True
    job.refresh_from_db()
    assert job.state == State.CANCELLED and job.message == f"its TFJob was deleted by {KATIB}"
    assert JobEvent.objects.filter(job=job, type="Cancelled", actor=KATIB).exists()


def test_deleting_a_running_jobs_object_or_by_jobdash_passes(webhook, team_a, suspend_mode):
    obj, job = held(webhook)
    assert webhook(None, old_object=obj, operation="DELETE", user=JOBDASH)["allowed"] is True
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    assert webhook(None, old_object=obj, operation="DELETE", user=ALICE)["allowed"] is True
    assert Job.objects.get().state == State.RUNNING
