"""Workflows in the pages (issue 36), through Django's test client: the submit page's
options (dependencies, array, retries, deadlines) with every refusal beside its field and
nothing stored; the workflow page (progress, the SVG graph or grid, the jobs, one cancel,
for those who may); the list; the job page's workflow facts."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from jobdash.jobs import services, workflows
from jobdash.jobs.models import Job, JobDependency, State, Workflow
from jobdash.jobs.workflow_graph import GraphJob, dag, depths, grid

from .conftest import with_name

pytestmark = pytest.mark.django_db
HEADER = "apiVersion: jobdash.io/v1\nkind: Workflow\nmetadata:\n  name: pipeline\nspec:\n  concurrency: 2\n"


@pytest.fixture
def browser(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def mnist(example_text):
    def named(name: str, after: str | None = None) -> str:
        text = with_name(example_text("mnist-cpu"), name)
        if after is not None:
            text = text.replace("  annotations:\n", f'  annotations:\n    jobdash.io/after: "{after}"\n', 1)
        return text

    return named


def post_submit(client, manifest: str, **options):
    return client.post("/submit/", {"namespace": "team-a", "manifest": manifest, **options})


def pipeline(alice, mnist) -> Workflow:
    jobs = [
        services.Submission(mnist("preprocess")),
        services.Submission(mnist("train", after="ok:preprocess")),
        services.Submission(mnist("evaluate", after="any:train")),
        services.Submission(mnist("cleanup", after="notok:train")),
    ]
    workflow, _ = workflows.workflow_submit(user=alice, name="pipeline", submissions=jobs, source="web")
    return workflow


def test_an_array_from_the_submit_page_is_a_workflow_drawn_as_a_grid(browser, mnist):
    response = post_submit(browser, mnist("sweep"), array="0-11%3")
    workflow = Workflow.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/workflows/{workflow.pk}/"
    assert (workflow.kind, workflow.array, workflow.concurrency, workflow.jobs.count()) == ("array", "0-11%3", 3, 12)
    page = browser.get(response["Location"]).content.decode()
    assert "at most 3 jobs admitted at once" in page and "<code>0-11%3</code>" in page
    svg = page[page.index('<svg id="workflow-graph"') : page.index("</svg>")]
    assert 'class="array-grid"' in svg
    cells = re.findall(r"<title>(sweep-\d+) — Queued</title>", svg)
    assert cells == [f"sweep-{i}" for i in range(12)]
    # ten a row: index 10 starts the second row, below index 0
    assert re.search(r'<rect x="12" y="48" width="48"', svg)
    assert "0 of 12 finished" in page and re.search(r"Queued</span>\s+12</span>", page)


def test_the_options_become_the_jobs_options_and_the_job_page_says_them(browser, alice, mnist):
    train = services.job_submit(user=alice, manifest=mnist("train"), source="web")
    start_by = (timezone.now() + timedelta(hours=5)).replace(second=0, microsecond=0)
    response = post_submit(
        browser,
        mnist("evaluate"),
        after="ok:train",
        retry_limit="5",
        retry_on=["OOMKilled", "NodeLost"],
        retry_exit_codes="3, 42",
        max_run_time="2h",
        start_by=start_by.strftime("%Y-%m-%dT%H:%M"),
        keep_if_never_satisfied="on",
    )
    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get(name="evaluate")
    assert job.options["retry"] == {
        "limit": 5,
        "on": ["NodeLost", "OOMKilled"],
        "exit_codes": [3, 42],
        "backoff_s": 30.0,
    }
    assert (job.options["max_run_s"], job.options["keep_if_never"], job.start_by) == (7200.0, True, start_by)
    assert JobDependency.objects.get(job=job).on_id == train.pk
    Job.objects.filter(pk=job.pk).update(
        retries=1, failure={"cls": "ExitCode", "message": "ExitCode: exit code 3 (pod p, container c)", "exit_code": 3}
    )
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    waits = page[page.index('id="job-waits-for"') :]
    assert f'<a href="/jobs/{train.pk}/">train</a> (#{train.pk}) to succeed; now' in waits
    retries = page[page.index('id="job-retries"') :]
    assert retries.startswith(
        'id="job-retries">1 of 5 <small class="inline">(on NodeLost, OOMKilled; exit codes 3, 42)'
    )
    assert "<strong>ExitCode</strong>: exit code 3 (pod p, container c)" in page
    assert 'id="job-max-run">2h' in page and 'id="job-start-by"' in page


def field_errors(response) -> dict[str, list[str]]:
    return {name: list(errors) for name, errors in response.context["form"].errors.items()}


def test_every_refusal_shows_beside_its_field_and_nothing_is_stored(browser, mnist):
    # what the form reads itself (a number, a duration) first ...
    response = post_submit(browser, mnist("evaluate"), retry_limit="three", max_run_time="soon")
    assert field_errors(response) == {
        "retry_limit": ["Enter a whole number."],
        "max_run_time": ['"soon" is not a duration: use 90m, 12h or 2d'],
    }
    # ... then what the options' parser refuses, every one at once, with the API's messages
    response = post_submit(
        browser,
        mnist("evaluate"),
        after="sometimes:x",
        retry_limit="500",
        retry_exit_codes="300",
        retry_on=["Unknown"],
        max_run_time="400d",
        start_by="2001-01-01T10:00",
    )
    assert response.status_code == 200
    errors = field_errors(response)
    assert set(errors) == {"after", "retry_limit", "retry_exit_codes", "max_run_time", "start_by"}, errors
    assert errors["retry_limit"] == ["must be a whole number from 0 to 100"]
    assert "is not an exit code" in errors["retry_exit_codes"][0] and "in the past" in errors["start_by"][0]
    page = response.content.decode()
    after = page[page.index('class="option option-after"') : page.index('class="option option-array"')]
    assert "is not a dependency" in after and 'class="errorlist' in after
    # an unknown job, an array that is no array, an array of a workflow: each at its field
    assert field_errors(post_submit(browser, mnist("e"), after="ok:nobody")) == {
        "after": ["no job named 'nobody' in namespace 'team-a'"]
    }
    assert "array" in field_errors(post_submit(browser, mnist("e"), array="5-1"))
    stream = "---\n".join([HEADER, mnist("a")])
    assert field_errors(post_submit(browser, stream, array="0-3")) == {
        "array": ["an array is one manifest: paste one document, not a workflow"]
    }
    # an array's jobs all refusing the same option say it once
    assert field_errors(post_submit(browser, mnist("s"), array="0-3", after="ok:nobody")) == {
        "after": ["no job named 'nobody' in namespace 'team-a'"]
    }
    assert not Job.objects.exists() and not Workflow.objects.exists()


def test_a_workflow_document_from_the_submit_page_is_drawn_in_layers(browser, mnist):
    stream = "---\n".join(
        [HEADER, mnist("preprocess"), mnist("train", after="ok:preprocess"), mnist("eval", after="train")]
    )
    response = post_submit(browser, stream, retry_limit="1")
    workflow = Workflow.objects.get()
    assert response["Location"] == f"/workflows/{workflow.pk}/"
    assert (workflow.name, workflow.kind, workflow.concurrency) == ("pipeline", "dag", 2)
    assert [j.options["retry"]["limit"] for j in workflow.jobs.order_by("id")] == [1, 1, 1]
    page = browser.get(response["Location"]).content.decode()
    crumbs = re.search(r'<p class="crumbs">(.*?)</p>', page)[1]
    assert crumbs.endswith('<a href="/ns/team-a/">team-a</a>'), crumbs  # no trailing " /"
    # why a job waits, then its message: apart, not "Waiting for quotaquota requests.cpu ..."
    workflow.jobs.filter(name="preprocess").update(reason="QuotaExceeded", message="quota requests.cpu: needs 2")
    page = browser.get(response["Location"]).content.decode()
    assert "<strong>Waiting for quota</strong><br><small>quota requests.cpu: needs 2</small>" in page
    svg = page[page.index('<svg id="workflow-graph"') : page.index("</svg>")]
    for name in ("preprocess", "train", "eval"):
        assert f"<title>{name} — Queued</title>" in svg
    assert "<title>train after ok:preprocess</title>" in svg and "<title>eval after ok:train</title>" in svg
    # layers by depth, left to right
    xs = [int(x) for x in re.findall(r'class="node node-queued"><title>[^<]*</title><rect x="(\d+)"', svg)]
    assert xs == [12, 252, 492]


def test_the_graph_shows_every_condition_and_escapes_names(browser, alice, mnist):
    workflow = pipeline(alice, mnist)
    Job.objects.filter(name="cleanup").update(name="<b>clean</b>", state=State.FAILED)
    page = browser.get(f"/workflows/{workflow.pk}/").content.decode()
    svg = page[page.index('<svg id="workflow-graph"') : page.index("</svg>")]
    for condition in ("ok", "any", "notok"):
        assert f'<g class="edge edge-{condition}">' in svg
    assert "&lt;b&gt;clean&lt;/b&gt; after notok:train" in svg and "<b>" not in page
    assert 'class="node node-failed"' in svg
    assert "1 of 4 finished" in page
    rows = page[page.index('id="workflow-jobs"') :]
    assert rows.count("<tr>") == 5 and "0 of 3" in rows


def test_who_may_not_cancel_sees_no_button_and_is_refused(client, alice, bob, team_a, mnist):
    workflow = pipeline(alice, mnist)
    url = f"/workflows/{workflow.pk}/"
    # bob is no member of team-a: the workflow does not exist for him
    client.force_login(bob)
    assert client.get(url).status_code == 404 and client.post(url + "cancel/").status_code == 404
    assert "pipeline" not in client.get("/workflows/").content.decode()
    # carol sees team-a but did not submit it: cancelling others' needs the admin role
    carol = User.objects.create_user("carol")
    team_a.members.add(carol)
    client.force_login(carol)
    page = client.get(url).content.decode()
    assert "pipeline" in page and "Cancel workflow" not in page
    assert client.post(url + "cancel/").status_code == 403
    assert not Job.objects.filter(state=State.CANCELLED).exists()
    # its submitter cancels it, once
    client.force_login(alice)
    assert "Cancel workflow" in client.get(url).content.decode()
    response = client.post(url + "cancel/", follow=True)
    assert response.redirect_chain == [(url, 302)]
    assert set(Job.objects.values_list("state", flat=True)) == {State.CANCELLED}
    page = response.content.decode()
    assert "every active job cancelled" in page and "Cancel workflow" not in page and 'id="workflow-cancelled"' in page


def test_the_list_filters_by_namespace_and_is_in_the_navigation(browser, alice, staff, team_b, client, mnist):
    workflow = pipeline(alice, mnist)
    page = browser.get("/workflows/").content.decode()
    assert '<a href="/workflows/">Workflows</a>' in page
    assert f'href="/workflows/{workflow.pk}/">pipeline</a>' in page and "0 of 4 jobs finished" in page
    assert "pipeline" not in browser.get("/workflows/?namespace=team-b").content.decode()
    assert "pipeline" in browser.get("/workflows/?namespace=team-a").content.decode()


def test_the_layout_stays_legible_for_a_dag_of_50_and_an_array_of_100():
    # a fan: one job, 48 after it, one after all of them
    fan = [GraphJob(1, "start", "Succeeded")]
    fan += [GraphJob(i, f"trial-{i}", "Queued", after=(("ok", 1),)) for i in range(2, 50)]
    fan += [GraphJob(50, "report", "Queued", after=tuple(("any", i) for i in range(2, 50)))]
    assert depths(fan)[50] == 2
    drawn = dag(fan)
    boxes = {(n["x"], n["y"]) for n in drawn["nodes"]}
    assert len(boxes) == 50  # no two jobs drawn on each other
    assert drawn["width"] == 12 * 2 + 3 * 240 - 72 and drawn["height"] == 12 * 2 + 48 * 58 - 18
    assert len(drawn["edges"]) == 48 * 2
    chain = [GraphJob(i, f"step-{i}", "Queued", after=(("ok", i - 1),) if i else ()) for i in range(1000)]
    assert depths(chain)[999] == 999  # (no recursion: a long chain is fine)
    squares = grid([GraphJob(i, f"sweep-{i}", "Queued", index=i) for i in range(100)])
    assert (squares["width"], squares["height"]) == (12 * 2 + 10 * 52 - 4, 12 * 2 + 10 * 36 - 4)
    assert squares["cells"][99]["index"] == 99 and squares["cells"][99]["x"] == 12 + 9 * 52
