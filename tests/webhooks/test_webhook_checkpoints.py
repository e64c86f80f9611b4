"""Checkpoint declarations from kubectl (issue 48): the annotations of an object the webhook
queues are the job's, read by the same parser as the API's; a bad one (or one over the
admin's limit) is a 422 naming the annotation, on a dry run too, and nothing is stored."""

import pytest

from jobdash.jobs.models import Job

from .conftest import ALICE, trial_tfjob

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def deny_mode(settings):
    settings.JOBDASH_WEBHOOK_MODE = "deny"


def annotated(name: str, **annotations: str) -> dict:
    body = trial_tfjob(name)
    body["metadata"]["annotations"].update({f"jobdash.io/{key}": value for key, value in annotations.items()})
    return body


def test_kubectl_s_annotations_are_the_job_s_declarations(webhook, team_a):
    answer = webhook(annotated("t1", **{"checkpoint-every": "15m", "checkpoint-on-notice": "0", "min-runtime": "45m"}))
    assert answer["allowed"] is False  # (deny mode: queued by jobdash, created by it at release)
    job = Job.objects.get(name="t1")
    assert (job.checkpoint_every_s, job.checkpoint_on_notice_s, job.min_runtime_s) == (900, 0, 2700)


@pytest.mark.parametrize("dry_run", [False, True], ids=["create", "dry-run"])
def test_a_bad_one_is_a_422_naming_the_annotation(webhook, team_a, settings, dry_run):
    settings.JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS = 60.0
    answer = webhook(annotated("t2", **{"checkpoint-on-notice": "2m"}), user=ALICE, dry_run=dry_run)
    assert answer["allowed"] is False and answer["status"]["code"] == 422
    message = answer["status"]["message"]
    assert 'metadata.annotations["jobdash.io/checkpoint-on-notice"]' in message
    assert "JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS=60" in message
    answer = webhook(annotated("t3", **{"min-runtime": "forever"}), user=ALICE, dry_run=dry_run)
    assert answer["status"]["code"] == 422 and "jobdash.io/min-runtime" in answer["status"]["message"]
    assert not Job.objects.exists()
