"""jobdash_client and workflows (issue 36) against a live server: submit's options, arrays,
workflows; and, with a live dispatcher and kubesim, a workflow run in order and a failure retried."""

from datetime import UTC, datetime, timedelta

import pytest

from jobdash.jobs.models import Job
from jobdash_client import Client, JobdashError, Workflow
from tests.client.support import running_dispatcher, with_annotation
from tests.jobdash.dispatch_support import manifest

pytestmark = pytest.mark.django_db(transaction=True)
HEADER = "apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: {name}\nspec:\n  concurrency: 2\n"


@pytest.fixture
def client(member):
    url, token = member
    return Client(url, token, timeout=10)


def test_submit_takes_the_options_as_fields(client):
    train = client.submit(manifest("train"))
    deadline = datetime.now(UTC) + timedelta(hours=3)
    job = client.submit(
        manifest("evaluate"),
        after=["ok:train"],
        retry_limit=1,
        retry_on="Evicted, ExitCode",
        retry_exit_codes=[7],
        max_run_seconds=600,
        start_by=deadline,
    )
    assert job.dependencies == ({"job": train.id, "name": "train", "condition": "ok", "state": "Queued"},)
    assert (job.retries, job.retry_limit, job.failure, job.max_run_seconds) == (0, 1, None, 600.0)
    assert job.start_by == deadline.isoformat().replace("+00:00", "Z")
    assert job.workflow is None and job.array_index is None
    assert Job.objects.get(pk=job.id).options["retry"]["on"] == ["Evicted", "ExitCode"]

    with pytest.raises(JobdashError) as refused:
        client.submit(manifest("bad"), retry_limit=-1, after="sometimes:x")
    assert refused.value.status == 400
    assert sorted(e.path for e in refused.value.errors) == ["after", "retry.limit"]


def test_an_array_is_a_list_of_jobs_and_one_workflow(client):
    jobs = client.submit(manifest("trial-{{index}}-lr"), array="1,3,5%2", retry_limit=0)
    assert [(j.name, j.array_index, j.retry_limit) for j in jobs] == [
        ("trial-1-lr", 1, 0),
        ("trial-3-lr", 3, 0),
        ("trial-5-lr", 5, 0),
    ]
    workflows = client.workflows()
    assert [(w.id, w.kind, w.array, w.concurrency, w.total) for w in workflows] == [
        (jobs[0].workflow, "array", "1,3,5%2", 2, 3)
    ]
    assert client.workflows(namespace="team-b") == []


def test_submit_workflow_from_documents_with_options_for_each_job(client, tmp_path):
    (tmp_path / "prep.yaml").write_text(manifest("prep"))
    workflow = client.submit_workflow(
        HEADER.format(name="pipe"),
        tmp_path / "prep.yaml",
        with_annotation(manifest("train"), "jobdash.io/after", "prep"),
        retry_limit=4,
        keep_if_never_satisfied=True,
        start_by="2h",
    )
    assert isinstance(workflow, Workflow)
    assert (workflow.name, workflow.kind, workflow.concurrency, workflow.progress) == ("pipe", "dag", 2, {"Queued": 2})
    prep, train = workflow.jobs
    assert (prep.name, prep.after, train.name, train.after) == ("prep", (), "train", (("ok", prep.id),))
    stored = Job.objects.get(pk=train.id).options
    assert (stored["retry"]["limit"], stored["keep_if_never"], stored["start_by"] is not None) == (4, True, True)
    assert client.workflow(workflow.id).jobs == workflow.jobs

    cancelled = client.cancel_workflow(workflow.id)
    assert (cancelled.progress, cancelled.progress_text()) == ({"Cancelled": 2}, "0/2 Succeeded, 2 Cancelled")
    with pytest.raises(JobdashError) as again:
        client.cancel_workflow(workflow.id)
    assert again.value.status == 409
    with pytest.raises(JobdashError) as cycle:
        client.submit_workflow(
            HEADER.format(name="loop"),
            with_annotation(manifest("a"), "jobdash.io/after", "b"),
            with_annotation(manifest("b"), "jobdash.io/after", "a"),
        )
    assert [(e.path, e.message) for e in cycle.value.errors] == [  # (document [0] is the Workflow)
        ('[1].metadata.annotations["jobdash.io/after"]', "dependency cycle: a -> b -> a")
    ]


def test_a_workflow_runs_in_order_and_an_exit_code_is_retried_by_its_policy(client):
    with running_dispatcher():
        workflow = client.submit_workflow(
            HEADER.format(name="steps"),
            manifest("first", duration=1),
            with_annotation(manifest("second", duration=1), "jobdash.io/after", "ok:first"),
        )
        first, second = workflow.jobs
        flaky = client.submit(
            with_annotation(manifest("flaky", duration=1), "kubesim.io/exit-code", "3"),
            retry_exit_codes=[3],
            retry_limit=1,
            retry_backoff_seconds=0.1,
        )
        done = client.wait(second.id, until="Succeeded", timeout=60, poll=0.2, progress=lambda line: None)
        assert done.state == "Succeeded"
        ran_first = client.get(first.id)
        assert ran_first.state == "Succeeded"
        assert done.raw["started_at"] >= ran_first.raw["finished_at"]  # (ISO 8601 in UTC: as text, in order)
        failed = client.wait(flaky.id, until="finished", timeout=60, poll=0.2, progress=lambda line: None)
        assert (failed.state, failed.retries, failed.retry_limit) == ("Failed", 1, 1)
        assert failed.failure is not None and (failed.failure["class"], failed.failure["exit_code"]) == (
            "ExitCode",
            3,
        )
        assert "Retrying" in [e["type"] for e in client.events(flaky.id)]
        assert client.workflow(workflow.id).progress_text() == "2/2 Succeeded"
        # Without Celery there is no beat: the loop folds the usage itself (its first fold
        # makes the mark; nothing is 30 s old yet to be folded).
        from jobdash.usage.models import UsageMark

        assert UsageMark.objects.filter(id=1).exists()
