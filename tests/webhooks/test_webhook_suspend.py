"""Mode suspend: the create is allowed, suspended and labelled; the job is bound to the
object by namespace and name; a TFJob its creator suspended is left alone."""

import pytest

from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import Job, JobEvent, State

from .conftest import KATIB, TRIAL_OWNER, apply_patch, decoded_patch, trial_tfjob

pytestmark = pytest.mark.usefixtures("suspend_mode")


def test_a_katib_tfjob_is_allowed_suspended_and_queued(webhook, team_a):
    body = trial_tfjob("trial-1")
    response = webhook(body)
    job = Job.objects.get()
    assert response["allowed"] is True
    patched = apply_patch(body, decoded_patch(response))
    assert patched["spec"]["runPolicy"] == {"suspend": True}
    assert patched["metadata"]["labels"] == {**body["metadata"]["labels"], "jobdash.io/queued": "true"}
    assert patched["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name="trial-1")]
    assert f"jobdash job #{job.pk}" in response["warnings"][0]
    assert (job.state, job.source, job.submitted_by_name, job.name) == (State.QUEUED, "webhook", KATIB, "trial-1")
    # the stored object is the creator's, not the suspended one: a fallback create runs it
    assert "runPolicy" not in job.parsed["spec"]


@pytest.mark.parametrize("run_policy", [None, {}, {"cleanPodPolicy": "All"}, {"suspend": False}])
def test_the_patch_works_whatever_run_policy_and_labels_exist(webhook, team_a, run_policy):
    body = trial_tfjob(f"trial-{len(str(run_policy))}")
    body["metadata"].pop("labels")
    if run_policy is not None:
        body["spec"]["runPolicy"] = run_policy
    patched = apply_patch(body, decoded_patch(webhook(body)))
    assert patched["spec"]["runPolicy"] == {**(run_policy or {}), "suspend": True}
    assert patched["metadata"]["labels"] == {"jobdash.io/queued": "true"}


def test_a_tfjob_suspended_by_its_creator_is_queued_with_the_label_alone(webhook, team_a):
    response = webhook(trial_tfjob("trial-1", suspend=True))
    assert response["allowed"] is True and Job.objects.get().state == "Queued"
    assert [op["path"] for op in decoded_patch(response)] in (
        ["/metadata/labels"],
        ["/metadata/labels/jobdash.io~1queued"],
    )


def test_a_retry_lands_on_the_same_job_with_the_same_patch(webhook, team_a):
    first = webhook(trial_tfjob("trial-1"))
    second = webhook(trial_tfjob("trial-1"))
    assert Job.objects.count() == 1 and second["allowed"] is True
    assert decoded_patch(first) == decoded_patch(second)


def test_a_different_spec_under_a_queued_name_is_refused(webhook, team_a):
    webhook(trial_tfjob("trial-1"))
    job = Job.objects.get()
    bigger = trial_tfjob("trial-1")
    bigger["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 3
    response = webhook(bigger)
    assert response["allowed"] is False and f"cancel jobdash job #{job.pk}" in response["status"]["message"]


def test_a_released_job_of_that_name_refuses_a_new_object(webhook, team_a):
    webhook(trial_tfjob("trial-1"))
    job = Job.objects.get()
    transitions.take_term(1, "test")
    transitions.claim([transitions.Claim(job.pk)], 1)
    response = webhook(trial_tfjob("trial-1"))
    assert response["allowed"] is False and response["status"]["code"] == 409
    assert f"jobdash job #{job.pk}, Released" in response["status"]["message"]
    assert Job.objects.count() == 1


def test_a_name_taken_by_an_api_job_is_refused(webhook, team_a, django_user_model):
    import yaml

    from jobdash.jobs import services

    user = django_user_model.objects.create_user("ana")
    team_a.members.add(user)
    job = services.job_submit(user=user, manifest=yaml.safe_dump(trial_tfjob("trial-1")), source="web")
    response = webhook(trial_tfjob("trial-1"))
    assert response["allowed"] is False
    assert f"taken by jobdash job #{job.pk} (submitted through the web form by ana)" in response["status"]["message"]


def test_dry_run_answers_the_same_and_writes_nothing(webhook, team_a):
    body = trial_tfjob("trial-1")
    response = webhook(body, dry_run=True)
    assert response["allowed"] is True and "dry run" in response["warnings"][0]
    assert apply_patch(body, decoded_patch(response))["spec"]["runPolicy"]["suspend"] is True
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0


def test_an_unmanaged_namespace_is_not_suspended(webhook, team_a):
    response = webhook(trial_tfjob("trial-1", namespace="elsewhere"))
    assert response["allowed"] is True and "patch" not in response
