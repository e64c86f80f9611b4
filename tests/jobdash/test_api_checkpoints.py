"""Checkpoints through the API (issue 48): what a job declares (annotations, the API's fields
over them, the namespace's default minimum run time within the admin's ceiling; a bad value a
400 naming the field, nothing written), and checkpoint reports (POST .../checkpoints/: a
Running job only, by who may act on it, the last time never moved back, each on the timeline)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from jobdash.jobs.models import Job, JobEvent, Namespace, State

from .conftest import token_client, with_name

pytestmark = pytest.mark.django_db
YAML = "application/yaml"
URL = "/api/v1/jobs/"


@pytest.fixture
def mnist(example_text):
    def named(name: str, **annotations: str) -> str:
        text = with_name(example_text("mnist-cpu"), name)
        for key, value in annotations.items():
            text = text.replace("  annotations:\n", f'  annotations:\n    jobdash.io/{key}: "{value}"\n', 1)
        return text

    return named


def errors(response) -> list[tuple[str, str]]:
    return [(e["path"], e["message"]) for e in response.json()["errors"]]


def declared(job: dict) -> tuple:
    return job["checkpoint_every_s"], job["checkpoint_on_notice_s"], job["min_runtime_s"]


def test_annotations_and_fields_become_the_job_s_columns(api, mnist):
    text = mnist("a", **{"checkpoint-every": "10m", "checkpoint-on-notice": "90s", "min-runtime": "1h"})
    job = api.post(URL, text, content_type=YAML).json()
    assert declared(job) == (600, 90, 3600)
    assert (job["checkpoints"], job["last_checkpoint_at"]) == (0, None)
    stored = Job.objects.get(pk=job["id"])
    assert (stored.checkpoint_every_s, stored.checkpoint_on_notice_s, stored.min_runtime_s) == (600, 90, 3600)
    # The fields win over the annotations; durations or seconds.
    body = {"manifest": text.replace("name: a", "name: b", 1), "checkpoint_every": "1h", "min_runtime": 0}
    assert declared(api.post(URL, body, format="json").json()) == (3600, 90, 0)
    # A YAML body's fields are query parameters.
    response = api.post(f"{URL}?checkpoint_on_notice=0s&checkpoint_every=5m", mnist("c"), content_type=YAML)
    assert declared(response.json()) == (300, 0, None)


def test_the_namespace_default_minimum_run_time_within_the_ceiling(api, mnist, settings):
    settings.JOBDASH_MAX_MIN_RUNTIME_SECONDS = 1800.0
    Namespace.objects.filter(name="team-a").update(default_min_runtime_seconds=600)
    assert api.post(URL, {"manifest": mnist("default")}, format="json").json()["min_runtime_s"] == 600
    own = api.post(URL, {"manifest": mnist("own"), "min_runtime": "20m"}, format="json").json()
    assert own["min_runtime_s"] == 1200
    Namespace.objects.filter(name="team-a").update(default_min_runtime_seconds=7200)  # above the ceiling: cut
    assert api.post(URL, {"manifest": mnist("capped")}, format="json").json()["min_runtime_s"] == 1800
    # A job's own value above it is refused, naming the field: never cut.
    response = api.post(URL, {"manifest": mnist("greedy"), "min_runtime": "31m"}, format="json")
    assert response.status_code == 400
    assert errors(response) == [
        ("min_runtime", "31m is more than the 30m a job may run unpreempted (JOBDASH_MAX_MIN_RUNTIME_SECONDS=1800)")
    ]
    assert not Job.objects.filter(name="greedy").exists()


def test_bad_values_are_400s_naming_the_field_and_nothing_is_written(api, mnist, settings):
    settings.JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS = 120.0
    response = api.post(
        URL, mnist("a", **{"checkpoint-on-notice": "5m", "checkpoint-every": "often"}), content_type=YAML
    )
    assert response.status_code == 400
    found = dict(errors(response))
    assert set(found) == {
        'metadata.annotations["jobdash.io/checkpoint-on-notice"]',
        'metadata.annotations["jobdash.io/checkpoint-every"]',
    }
    assert (
        "JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS=120" in found['metadata.annotations["jobdash.io/checkpoint-on-notice"]']
    )
    response = api.post(URL, {"manifest": mnist("b"), "checkpoint_on_notice": 121}, format="json")
    assert [path for path, _ in errors(response)] == ["checkpoint_on_notice"]
    response = api.post(URL, {"manifest": mnist("c"), "checkpoint_every": {"m": 10}}, format="json")
    assert [path for path, _ in errors(response)] == ["checkpoint_every"]
    # Several jobs at once: the document's index first, and none of them stored.
    body = [{"manifest": mnist("d")}, {"manifest": mnist("e"), "checkpoint_every": 0}]
    response = api.post(URL, body, format="json")
    assert response.status_code == 400 and [path for path, _ in errors(response)] == ["[1].checkpoint_every"]
    assert Job.objects.count() == 0


def running(job_id: int) -> None:
    """What the dispatcher's tracker writes when a job's gang runs."""
    ten_minutes_ago = timezone.now() - timedelta(minutes=10)
    Job.objects.filter(pk=job_id).update(state=State.RUNNING, released_at=ten_minutes_ago, started_at=ten_minutes_ago)


def test_a_running_job_reports_checkpoints(api, mnist):
    job = api.post(URL, {"manifest": mnist("train")}, format="json").json()
    checkpoints = f"{URL}{job['id']}/checkpoints/"
    response = api.post(checkpoints)
    assert response.status_code == 409
    assert errors(response) == [("", f"job {job['id']} is Queued: only a Running job reports checkpoints")]
    running(job["id"])
    before = timezone.now()
    response = api.post(checkpoints)
    assert response.status_code == 200, response.content
    shown = response.json()
    assert shown["checkpoints"] == 1
    assert before <= datetime.fromisoformat(shown["last_checkpoint_at"]) <= timezone.now()
    at = "2030-01-01T10:00:00Z"
    # One earlier than the last (a late or retried report) is no news: answered, not counted.
    earlier = {"at": (timezone.now() - timedelta(seconds=1)).isoformat()}
    again = api.post(checkpoints, earlier, format="json")
    assert again.status_code == 200 and again.json()["checkpoints"] == 1
    assert api.post(checkpoints, {"at": shown["last_checkpoint_at"]}, format="json").json()["checkpoints"] == 1
    stored = Job.objects.get(pk=job["id"])
    assert stored.last_checkpoint_at == datetime.fromisoformat(shown["last_checkpoint_at"])  # never moved back
    # One before this run started is an earlier run's: a 400 at "at".
    old = api.post(checkpoints, {"at": (stored.started_at - timedelta(minutes=5)).isoformat()}, format="json")
    assert old.status_code == 400 and errors(old)[0][0] == "at" and "before this run started" in errors(old)[0][1]
    assert api.post(checkpoints).json()["checkpoints"] == 2  # a later one counts
    # A little ahead (the job's clock runs fast) is recorded as now, never in the future.
    ahead = api.post(checkpoints, {"at": (timezone.now() + timedelta(minutes=2)).isoformat()}, format="json").json()
    assert ahead["checkpoints"] == 3 and datetime.fromisoformat(ahead["last_checkpoint_at"]) <= timezone.now()
    assert "ahead of jobdash's clock" in JobEvent.objects.filter(job_id=job["id"], type="Checkpointed").last().message
    # A time in the future, or none at all, is a 400 at "at"; nothing counted.
    assert [p for p, _ in errors(api.post(checkpoints, {"at": at}, format="json"))] == ["at"]
    assert [p for p, _ in errors(api.post(checkpoints, {"at": "yesterday"}, format="json"))] == ["at"]
    assert [p for p, _ in errors(api.post(checkpoints, [1], format="json"))] == [""]
    assert Job.objects.get(pk=job["id"]).checkpoints == 3
    timeline = JobEvent.objects.filter(job_id=job["id"], type="Checkpointed").order_by("id")
    assert [event.actor for event in timeline] == ["alice", "alice", "alice"]
    assert timeline[0].message.startswith("checkpoint at ") and timeline[0].message.endswith("reported by alice")
    detail = api.get(f"{URL}{job['id']}/").json()
    assert [e["type"] for e in detail["events"]].count("Checkpointed") == 3


def test_only_who_may_act_on_the_job_reports_its_checkpoints(api, alice, staff, mnist):
    job = api.post(URL, {"manifest": mnist("train")}, format="json").json()
    running(job["id"])
    checkpoints = f"{URL}{job['id']}/checkpoints/"
    colleague = User.objects.create_user("carol")
    Namespace.objects.get(name="team-a").members.add(colleague)  # edit in team-a, not the job's owner
    response = token_client(colleague).post(checkpoints)
    assert response.status_code == 403 and "submitted by alice" in errors(response)[0][1]
    outsider = User.objects.create_user("dave")
    assert token_client(outsider).post(checkpoints).status_code == 404  # not even visible
    assert APIClient().post(checkpoints).status_code == 401
    assert token_client(staff).post(checkpoints).json()["checkpoints"] == 1  # staff administer everywhere
    assert Job.objects.get(pk=job["id"]).checkpoints == 1


def test_a_finished_job_reports_none(api, mnist):
    job = api.post(URL, {"manifest": mnist("done")}, format="json").json()
    Job.objects.filter(pk=job["id"]).update(state=State.SUCCEEDED, finished_at=datetime.now(UTC))
    response = api.post(f"{URL}{job['id']}/checkpoints/")
    assert response.status_code == 409 and "is Succeeded" in errors(response)[0][1]
