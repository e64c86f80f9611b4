"""An array submitted from the submit page in a real browser (Debian's Chromium, Playwright)
lands on its workflow page, drawn as a grid of its indexes (issue 36). No cluster needed:
the jobs only wait in the queue. The screenshot goes to test-artifacts/; the console must
stay free of errors."""

import os
import re
import shutil
import tempfile

import playwright.sync_api as playwright_api
import pytest
from django.contrib.auth.models import User
from django.db import connections

from jobdash.jobs.models import Namespace, Workflow

from .test_browser_flow import ARGS, ARTIFACTS, CHROMIUM

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} missing (make test installs it as root)"),
]


@pytest.fixture
def page(monkeypatch, live_server):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # (ORM calls between browser steps)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="jobdash-chromium-")
    errors: list[str] = []
    with playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=ARGS, viewport={"width": 1366, "height": 900}
        )
        page = context.pages[0] if context.pages else context.new_page()
        page.set_default_timeout(10_000)
        page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        try:
            yield page
        finally:
            page.goto("about:blank")
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
            connections.close_all()
    assert errors == [], errors


def test_an_array_submitted_from_the_page_shows_as_a_grid(page, live_server):
    expect = playwright_api.expect
    url = live_server.url
    Namespace.objects.create(name="team-a").members.add(User.objects.create_user("ana", password="ana-pass-123"))
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill("ana")
    page.get_by_label("Password").fill("ana-pass-123")
    page.get_by_role("button", name="Log in").click()

    # the workflow examples load with a check that understands them (and passes)
    page.goto(f"{url}/submit/?example=workflows/pipeline")
    expect(page.locator("#check-ok")).to_contain_text("Valid for team-a: a workflow of 3 jobs, mnist-pipeline.")
    expect(page.locator("#check-jobs li")).to_have_count(3)
    page.goto(f"{url}/submit/?example=workflows/sweep")
    expect(page.locator("#check-ok")).to_contain_text("an array of 10 jobs, lr-sweep-0 … lr-sweep-9, at most 3")
    page.get_by_label("Array").fill("0-1")  # the check follows the Array option as it changes
    page.get_by_label("Array").press("Tab")
    expect(page.locator("#check-ok")).to_contain_text("an array of 2 jobs, lr-sweep-0 … lr-sweep-1;")

    page.goto(f"{url}/submit/?example=mnist-cpu")
    page.get_by_text("Workflow options").click()
    page.get_by_label("Array").fill("0-19%5")
    page.get_by_label("Retry limit").fill("2")
    page.get_by_role("button", name="Submit").click()
    expect(page).to_have_url(re.compile(r"/workflows/\d+/$"))
    workflow = Workflow.objects.get()
    assert (workflow.kind, workflow.concurrency, workflow.jobs.count()) == ("array", 5, 20)

    expect(page.locator("#workflow-limit")).to_contain_text("at most 5 jobs")
    expect(page.locator("#workflow-graph a.cell")).to_have_count(20)
    expect(page.locator("#workflow-graph")).to_contain_text("19")
    expect(page.locator("#workflow-jobs tbody tr")).to_have_count(20)
    expect(page.locator("#workflow-jobs")).to_contain_text("0 of 2")
    page.screenshot(path=str(ARTIFACTS / "workflow-array.png"), full_page=True)

    # a square leads to its job, whose page links back to the workflow
    page.locator("#workflow-graph a.cell").nth(7).click()
    expect(page.locator("#job-workflow")).to_contain_text("array index 7")
    page.get_by_role("link", name="mnist-cpu", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/workflows/{workflow.pk}/$"))
