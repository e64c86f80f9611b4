"""Workflows through the API (issue 36): dependencies by name or id, a workflow declared in one
YAML stream (all or nothing, cycles and unknown jobs refused naming them), arrays with the
index substituted, the options' 400s naming the field, and one cancel."""

import re
from pathlib import Path

import pytest
import yaml

from jobdash.jobs.models import Job, JobDependency, Workflow

from .conftest import with_name

pytestmark = pytest.mark.django_db
YAML = "application/yaml"
URL = "/api/v1/jobs/"
WORKFLOWS = "/api/v1/workflows/"


@pytest.fixture
def mnist(example_text):
    def named(name: str, after: str | None = None) -> str:
        text = with_name(example_text("mnist-cpu"), name)
        if after is not None:
            text = text.replace("  annotations:\n", f'  annotations:\n    jobdash.io/after: "{after}"\n', 1)
        return text

    return named


def errors(response) -> list[tuple[str, str]]:
    return [(e["path"], e["message"]) for e in response.json()["errors"]]


def test_a_job_waits_on_another_by_name_and_by_id(api, mnist):
    train = api.post(URL, {"manifest": mnist("train")}, format="json").json()
    response = api.post(
        URL, {"manifest": mnist("evaluate"), "after": ["ok:train", f"any:{train['id']}"]}, format="json"
    )
    # (the same job twice is refused: one edge per pair)
    assert response.status_code == 400 and errors(response)[0][0] == "after"
    response = api.post(URL, {"manifest": mnist("evaluate"), "after": "ok:train"}, format="json")
    assert response.status_code == 201, response.content
    job = response.json()
    assert job["dependencies"] == [{"job": train["id"], "name": "train", "condition": "ok", "state": "Queued"}]
    assert job["retry_limit"] == 3 and job["retries"] == 0 and job["failure"] is None
    # The annotation does the same for a raw YAML body (kubectl's path has only that).
    response = api.post(URL, mnist("report", after=f"notok:{train['id']}"), content_type=YAML)
    assert response.status_code == 201, response.content
    assert JobDependency.objects.get(job_id=response.json()["id"]).condition == "notok"


def test_unknown_dependencies_and_bad_options_are_400s_naming_the_field(api, mnist):
    response = api.post(URL, {"manifest": mnist("evaluate"), "after": "ok:nobody"}, format="json")
    assert errors(response) == [("after", "no job named 'nobody' in namespace 'team-a'")]
    response = api.post(URL, mnist("evaluate", after="sometimes:x"), content_type=YAML)
    assert response.status_code == 400
    assert errors(response)[0][0] == 'metadata.annotations["jobdash.io/after"]'
    response = api.post(URL, {"manifest": mnist("e"), "retry": {"limit": -1}}, format="json")
    assert response.status_code == 400 and errors(response)[0][0] == "retry.limit"
    response = api.post(URL + "?max_run_seconds=soon", mnist("e"), content_type=YAML)
    assert response.status_code == 400 and errors(response)[0][0] == "max_run_seconds"
    assert not Job.objects.exists()


def test_a_job_cannot_wait_for_itself(api, mnist):
    """Its own name is the first job that name finds (the jobs submitted with it come first),
    also when an earlier job of that name has ended."""
    said = "the job cannot wait for itself: 'train' is its own name"
    response = api.post(URL, {"manifest": mnist("train"), "after": "ok:train"}, format="json")
    assert response.status_code == 400 and errors(response) == [("after", said)]
    earlier = api.post(URL, {"manifest": mnist("train")}, format="json").json()
    assert api.post(f"{URL}{earlier['id']}/cancel/").status_code == 200
    response = api.post(URL, mnist("train", after="train"), content_type=YAML)
    assert errors(response) == [('metadata.annotations["jobdash.io/after"]', said)]
    stream = mnist("prep") + "---\n" + mnist("train", after="ok:prep,any:train")
    response = api.post(URL, stream, content_type=YAML)
    assert errors(response) == [('[1].metadata.annotations["jobdash.io/after"]', said)]
    assert Job.objects.count() == 1


def test_a_workflow_in_one_stream_is_stored_whole_with_its_edges(api, mnist):
    stream = "\n---\n".join(
        [
            "apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: pipeline\n",
            mnist("preprocess"),
            mnist("train", after="ok:preprocess"),
            mnist("evaluate", after="ok:train"),
        ]
    )
    response = api.post(URL, stream, content_type=YAML)
    assert response.status_code == 201, response.content
    jobs = response.json()
    assert [j["name"] for j in jobs] == ["preprocess", "train", "evaluate"]
    workflow = Workflow.objects.get()
    assert (workflow.name, workflow.kind, {j["workflow"] for j in jobs}) == ("pipeline", "dag", {workflow.pk})
    detail = api.get(f"{WORKFLOWS}{workflow.pk}/").json()
    assert detail["progress"] == {"Queued": 3}
    edges = {j["name"]: [e["job"] for e in j["after"]] for j in detail["jobs"]}
    assert edges == {"preprocess": [], "train": [jobs[0]["id"]], "evaluate": [jobs[1]["id"]]}
    assert [w["name"] for w in api.get(WORKFLOWS).json()["results"]] == ["pipeline"]


def test_a_cycle_or_an_unknown_name_refuses_the_whole_workflow(api, mnist):
    header = "apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: loop\n"
    stream = "\n---\n".join([header, mnist("a", after="ok:c"), mnist("b", after="ok:a"), mnist("c", after="ok:b")])
    response = api.post(URL, stream, content_type=YAML)
    assert response.status_code == 400
    # (paths count the stream's documents: the Workflow header is [0])
    assert errors(response) == [('[1].metadata.annotations["jobdash.io/after"]', "dependency cycle: a -> c -> b -> a")]
    stream = "\n---\n".join([header, mnist("a"), mnist("b", after="ok:x")])
    response = api.post(URL, stream, content_type=YAML)
    assert errors(response) == [
        ('[2].metadata.annotations["jobdash.io/after"]', "no job named 'x' in namespace 'team-a'")
    ]
    assert not Job.objects.exists() and not Workflow.objects.exists()


def test_an_array_makes_a_job_per_index_with_its_limit(api, mnist):
    text = mnist("sweep").replace("--max_steps=1000", "--max_steps={{index}}00")
    response = api.post(URL + "?array=0-19%255", text, content_type=YAML)
    assert response.status_code == 201, response.content
    jobs = response.json()
    assert [j["name"] for j in jobs] == [f"sweep-{i}" for i in range(20)]
    assert [j["array_index"] for j in jobs] == list(range(20))
    workflow = Workflow.objects.get()
    assert (workflow.kind, workflow.array, workflow.concurrency) == ("array", "0-19%5", 5)
    assert "--max_steps=700" in Job.objects.get(name="sweep-7").manifest
    response = api.post(URL, {"manifest": mnist("x"), "array": "5-1"}, format="json")
    assert response.status_code == 400 and errors(response)[0][0] == "array"


def test_the_index_marker_in_the_name_is_where_the_index_goes(api, mnist):
    text = mnist("trial-{{index}}-lr")
    response = api.post(URL, {"manifest": text, "array": "1,3"}, format="json")
    assert response.status_code == 201, response.content
    assert [j["name"] for j in response.json()] == ["trial-1-lr", "trial-3-lr"]
    stored = Job.objects.get(name="trial-3-lr")
    assert "trial-3-lr" in stored.manifest and "{{index}}" not in stored.manifest


def test_cancelling_a_workflow_cancels_its_active_jobs_once(api, mnist):
    stream = "\n---\n".join(
        ["apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: two\n", mnist("a"), mnist("b", after="a")]
    )
    workflow = api.post(WORKFLOWS, stream, content_type=YAML).json()
    response = api.post(f"{WORKFLOWS}{workflow['id']}/cancel/")
    assert response.status_code == 200, response.content
    assert response.json()["progress"] == {"Cancelled": 2}
    assert api.post(f"{WORKFLOWS}{workflow['id']}/cancel/").status_code == 409


def test_a_namespace_default_maximum_run_time_applies_to_jobs_that_state_none(api, mnist):
    from jobdash.jobs.models import Namespace

    Namespace.objects.filter(name="team-a").update(default_max_run_seconds=3600)
    own = api.post(URL, {"manifest": mnist("own"), "max_run_seconds": 60}, format="json").json()
    default = api.post(URL, {"manifest": mnist("default")}, format="json").json()
    assert (own["max_run_seconds"], default["max_run_seconds"]) == (60, 3600)


WORKFLOW_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workflows"


def test_the_documented_pipeline_is_accepted_as_a_three_step_graph(api):
    text = (WORKFLOW_EXAMPLES / "pipeline.yaml").read_text()
    response = api.post(WORKFLOWS, text, content_type=YAML)
    assert response.status_code == 201, response.content
    workflow = response.json()
    assert (workflow["name"], workflow["kind"], workflow["progress"]) == ("mnist-pipeline", "dag", {"Queued": 3})
    ids = {job["name"]: job["id"] for job in workflow["jobs"]}
    edges = {job["name"]: job["after"] for job in workflow["jobs"]}
    assert edges == {
        "mnist-prepare": [],
        "mnist-train": [{"job": ids["mnist-prepare"], "condition": "ok"}],
        "mnist-evaluate": [{"job": ids["mnist-train"], "condition": "ok"}],
    }
    assert Job.objects.get(name="mnist-train").kind == "PyTorchJob"


def test_the_documented_sweep_is_an_array_of_ten_three_at_once(api):
    text = (WORKFLOW_EXAMPLES / "sweep.yaml").read_text()
    response = api.post(URL + "?array=0-9%253", text, content_type=YAML)
    assert response.status_code == 201, response.content
    jobs = response.json()
    assert [(j["name"], j["array_index"]) for j in jobs] == [(f"lr-sweep-{i}", i) for i in range(10)]
    workflow = Workflow.objects.get()
    assert (workflow.kind, workflow.array, workflow.concurrency) == ("array", "0-9%3", 3)
    assert "--trial-index=7" in Job.objects.get(name="lr-sweep-7").manifest


def test_the_workflow_examples_pass_kubesims_strict_field_validation():
    """Their jobs are as kubectl would send them (a kubectl user may create them one by one)."""
    from kubesim import openapi
    from kubesim.resources import BY_API_VERSION_KIND

    for path in sorted(WORKFLOW_EXAMPLES.glob("*.yaml")):
        for manifest in yaml.safe_load_all(path.read_text()):
            if manifest["kind"] == "Workflow":
                continue
            rt = BY_API_VERSION_KIND[(manifest["apiVersion"], manifest["kind"])]
            assert openapi.unknown_fields(rt, manifest) == [], path.name


def test_a_workflow_document_with_a_field_it_does_not_have_is_refused_naming_it(api, mnist):
    header = "apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: steps\nspec:\n  steps: [a, b]\n"
    response = api.post(URL, "\n---\n".join([header, mnist("a"), mnist("b")]), content_type=YAML)
    assert response.status_code == 400
    assert errors(response) == [
        (
            "[0].spec.steps",
            "unknown field: a Workflow's spec has only concurrency; its jobs are the documents after it, "
            "separated by ---",
        )
    ]
    header = "apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: steps\nsteps: [a]\n"
    response = api.post(WORKFLOWS, "\n---\n".join([header, mnist("a")]), content_type=YAML)
    assert response.status_code == 400 and errors(response)[0][0] == "[0].steps"
    assert not Job.objects.exists() and not Workflow.objects.exists()


def test_the_submit_page_lists_the_workflow_examples_after_the_one_job_ones(client, alice):
    """examples/workflows/ is offered too, now that the check understands a workflow and an
    array (test_submit_check_streams): after the one-job examples, named by their folder."""
    client.force_login(alice)
    page = client.get("/submit/").content.decode()
    offered = re.findall(r'href="\?example=([^"]+)"', page)
    assert offered[-2:] == ["workflows/pipeline", "workflows/sweep"] and "mnist-cpu" in offered
