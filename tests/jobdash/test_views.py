"""The server-rendered pages, through Django's test client (the browser suite comes later)."""

import logging
import sys

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from jobdash import logs
from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(client, alice):
    client.force_login(alice)
    return client


def test_login_page_and_login_flow(client, alice):
    assert client.get("/").status_code == 302
    page = client.get("/login/")
    assert page.status_code == 200 and b'name="username"' in page.content
    response = client.post("/login/", {"username": "alice", "password": "alice-pass-123"})
    assert response.status_code == 302
    assert b"team-a" in client.get("/").content
    bad = client.post("/login/", {"username": "alice", "password": "nope"})
    assert b"did not match" in bad.content


def test_logout(browser):
    assert browser.post("/logout/").status_code == 302
    assert browser.get("/").status_code == 302


def test_submit_page_offers_examples_and_loads_one(browser, example_text):
    page = browser.get("/submit/")
    assert page.status_code == 200
    for name in ("mnist-cpu", "dist-ps-worker", "resnet-multi-gpu"):
        assert f"?example={name}".encode() in page.content
    loaded = browser.get("/submit/?example=mnist-cpu").content.decode()
    assert "tf-mnist-with-summaries" in loaded
    assert (
        "tensorflow"
        not in browser.get("/submit/?example=../../etc/passwd")
        .content.decode()
        .split("<textarea")[1]
        .split("</textarea>")[0]
    )


def test_submit_form_creates_job_and_redirects(browser, example_text):
    response = browser.post("/submit/", {"namespace": "", "priority": 0, "manifest": example_text("mnist-cpu")})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert (job.source, job.priority, job.manifest) == ("web", 0, example_text("mnist-cpu"))


def test_a_members_numeric_priority_is_refused_on_the_form(browser, example_text):
    response = browser.post("/submit/", {"namespace": "", "priority": 4, "manifest": example_text("mnist-cpu")})
    assert response.status_code == 200 and "only staff may set a numeric priority" in response.content.decode()
    assert not Job.objects.exists()


def test_submit_form_shows_errors_with_paths_and_keeps_the_text(browser):
    text = "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: Bad_Name, namespace: team-a}\nspec: {}\n"
    response = browser.post("/submit/", {"namespace": "", "priority": 0, "manifest": text})
    body = response.content.decode()
    assert response.status_code == 200
    assert "<code>metadata.name</code>" in body and "<code>spec.tfReplicaSpecs</code>" in body
    assert "Bad_Name" in body  # the user's text stays in the editor
    assert Job.objects.count() == 0


def test_submit_form_reports_not_a_member(browser, team_b, example_text):
    response = browser.post("/submit/", {"namespace": "", "priority": 0, "manifest": example_text("resnet-multi-gpu")})
    assert response.status_code == 200 and b"not a member of namespace" in response.content
    assert Job.objects.count() == 0


def test_namespace_page_lists_jobs_with_filter(browser, alice, example_text):
    job = services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="web")
    page = browser.get("/ns/team-a/").content.decode()
    assert "mnist-cpu" in page and "cpu 2" in page and 'id="queue-table"' in page
    assert "mnist-cpu" not in browser.get("/ns/team-a/?state=Running").content.decode()
    assert browser.get("/ns/team-b/").status_code == 404
    assert f"/jobs/{job.pk}/" in page


def test_job_page_shows_manifest_events_and_demand(browser, alice, example_text):
    job = services.job_submit(user=alice, manifest=example_text("dist-ps-worker"), source="web")
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert "Submitted" in page and "dist-mnist-ps" in page
    assert '<span class="line">  tfReplicaSpecs:</span>' in page
    assert "<td>PS</td>" in page and "<td>Worker</td>" in page
    # per-pod numbers read as quantities, not raw millicores or bytes
    assert "<span>cpu 4</span>" in page and "<span>memory 8Gi</span>" in page and "8589934592" not in page
    # the breadcrumb is the namespace, not "team-a /" leading nowhere
    assert '<p class="crumbs"><a href="/ns/team-a/">team-a</a></p>' in page


def test_job_page_of_other_namespace_is_404(browser, bob, example_text):
    job = services.job_submit(user=bob, manifest=example_text("resnet-multi-gpu"), source="web")
    assert browser.get(f"/jobs/{job.pk}/").status_code == 404


def test_cancel_asks_for_confirmation_then_cancels(browser, alice, example_text):
    job = services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="web")
    confirm = browser.get(f"/jobs/{job.pk}/cancel/")
    assert confirm.status_code == 200 and b"Cancel mnist-cpu?" in confirm.content
    assert Job.objects.get(pk=job.pk).state == State.QUEUED
    response = browser.post(f"/jobs/{job.pk}/cancel/", {"reason": "typo"})
    assert response.status_code == 302
    assert Job.objects.get(pk=job.pk).state == State.CANCELLED
    again = browser.post(f"/jobs/{job.pk}/cancel/", follow=True)
    assert b"already Cancelled" in again.content


def test_token_page_creates_replaces_and_revokes(browser, alice):
    assert b"Create token" in browser.get("/account/token/").content
    browser.post("/account/token/", {"action": "create"})
    first = Token.objects.get(user=alice).key
    shown = browser.get("/account/token/")
    assert first.encode() in shown.content  # once, right after it is created
    assert "no-store" in shown["Cache-Control"]
    again = browser.get("/account/token/")
    assert first.encode() not in again.content and f"{first[:4]}…".encode() in again.content
    assert "no-store" in again["Cache-Control"]
    browser.post("/account/token/", {"action": "create"})
    assert Token.objects.get(user=alice).key != first
    browser.post("/account/token/", {"action": "revoke"})
    assert not Token.objects.filter(user=alice).exists()


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_static_css_is_served(client):
    response = client.get("/static/jobdash/jobdash.css")
    assert response.status_code == 200


def test_embedded_setup_is_idempotent(tmp_path, settings, monkeypatch, capsys):
    settings.VAR_DIR = tmp_path
    monkeypatch.delenv("JOBDASH_ADMIN_PASSWORD", raising=False)
    monkeypatch.delenv("JOBDASH_DEMO_PASSWORD", raising=False)
    call_command("embedded_setup")
    first = capsys.readouterr().out
    call_command("embedded_setup")
    second = capsys.readouterr().out
    password = (tmp_path / "admin-password").read_text().strip()
    demo_password = (tmp_path / "demo-password").read_text().strip()
    assert password in first and f"demo / {demo_password}" in first and first == second
    admin = User.objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    demo = User.objects.get(username="demo")
    assert not demo.is_staff and demo.check_password(demo_password)
    assert list(demo.jobdash_namespaces.values_list("name", flat=True)) == ["team-a"]
    assert set(Namespace.objects.values_list("name", flat=True)) == {"team-a", "team-b"}
    assert admin.jobdash_namespaces.count() == 2
    assert set(Namespace.objects.values_list("default_priority_class", "max_priority_class")) == {("normal", "high")}


def test_403_and_404_pages_say_what_happened_inside_the_site(browser):
    missing = browser.get("/ns/team-b/")
    assert missing.status_code == 404
    page = missing.content.decode()
    assert "<h1>Not found</h1>" in page and 'href="/submit/"' in page and "not a member" in page
    refused = browser.get("/cluster/")
    assert refused.status_code == 403
    page = refused.content.decode()
    assert "<h1>Not allowed</h1>" in page and "the cluster page is for staff" in page


def test_a_refused_page_logs_one_line_not_a_traceback(browser, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert browser.get("/cluster/").status_code == 403
        assert browser.get("/jobs/999999/").status_code == 404
    records = [r for r in caplog.records if r.name == "django.request"]
    assert [r.status_code for r in records] == [403, 404]  # type: ignore[attr-defined]
    lines = [logs.formatter("console").format(r) for r in records]
    assert all(len(line.strip().splitlines()) == 1 for line in lines), lines
    assert "Traceback" not in caplog.text
    assert "Forbidden (Permission denied): /cluster/ (the cluster page is for staff)" in lines[0]
    assert "Not Found: /jobs/999999/" in lines[1]


def test_a_server_error_keeps_its_traceback():
    try:
        raise RuntimeError("broken")
    except RuntimeError:
        record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    record.status_code = 500
    assert logs.ClientErrorOneLine().filter(record) and record.exc_info is not None
    assert "Traceback" in logs.formatter("console").format(record)


@pytest.mark.django_db(transaction=True)
def test_the_job_page_reads_its_state_and_timeline_from_one_snapshot(alice, example_text):
    """A release committing between the page's reads showed a Queued badge beside a
    'Released' event; one snapshot makes them agree."""
    import threading

    from django.db import connection

    from jobdash.jobs import selectors
    from jobdash.jobs.models import Job, JobEvent

    job = services.job_submit(user=alice, manifest=example_text("mnist-cpu"), source="web")

    def release_elsewhere():
        Job.objects.filter(pk=job.pk).update(state="Released")
        JobEvent.objects.create(job_id=job.pk, type="Released", message="released", actor="dispatcher")
        connection.close()

    with selectors.one_snapshot():
        state = Job.objects.get(pk=job.pk).state
        writer = threading.Thread(target=release_elsewhere)
        writer.start()
        writer.join()
        events = [e.type for e in selectors.job_events(job)]
    assert (state, events) == ("Queued", ["Submitted"]), (state, events)
    assert Job.objects.get(pk=job.pk).state == "Released"  # committed, seen after the snapshot
