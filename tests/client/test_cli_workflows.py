"""`jobdash` and workflows (issue 36): dependencies, arrays, retries and deadlines on submit,
a workflow file, `jobdash workflows` and `jobdash workflow`, run against a live server."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from jobdash.jobs.models import Job, Workflow
from tests.client.support import columns, with_annotation
from tests.jobdash.dispatch_support import manifest

pytestmark = pytest.mark.django_db(transaction=True)
HEADER = "apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: {name}\n"


def submitted_id(done) -> int:
    return int(columns(done.stdout)[0]["ID"])


def described(text: str) -> dict[str, str]:
    """`jobdash describe`'s "Label:   value" lines (the events table left out)."""
    head = text.split("\nEvents:")[0]
    return {label: value.strip() for label, value in (line.split(":", 1) for line in head.splitlines())}


def test_submit_with_dependencies_retries_and_deadlines_shows_them_in_describe(jobdash):
    train = submitted_id(jobdash("submit", "-", input=manifest("train"), check=0))
    prep = submitted_id(jobdash("submit", "-", input=manifest("prep"), check=0))
    flags = ["--after", "train", "--after", f"any:{prep}", "--retry-limit", "2", "--retry-on", "NodeLost,ExitCode"]
    flags += ["--retry-exit-codes", "3,42", "--retry-backoff", "1m", "--max-run-time", "1h30m", "--start-by", "2h"]
    before = datetime.now(UTC)
    evaluate = submitted_id(jobdash("submit", "-", *flags, "--keep-if-never-satisfied", input=manifest("ev"), check=0))

    stored = Job.objects.get(pk=evaluate).options
    assert stored["after"] == [["ok", "train"], ["any", str(prep)]]
    assert stored["retry"] == {"limit": 2, "on": ["NodeLost", "ExitCode"], "exit_codes": [3, 42], "backoff_s": 60.0}
    assert (stored["keep_if_never"], stored["max_run_s"]) == (True, 5400.0)
    start_by = datetime.fromtimestamp(stored["start_by"], UTC)
    assert before + timedelta(hours=2) <= start_by <= datetime.now(UTC) + timedelta(hours=2)

    lines = described(jobdash("describe", evaluate, check=0).stdout)
    assert lines["Dependencies"] == f"train (#{train}) to succeed: Queued; prep (#{prep}) to finish: Queued"
    assert lines["Retries"] == "0 of 2"
    assert lines["Max run time"] == "1h30m"
    assert lines["Start by"] == f"{start_by:%Y-%m-%d %H:%M:%S} UTC"
    assert "Workflow" not in lines  # submitted on its own: in no workflow

    # What the dispatcher writes once a failure was retried (the live run is in the next test file).
    failure = {"cls": "NodeLost", "message": "NodeLost: node n3 failed (pod ev-worker-0)", "exit_code": None}
    Job.objects.filter(pk=evaluate).update(retries=1, failure=failure)
    lines = described(jobdash("describe", evaluate, check=0).stdout)
    assert lines["Retries"] == "1 of 2; last failure: NodeLost: node n3 failed (pod ev-worker-0)"
    as_json = json.loads(jobdash("describe", evaluate, "-o", "json", check=0).stdout)
    assert as_json["failure"] == {"class": "NodeLost", "message": failure["message"], "exit_code": None}
    assert [d["name"] for d in as_json["dependencies"]] == ["train", "prep"]


def test_an_array_is_one_job_per_index_and_a_workflow(jobdash):
    text = manifest("sweep").replace('duration-seconds: "10"', 'duration-seconds: "{{index}}0"')
    done = jobdash("submit", "-", "--array", "0-4%2", input=text, check=0)
    rows = columns("\n".join(done.stdout.splitlines()[:-1]))
    assert [row["NAME"] for row in rows] == [f"sweep-{i}" for i in range(5)]
    workflow = Workflow.objects.get()
    assert done.stdout.splitlines()[-1] == (
        f"array {workflow.pk}: 5 jobs (jobdash workflow {workflow.pk} describes it)"
    )
    assert 'duration-seconds: "30"' in Job.objects.get(name="sweep-3").manifest

    listed = columns(jobdash("workflows", check=0).stdout)
    assert listed == [
        {
            "ID": str(workflow.pk),
            "NAME": "sweep",
            "NAMESPACE": "team-a",
            "KIND": "array",
            "JOBS": "5",
            "PROGRESS": "0/5 Succeeded, 5 Queued",
        }
    ]
    Job.objects.filter(name__in=["sweep-0", "sweep-1"]).update(state="Succeeded")
    Job.objects.filter(name="sweep-2").update(state="Running")
    assert columns(jobdash("workflows", "-n", "team-a", check=0).stdout)[0]["PROGRESS"] == (
        "2/5 Succeeded, 1 Running, 2 Queued"
    )
    assert jobdash("workflows", "-n", "team-b", check=0).stdout.strip() == "No workflows."

    shown = jobdash("workflow", workflow.pk, check=0).stdout
    assert "Kind:         array 0-4%2" in shown and "Concurrency:  2 jobs at once" in shown
    jobs = columns(shown.split("Jobs:\n")[1])
    assert [(row["JOB"].split()[1], row["STATE"]) for row in jobs] == [
        ("sweep-0", "Succeeded"),
        ("sweep-1", "Succeeded"),
        ("sweep-2", "Running"),
        ("sweep-3", "Queued"),
        ("sweep-4", "Queued"),
    ]
    as_json = json.loads(jobdash("workflows", "-o", "json", check=0).stdout)
    assert [(w["id"], w["kind"], w["array"], w["concurrency"]) for w in as_json] == [(workflow.pk, "array", "0-4%2", 2)]
    # One job's description names its workflow and index.
    assert described(jobdash("describe", rows[3]["ID"], check=0).stdout)["Workflow"] == f"{workflow.pk}, index 3"


def test_a_workflow_file_is_one_workflow_shown_as_a_tree_and_cancelled_whole(jobdash, tmp_path):
    documents = [
        HEADER.format(name="pipeline"),
        with_annotation(manifest("report"), "jobdash.io/after", "ok:train-a,any:train-b"),
        with_annotation(manifest("train-a"), "jobdash.io/after", "prep"),
        manifest("prep"),
        with_annotation(manifest("train-b"), "jobdash.io/after", "ok:prep"),
    ]
    (tmp_path / "pipeline.yaml").write_text("---\n".join(documents))
    shown = jobdash("submit", tmp_path / "pipeline.yaml", "--retry-limit", "5", check=0).stdout
    workflow = Workflow.objects.get()
    ids = {job.name: job.pk for job in workflow.jobs.all()}
    assert (workflow.name, workflow.kind, len(ids)) == ("pipeline", "dag", 4)
    assert {job.options["retry"]["limit"] for job in workflow.jobs.all()} == {5}  # the flags apply to each job
    assert "Name:         team-a/pipeline" in shown and "Progress:     0/4 Succeeded, 4 Queued" in shown
    # Each job under the last job it waits for, in dependency order (prep first, report last).
    lines = shown.split("Jobs:\n")[1].splitlines()[1:]
    tree = [(len(line) - len(line.lstrip()) - 2, *line.split()[:2]) for line in lines]  # (indent, id, name)
    order = [(0, "prep"), (2, "train-a"), (2, "train-b"), (4, "report")]
    assert tree == [(indent, str(ids[name]), name) for indent, name in order]
    report = columns(shown.split("Jobs:\n")[1])[3]
    assert report["WAITS FOR"] == f"train-a (#{ids['train-a']}) to succeed; train-b (#{ids['train-b']}) to finish"
    assert jobdash("workflow", workflow.pk, check=0).stdout == shown

    cancelled = jobdash("workflow", workflow.pk, "--cancel", check=0).stdout
    assert "Progress:     0/4 Succeeded, 4 Cancelled" in cancelled and "Cancelled:    " in cancelled
    assert set(Job.objects.values_list("state", flat=True)) == {"Cancelled"}
    again = jobdash("workflow", workflow.pk, "--cancel")
    assert again.returncode == 1
    assert (
        again.stderr
        == f"jobdash: workflow {workflow.pk}: refused (HTTP 409): workflow {workflow.pk} is already cancelled\n"
    )
    as_yaml = jobdash("workflow", workflow.pk, "-o", "json", check=0).stdout
    assert {job["name"] for job in json.loads(as_yaml)["jobs"]} == set(ids)


def test_a_workflow_refused_names_the_document_at_fault(jobdash, tmp_path):
    header = HEADER.format(name="loop")
    loop = [
        header,
        with_annotation(manifest("a"), "jobdash.io/after", "b"),
        with_annotation(manifest("b"), "jobdash.io/after", "a"),
    ]
    (tmp_path / "loop.yaml").write_text("---\n".join(loop))
    refused = jobdash("submit", tmp_path / "loop.yaml")
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"jobdash: {tmp_path / 'loop.yaml'} (document 2): refused (HTTP 400): "
        'metadata.annotations["jobdash.io/after"]: dependency cycle: a -> b -> a',
        "jobdash: nothing was submitted: the 2 jobs go in one request, all or none",
    ]
    (tmp_path / "one.yaml").write_text(manifest("one"))
    alone = jobdash("submit", tmp_path / "loop.yaml", tmp_path / "one.yaml")
    assert (alone.returncode, alone.stderr) == (
        1,
        f"jobdash: {tmp_path / 'loop.yaml'}: a workflow file is submitted on its own\n",
    )
    late = jobdash("submit", tmp_path / "one.yaml", tmp_path / "loop.yaml")
    assert late.returncode == 1
    assert "(document 1): a Workflow document comes first, in a file submitted on its own" in late.stderr
    assert not Job.objects.exists() and not Workflow.objects.exists()


def test_bad_flags_name_the_flag_and_refusals_the_field(jobdash, tmp_path):
    after = jobdash("submit", "-", "--after", "sometimes:x", input=manifest("x"))
    assert after.returncode == 1
    assert after.stderr.startswith('jobdash: (stdin): refused (HTTP 400): after[0]: "sometimes:x" is not a dependency')
    unknown = jobdash("submit", "-", "--after", "ok:nobody", input=manifest("x"))
    assert "refused (HTTP 400): after: no job named 'nobody' in namespace 'team-a'" in unknown.stderr
    itself = jobdash("submit", "-", "--after", "ok:x", input=manifest("x"))
    assert "refused (HTTP 400): after: the job cannot wait for itself: 'x' is its own name" in itself.stderr
    retry_on = jobdash("submit", "-", "--retry-on", "Sometimes", input=manifest("x"))
    assert 'refused (HTTP 400): retry.on[0]: "Sometimes" is not a failure class' in retry_on.stderr
    limit = jobdash("submit", "-", "--retry-limit", "101", input=manifest("x"))
    assert "refused (HTTP 400): retry.limit: must be a whole number from 0 to 100" in limit.stderr
    array = jobdash("submit", "-", "--array", "5-1", input=manifest("x"))
    assert array.returncode == 1 and "refused (HTTP 400): array: " in array.stderr

    for flag, value in (
        ("--max-run-time", "soon"),
        ("--retry-backoff", "later"),
        ("--start-by", "tomorrow"),
        ("--retry-limit", "three"),
        ("--retry-exit-codes", "3,x"),
    ):
        usage = jobdash("submit", "-", flag, value, input=manifest("x"))
        assert usage.returncode == 2, (flag, usage.stderr)
        assert f"argument {flag}: " in usage.stderr.splitlines()[-1], usage.stderr
    assert "'soon' is not a duration" in jobdash("submit", "-", "--max-run-time", "soon", input="").stderr

    (tmp_path / "two.yaml").write_text(manifest("t-1") + "---\n" + manifest("t-2"))
    two = jobdash("submit", tmp_path / "two.yaml", "--array", "0-3")
    assert (two.returncode, two.stderr) == (1, "jobdash: --array makes an array of one manifest; 2 were given\n")
    missing = jobdash("workflow", "999999")
    assert (missing.returncode, missing.stderr) == (1, "jobdash: workflow 999999 not found (HTTP 404)\n")
    assert not Job.objects.exists()
