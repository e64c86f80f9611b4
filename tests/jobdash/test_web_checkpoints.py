"""Checkpoints in the pages and the console (issue 48), through Django's test client: the
submit page's checkpoint fields (each refusal beside its field, nothing stored), the check
beside the editor, the job page's facts, the admin's submit form and the namespace's default
minimum run time."""

import pytest

from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State

from .conftest import with_name

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def mnist(example_text):
    def named(name: str, **annotations: str) -> str:
        text = with_name(example_text("mnist-cpu"), name)
        for key, value in annotations.items():
            text = text.replace("  annotations:\n", f'  annotations:\n    jobdash.io/{key}: "{value}"\n', 1)
        return text

    return named


def post_submit(client, manifest: str, **options):
    return client.post("/submit/", {"namespace": "team-a", "manifest": manifest, **options})


def test_the_submit_page_s_fields_over_the_annotations(browser, mnist):
    page = browser.get("/submit/").content.decode()
    assert 'name="checkpoint_every"' in page and 'name="min_runtime"' in page
    response = post_submit(
        browser, mnist("train", **{"checkpoint-every": "1h"}), checkpoint_every="10m", checkpoint_on_notice="2m"
    )
    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get(name="train")
    assert (job.checkpoint_every_s, job.checkpoint_on_notice_s, job.min_runtime_s) == (600, 120, None)


def test_a_bad_value_shows_beside_its_field_and_nothing_is_stored(browser, mnist, settings):
    settings.JOBDASH_MAX_MIN_RUNTIME_SECONDS = 600.0
    response = post_submit(browser, mnist("train"), min_runtime="11m", checkpoint_every="often")
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors["min_runtime"] == [
        "11m is more than the 10m a job may run unpreempted (JOBDASH_MAX_MIN_RUNTIME_SECONDS=600)"
    ]
    assert "is not a duration" in errors["checkpoint_every"][0]
    # An annotation's problem is the manifest's, with its path.
    response = post_submit(browser, mnist("train", **{"checkpoint-on-notice": "1d"}))
    problems = [(p.path, p.message) for p in response.context["form"].manifest_problems]
    assert [path for path, _ in problems] == ['metadata.annotations["jobdash.io/checkpoint-on-notice"]']
    assert not Job.objects.exists()


def test_the_check_beside_the_editor_names_a_bad_annotation(browser, mnist):
    text = mnist("train", **{"checkpoint-every": "sometimes"})
    page = browser.post("/submit/check/", {"manifest": text, "namespace": "team-a"}).content.decode()
    assert "jobdash.io/checkpoint-every" in page and "is not a checkpoint interval" in page


def test_the_job_page_says_what_it_declared_and_reported(browser, alice, mnist):
    job = services.job_submit(
        user=alice, manifest=mnist("train", **{"checkpoint-every": "10m", "min-runtime": "30m"}), source="web"
    )
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    services.job_checkpointed(job_id=job.pk, user=alice)
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    facts = page[page.index('id="job-checkpoints"') :]
    facts = facts[: facts.index("</dd>")]
    assert "every 10m; runs at least 30m before it may be preempted; 1 reported, the last at <time" in facts
    timeline = page[page.index("Checkpointed") :]
    assert "reported by alice" in timeline


def test_the_admin_submits_with_the_same_checks(admin_client, mnist):
    bad = admin_client.post(
        "/admin/jobs/job/add/", {"namespace": "team-a", "manifest": mnist("train"), "checkpoint_on_notice": "-1"}
    )
    assert bad.status_code == 200 and bad.context["form"].errors["checkpoint_on_notice"]
    assert not Job.objects.exists()
    response = admin_client.post(
        "/admin/jobs/job/add/", {"namespace": "team-a", "manifest": mnist("train"), "min_runtime": "15m"}
    )
    assert response.status_code == 302 and Job.objects.get().min_runtime_s == 900
    page = admin_client.get(response["Location"]).content.decode()
    assert "Min runtime s" in page and "Last checkpoint at" in page


def test_the_admin_sets_a_namespace_s_default_minimum_run_time(admin_client, team_a, alice, mnist):
    form = {"name": "team-a", "weight": 1, "policy": "", "members": [alice.pk], "groups": []}
    response = admin_client.post(
        f"/admin/jobs/namespace/{team_a.pk}/change/", {**form, "default_min_runtime_seconds": -5}
    )
    assert response.status_code == 200  # refused on the form
    response = admin_client.post(
        f"/admin/jobs/namespace/{team_a.pk}/change/", {**form, "default_min_runtime_seconds": 1200}
    )
    assert response.status_code == 302
    assert Namespace.objects.get(pk=team_a.pk).default_min_runtime_seconds == 1200
    assert services.job_submit(user=alice, manifest=mnist("train"), source="web").min_runtime_s == 1200
