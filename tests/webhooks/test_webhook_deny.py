"""Mode deny: someone else's TFJob is stored as a Queued job and the create refused with
a message naming the job; every retry lands on that job while it is active."""

import re

import pytest
import yaml

from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import Job, JobEvent, Namespace, State

from .conftest import ALICE, KATIB, TRIAL_OWNER, trial_tfjob

pytestmark = pytest.mark.usefixtures("deny_mode")


def with_server_fields(body: dict) -> dict:
    body["metadata"].update(
        uid="0d1e",
        resourceVersion="12",
        creationTimestamp="2025-01-01T00:00:00Z",
        generation=1,
        managedFields=[{"manager": "katib"}],
    )
    body["status"] = {"conditions": []}
    return body


def test_a_katib_tfjob_is_queued_with_its_metadata(webhook, team_a):
    response = webhook(with_server_fields(trial_tfjob("trial-1")))
    job = Job.objects.get()
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    assert f"jobdash job #{job.pk}" in message and "position 1 in team-a's queue" in message
    assert (job.state, job.source, job.submitted_by_name) == (State.QUEUED, "webhook", KATIB)
    # the service account is the job's owner: one user for the cluster identity (accounts.identity)
    assert job.submitted_by is not None and job.submitted_by.username == KATIB
    assert (job.namespace.name, job.name, job.kind) == ("team-a", "trial-1", "TFJob")
    meta = job.parsed["metadata"]
    assert meta["ownerReferences"] == [dict(TRIAL_OWNER, name="trial-1")]
    assert meta["labels"]["katib.kubeflow.org/trial"] == "trial-1"
    assert meta["annotations"]["sidecar.istio.io/inject"] == "false"
    # what the API server set is gone, so jobdash's later create is accepted
    assert not {"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} & set(meta)
    assert "status" not in job.parsed
    # the text on the job page is the same object
    assert yaml.safe_load(job.manifest) == job.parsed
    assert job.workload["pods"] == 2
    assert list(JobEvent.objects.filter(job=job).values_list("type", "actor")) == [("Submitted", KATIB)]


def test_the_stored_text_never_uses_yaml_aliases():
    """A shared value must be written out twice: the manifest parser refuses aliases."""
    from webhooks.objects import manifest_text

    shared = {"cpu": "1"}
    text = manifest_text({"a": shared, "b": shared})
    assert "&" not in text and "*" not in text and yaml.safe_load(text) == {"a": shared, "b": shared}


def test_the_namespace_comes_from_the_request_when_the_object_has_none(webhook, team_a):
    body = trial_tfjob("trial-1")
    del body["metadata"]["namespace"]
    response = webhook(body, namespace="team-a")
    assert response["allowed"] is False
    assert Job.objects.get().parsed["metadata"]["namespace"] == "team-a"


def test_retries_land_on_the_same_job_while_it_is_active(webhook, team_a):
    first = webhook(trial_tfjob("trial-1"))
    job = Job.objects.get()
    for _ in range(3):
        again = webhook(trial_tfjob("trial-1"))
        assert again["allowed"] is False and f"jobdash job #{job.pk}" in again["status"]["message"]
    Job.objects.filter(pk=job.pk).update(position=4, message="the namespace's quota is full")
    queued = webhook(trial_tfjob("trial-1"))["status"]["message"]
    assert "position 4 in team-a's queue: the namespace's quota is full" in queued

    transitions.take_term(1, "test")
    assert transitions.claim([transitions.Claim(job.pk)], 1) == [job.pk]
    released = webhook(trial_tfjob("trial-1"))["status"]["message"]
    assert f"jobdash job #{job.pk}, Released" in released
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    assert f"jobdash job #{job.pk}, Running" in webhook(trial_tfjob("trial-1"))["status"]["message"]
    assert Job.objects.count() == 1 and first["status"]["message"] != released


def test_after_the_job_finished_a_create_queues_a_new_job(webhook, team_a):
    webhook(trial_tfjob("trial-1"))
    old = Job.objects.get()
    Job.objects.filter(pk=old.pk).update(state=State.SUCCEEDED)
    webhook(trial_tfjob("trial-1"))
    new = Job.objects.exclude(pk=old.pk).get()
    assert new.state == State.QUEUED and new.name == "trial-1"


def test_a_changed_spec_on_retry_is_pointed_out_not_stored(webhook, team_a):
    webhook(trial_tfjob("trial-1"))
    job = Job.objects.get()
    bigger = trial_tfjob("trial-1")
    bigger["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 4
    message = webhook(bigger)["status"]["message"]
    assert "spec differs" in message and f"cancel jobdash job #{job.pk}" in message
    assert Job.objects.get().workload["pods"] == 2


def test_an_api_job_of_that_name_is_named_in_the_answer(webhook, team_a, django_user_model):
    user = django_user_model.objects.create_user("ana")
    team_a.members.add(user)
    text = yaml.safe_dump(trial_tfjob("trial-1"))
    job = services.job_submit(user=user, manifest=text, source="api")
    message = webhook(trial_tfjob("trial-1"))["status"]["message"]
    assert f"jobdash job #{job.pk} (submitted through the REST API by ana)" in message
    assert Job.objects.count() == 1


def test_dry_run_writes_nothing(webhook, team_a):
    response = webhook(trial_tfjob("trial-1"), dry_run=True)
    assert response["allowed"] is False and "would be queued" in response["status"]["message"]
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0
    webhook(trial_tfjob("trial-1"))
    assert Job.objects.count() == 1
    again = webhook(trial_tfjob("trial-1"), dry_run=True)
    assert again["allowed"] is False and "already holds a job of this name" in again["status"]["message"]
    assert Job.objects.count() == 1


def test_a_dry_run_reveals_nothing_about_the_job_holding_the_name(webhook, team_a, django_user_model):
    """Id, submitter, state, position and reason are for the real request, not a free probe."""
    user = django_user_model.objects.create_user("ana")
    team_a.members.add(user)
    job = services.job_submit(user=user, manifest=yaml.safe_dump(trial_tfjob("trial-1")), source="api")
    Job.objects.filter(pk=job.pk).update(position=3, message="waits for 2 cpu")
    bigger = trial_tfjob("trial-1")
    bigger["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 4
    for body in (trial_tfjob("trial-1"), bigger):
        message = webhook(body, dry_run=True)["status"]["message"]
        for secret in (f"#{job.pk}", "ana", "position", "3", "cpu", "REST API", "Queued"):
            assert secret not in message, (secret, message)
    assert f"jobdash job #{job.pk}" in webhook(trial_tfjob("trial-1"))["status"]["message"]


def test_dry_run_still_validates(webhook, team_a):
    body = trial_tfjob("trial-1")
    body["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = -1
    response = webhook(body, dry_run=True)
    assert response["status"]["code"] == 422 and "spec.tfReplicaSpecs.Worker.replicas" in response["status"]["message"]


def test_a_tfjob_suspended_by_its_creator_is_queued_to_run(webhook, team_a):
    """No way around the queue: stored with the flag cleared, so its release runs it."""
    response = webhook(trial_tfjob("trial-1", suspend=True))
    job = Job.objects.get()
    assert response["allowed"] is False and f"jobdash job #{job.pk}" in response["status"]["message"]
    assert job.parsed["spec"]["runPolicy"]["suspend"] is False
    # its retry lands on the same job
    assert webhook(trial_tfjob("trial-1", suspend=True))["allowed"] is False and Job.objects.count() == 1


def test_an_unmanaged_namespace_passes(webhook, team_a):
    response = webhook(trial_tfjob("trial-1", namespace="kubeflow"))
    assert response == {"uid": response["uid"], "allowed": True}
    assert Job.objects.count() == 0


def test_an_invalid_tfjob_is_refused_with_the_field_and_not_stored(webhook, team_a):
    body = trial_tfjob("trial-1")
    body["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = -1
    response = webhook(body)
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert (
        "jobdash cannot queue TFJob team-a/trial-1: spec.tfReplicaSpecs.Worker.replicas"
        in response["status"]["message"]
    )
    assert Job.objects.count() == 0


def test_a_tfjob_over_the_manifest_limit_is_refused_as_too_large(webhook, team_a, settings):
    settings.JOBDASH_MAX_MANIFEST_BYTES = 2048
    body = trial_tfjob("trial-1")
    body["metadata"]["annotations"]["big"] = "x" * 4096
    response = webhook(body)
    assert response["allowed"] is False and response["status"]["code"] == 413
    assert Job.objects.count() == 0


def test_generate_name_is_queued_under_the_name_the_webhook_gives_it(webhook, team_a):
    """The API server runs mutating admission before it names the object: the webhook names
    it as the API server would (prefix + 5 characters), queues it under that name and says
    it. Each such create is a new object, so a second one is a second job."""
    body = trial_tfjob("trial-1")
    body["metadata"].pop("name")
    body["metadata"]["generateName"] = "trial-"
    response = webhook(body, name="")
    job = Job.objects.get()
    assert re.fullmatch(r"trial-[bcdfghjklmnpqrstvwxz2456789]{5}", job.name), job.name
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"].startswith(f"TFJob team-a/{job.name} is queued by jobdash as jobdash job #")
    assert job.parsed["metadata"]["name"] == job.name and job.parsed["metadata"]["generateName"] == "trial-"
    assert yaml.safe_load(job.manifest)["metadata"]["name"] == job.name
    webhook(body, name="")
    assert Job.objects.count() == 2 and len(set(Job.objects.values_list("name", flat=True))) == 2


def test_a_generate_name_the_kind_cannot_have_is_refused_with_the_field(webhook, team_a):
    body = trial_tfjob("trial-1")
    body["metadata"].pop("name")
    body["metadata"]["generateName"] = "Trial_"
    response = webhook(body, name="")
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert "metadata.generateName" in response["status"]["message"]
    assert Job.objects.count() == 0
    # outside jobdash's namespaces the API server judges it
    assert (
        webhook(
            trial_tfjob("x", namespace="kubeflow") | {"metadata": body["metadata"] | {"namespace": "kubeflow"}}, name=""
        )["allowed"]
        is True
    )


def test_neither_name_nor_generate_name_is_refused(webhook, team_a):
    body = trial_tfjob("trial-1")
    body["metadata"].pop("name")
    response = webhook(body, name="")
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert "set metadata.name or metadata.generateName" in response["status"]["message"]
    assert Job.objects.count() == 0


def test_a_dry_run_of_a_generate_name_create_writes_nothing(webhook, team_a):
    body = trial_tfjob("trial-1")
    body["metadata"].pop("name")
    body["metadata"]["generateName"] = "trial-"
    response = webhook(body, name="", dry_run=True)
    assert response["allowed"] is False and re.search(
        r"TFJob team-a/trial-\w{5} would be queued", response["status"]["message"]
    )
    assert Job.objects.count() == 0


def test_a_name_the_api_server_generated_is_used(webhook, team_a):
    body = trial_tfjob("ignored")
    body["metadata"].pop("name")
    body["metadata"]["generateName"] = "trial-"
    response = webhook(body, name="trial-x7k2p")
    job = Job.objects.get()
    assert response["allowed"] is False and job.name == "trial-x7k2p"
    assert job.parsed["metadata"]["name"] == "trial-x7k2p"


def test_another_users_tfjob_is_queued_as_theirs(webhook, team_a):
    webhook(trial_tfjob("alices-job"), user=ALICE)
    assert Job.objects.get().submitted_by_name == ALICE


def test_an_internal_error_is_a_denial_with_the_reason_not_a_500(webhook, team_a, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("database on fire")

    monkeypatch.setattr(services, "job_submit_or_find", broken)
    response = webhook(trial_tfjob("trial-1"))
    assert response["allowed"] is False and response["status"]["code"] == 500
    assert "RuntimeError: database on fire" in response["status"]["message"]


def test_an_unknown_mode_is_a_denial_not_a_500(webhook, team_a, settings):
    settings.JOBDASH_WEBHOOK_MODE = "maybe"
    response = webhook(trial_tfjob("trial-1"))
    assert response["allowed"] is False and "JOBDASH_WEBHOOK_MODE" in response["status"]["message"]


def test_positions_are_per_namespace(webhook, team_a):
    Namespace.objects.create(name="team-b")
    webhook(trial_tfjob("a-1"))
    webhook(trial_tfjob("b-1", namespace="team-b"))
    message = webhook(trial_tfjob("a-2"))["status"]["message"]
    assert "position 2 in team-a's queue" in message
