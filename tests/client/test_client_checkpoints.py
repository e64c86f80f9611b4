"""Checkpoints (issue 48) from the notebook client and the `jobdash` command, against a live
server: the declarations as submit's options and flags, and a running job's report
(`Client.checkpointed`, `jobdash checkpointed JOB`), refused for a job that is not running."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from jobdash.jobs.models import Job, State
from jobdash_client import Client, JobdashError
from tests.client.support import columns
from tests.jobdash.dispatch_support import manifest

pytestmark = pytest.mark.django_db(transaction=True)
HEADER = "apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: {name}\n"


@pytest.fixture
def client(member):
    url, token = member
    return Client(url, token, timeout=10)


def running(job_id: int) -> None:
    """What the dispatcher's tracker writes when a job's gang runs."""
    Job.objects.filter(pk=job_id).update(state=State.RUNNING, started_at=datetime.now(UTC) - timedelta(minutes=10))


def test_submit_s_options_and_a_report(client):
    job = client.submit(manifest("train"), checkpoint_every="10m", checkpoint_on_notice=30, min_runtime="0s")
    assert (job.checkpoint_every_s, job.checkpoint_on_notice_s, job.min_runtime_s) == (600, 30, 0)
    assert (job.checkpoints, job.last_checkpoint_at) == (0, None)
    with pytest.raises(JobdashError) as refused:
        client.checkpointed(job)
    assert refused.value.status == 409 and "only a Running job reports checkpoints" in str(refused.value)
    running(job.id)
    reported = client.checkpointed(job)
    assert reported.checkpoints == 1 and reported.last_checkpoint_at is not None
    earlier = datetime.now(UTC) - timedelta(minutes=5)
    again = client.checkpointed(job.id, at=earlier)  # before the last one: no news, not counted
    assert (again.checkpoints, again.last_checkpoint_at) == (1, reported.last_checkpoint_at)
    with pytest.raises(JobdashError) as refused:
        client.checkpointed(job, at=earlier - timedelta(minutes=10))  # before this run started
    assert refused.value.status == 400 and "before this run started" in str(refused.value)
    with pytest.raises(JobdashError) as refused:
        client.checkpointed(job, at="2999-01-01T00:00:00Z")
    assert refused.value.status == 400 and [e.path for e in refused.value.errors] == ["at"]
    with pytest.raises(JobdashError) as missing:  # no such API path: said plainly, not as the page's HTML
        client.checkpointed("no-such-job")  # type: ignore[arg-type]
    said = str(missing.value)
    assert missing.value.status == 404 and "<" not in said
    assert "POST " in said and "/jobs/no-such-job/checkpoints/" in said and "not an answer of jobdash's API" in said

    with pytest.raises(JobdashError) as refused:
        client.submit(manifest("greedy"), checkpoint_on_notice="1h", min_runtime="soon")
    assert refused.value.status == 400
    assert sorted(e.path for e in refused.value.errors) == ["checkpoint_on_notice", "min_runtime"]


def test_a_workflow_s_options_go_as_query_parameters(client):
    workflow = client.submit_workflow(
        HEADER.format(name="pair"), manifest("one"), manifest("two"), checkpoint_every="5m", min_runtime="15m"
    )
    stored = Job.objects.filter(workflow_id=workflow.id)
    assert {(job.checkpoint_every_s, job.min_runtime_s) for job in stored} == {(300, 900)}


def test_the_command_reports_and_submits_with_flags(jobdash):
    flags = ["--checkpoint-every", "10m", "--checkpoint-on-notice", "0", "--min-runtime", "1h"]
    done = jobdash("submit", "-", *flags, input=manifest("train"), check=0)
    job_id = int(columns(done.stdout)[0]["ID"])
    stored = Job.objects.get(pk=job_id)
    assert (stored.checkpoint_every_s, stored.checkpoint_on_notice_s, stored.min_runtime_s) == (600, 0, 3600)

    refused = jobdash("checkpointed", job_id, check=1)
    assert f"job {job_id}: refused (HTTP 409)" in refused.stderr and "only a Running job" in refused.stderr
    running(job_id)
    done = jobdash("checkpointed", job_id, check=0)
    assert f"job {job_id} " in done.stdout and ": 1 checkpoint, the last at " in done.stdout
    old = jobdash("checkpointed", job_id, "--at", "2020-01-01T00:00:00Z", check=1)
    assert "before this run started" in old.stderr
    done = jobdash("checkpointed", job_id, "-o", "json", check=0)
    shown = json.loads(done.stdout)
    assert shown["checkpoints"] == 2 and shown["last_checkpoint_at"] != "2020-01-01T00:00:00Z"
    described = jobdash("describe", job_id, check=0).stdout
    assert "Checkpoints:  2 reported, the last at " in described and "(written every 600s)" in described

    assert "--at: 'noon' is not an RFC 3339 time" in jobdash("checkpointed", job_id, "--at", "noon", check=2).stderr
    bad = jobdash("submit", "-", "--checkpoint-every", "soon", input=manifest("x"), check=2)
    assert "--checkpoint-every: 'soon' is not a duration" in bad.stderr
    zero = jobdash("submit", "-", "--checkpoint-every", "0", input=manifest("x"), check=2)
    assert "--checkpoint-every: '0': must be more than 0 (a job that never checkpoints says nothing)" in zero.stderr
    assert Job.objects.get(pk=job_id).checkpoints == 2
