"""The submit page's live check understands what its form submits: a workflow (a Workflow
document, then its jobs) is "a workflow of N jobs" with each job's check, refused exactly
where submitting would refuse it (line numbers in the whole text); an array is checked as
its jobs; several documents without a Workflow document are refused, by the check and the
form alike, saying what to do instead. The workflow examples are offered and pass."""

import html
import re
from pathlib import Path

import pytest
from django.utils import timezone

from jobdash.jobs import examples, workflows
from jobdash.jobs.models import ClusterState, Job, Workflow

from .conftest import with_name

pytestmark = pytest.mark.django_db
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PIPELINE = (EXAMPLES / "workflows" / "pipeline.yaml").read_text()
SWEEP = (EXAMPLES / "workflows" / "sweep.yaml").read_text()


@pytest.fixture
def browser(client, alice):
    client.force_login(alice)
    return client


def check(client, manifest: str, **fields) -> str:
    return client.post("/submit/check/", {"manifest": manifest, **fields}).content.decode()


def problems(part: str) -> list[str]:
    items = re.findall(r"<li>(.*?)</li>", part, re.S)
    return [html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", item))).strip() for item in items]


def text_of(part: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", part)))


def line_of(text: str, needle: str, after: str = "") -> int:
    start = text.index(after) if after else 0
    return text[: text.index(needle, start)].count("\n") + 1


def test_a_workflow_is_a_workflow_of_its_jobs_each_checked(browser):
    ClusterState.objects.create(
        id=1,
        updated_at=timezone.now(),
        quotas={"team-a": {"hard": {"requests.cpu": 4000}, "used": {}, "reserved": {}}},
        nodes=[],
    )
    part = check(browser, PIPELINE)
    assert "problem" not in part, problems(part)
    assert "Valid for team-a: a workflow of 3 jobs, mnist-pipeline." in text_of(part)
    jobs = re.findall(r'<strong class="job-name">([a-z-]+)</strong> \((\w+)(?:, after ([^)]*))?\)', part)
    assert jobs == [
        ("mnist-prepare", "Job", ""),
        ("mnist-train", "PyTorchJob", "ok:mnist-prepare"),
        ("mnist-evaluate", "Job", "ok:mnist-train"),
    ]
    assert "<span>cpu 6</span>" in part and "<span>pods 4</span>" in part  # the total: 1 + 2x2 + 1 cpu
    assert part.count("fits the free quota now") == 3
    # a job too big for the quota is said of that job alone
    ClusterState.objects.filter(id=1).update(quotas={"team-a": {"hard": {"requests.cpu": 3000}}})
    part = check(browser, PIPELINE)
    assert part.count("fits the free quota now") == 2
    assert "can never fit the quota: requests.cpu needs 4, the quota is 3" in part
    assert not Job.objects.exists() and not Workflow.objects.exists()


def test_a_workflow_is_refused_where_submitting_refuses_it_with_lines_in_the_whole_text(browser):
    bad = PIPELINE.replace('"ok:mnist-train"', '"ok:mnist-trian"').replace(
        "      replicas: 1\n      restartPolicy: OnFailure", "      replicas: -1\n      restartPolicy: OnFailure", 1
    )
    part = check(browser, bad)
    found = problems(part)
    replicas = line_of(bad, "replicas: -1")
    assert any(f"line {replicas} [2].spec.pytorchReplicaSpecs.Master.replicas" in p for p in found), found
    assert len(found) == 1, found  # (dependencies are looked at once every document is valid, as submitting does)
    # the form refuses the same document, and stores nothing
    form = browser.post("/submit/", {"namespace": "team-a", "manifest": bad}).content.decode()
    assert "[2].spec.pytorchReplicaSpecs.Master.replicas" in form and not Job.objects.exists()

    unknown = check(browser, PIPELINE.replace('"ok:mnist-train"', '"ok:mnist-trian"'))
    assert [p for p in problems(unknown) if "mnist-trian" in p] == [
        f"line {line_of(PIPELINE, 'jobdash.io/after', 'name: mnist-evaluate')} "
        "[3].metadata.annotations[\"jobdash.io/after\"]: no job named 'mnist-trian' in namespace 'team-a'"
    ]
    header = check(browser, PIPELINE.replace("  name: mnist-pipeline", "  name: Mnist_Pipeline"))
    assert problems(header) == [
        f"line {line_of(PIPELINE, 'name: mnist-pipeline')} [0].metadata.name: "
        + ("required: a DNS label (lower-case letters, digits, '-')")
    ]
    alone = check(browser, PIPELINE.split("\n---\n")[0])
    assert problems(alone) == [workflows.NO_JOBS]


def test_several_documents_without_a_workflow_are_refused_alike_by_the_check_and_the_form(browser, example_text):
    stream = with_name(example_text("mnist-cpu"), "one") + "---\n" + with_name(example_text("mnist-cpu"), "two")
    said = workflows.several_documents(2)
    assert problems(check(browser, stream)) == [said]
    assert "expected one document" not in check(browser, stream)
    form = browser.post("/submit/", {"namespace": "team-a", "manifest": stream}).content.decode()
    assert said in html.unescape(form) and not Job.objects.exists()


def test_an_array_is_checked_as_its_jobs(browser, example_text):
    part = check(browser, SWEEP, array="0-9%3")
    assert "problem" not in part, problems(part)
    assert "Valid for team-a: an array of 10 jobs, lr-sweep-0 … lr-sweep-9, at most 3 admitted at once" in text_of(part)
    # the index in the name: a name only with the array, as the form submits it
    marked = SWEEP.replace("  name: lr-sweep", "  name: trial-{{index}}-lr")
    assert "an array of 3 jobs, trial-4-lr … trial-6-lr" in text_of(check(browser, marked, array="4-6"))
    assert "metadata.name" in check(browser, marked)
    # the longest name is the last one's
    long = SWEEP.replace("  name: lr-sweep", "  name: " + "x" * 61)
    assert "is longer than 63 characters" in check(browser, long, array="0-10")
    assert problems(check(browser, SWEEP, array="5-1"))[0].startswith("array: ")
    assert problems(check(browser, PIPELINE, array="0-3")) == [f"array: {workflows.ARRAY_OF_ONE}"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("name", ["workflows/pipeline", "workflows/sweep"])
def test_the_workflow_examples_are_offered_and_load_with_a_check_that_passes(browser, name):
    assert name in examples.example_names()
    page = browser.get("/submit/").content.decode()
    assert f'href="?example={name}"' in page
    loaded = browser.get(f"/submit/?example={name}").content.decode()
    array = re.search(r'name="array" value="([^"]*)"', loaded)
    assert (array[1] if array else "") == ("0-9%3" if name.endswith("sweep") else "")
    text = examples.example_text(name)
    assert text is not None and text.splitlines()[0] in html.unescape(loaded)
    part = check(browser, text, array=array[1] if array else "")
    assert "problem" not in part and 'id="check-ok"' in part, problems(part)
    assert "a workflow of 3 jobs" in part if name.endswith("pipeline") else "an array of 10 jobs" in part
    assert examples.example_text("../pyproject") is None and examples.example_text("workflows/../mnist-cpu") is None
