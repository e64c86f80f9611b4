"""The web UI in a real browser: Debian's Chromium driven by Playwright, against a live
server on the harness's PostgreSQL, kubesim as the cluster and the dispatcher loop.

One story, in order: log in, submit an example, see it Queued with a position and a
reason, cancel another job, watch the dashboard update without a reload, see the job
Running and Succeeded. Screenshots of every page go to test-artifacts/; the console
must stay free of errors throughout.
"""

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path

import playwright.sync_api as playwright_api
import pytest
from django.contrib.auth.models import User
from django.db import connections

from jobdash.cluster.kube import KubeGateway, api_client
from jobdash.dispatch.cycle import Dispatcher, DispatchSettings
from jobdash.dispatch.loop import DispatcherLoop
from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State
from kubesim.testing import running_kubesim
from tests.jobdash.dispatch_support import manifest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} missing (make test installs it as root)"),
]

CLUSTER = {
    "nodes": [
        {"prefix": "gpu", "count": 2, "capacity": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8", "pods": "110"}}
    ],
    # room for one 2-cpu job at a time: the second one waits for quota
    "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "2", "requests.memory": "16Gi"}}],
    "users": [
        {
            "token": "jobdash-token",
            "username": "system:serviceaccount:jobdash:jobdash",
            "groups": ["system:serviceaccounts"],
        }
    ],
    "kubelet": {"start_delay_seconds": 0.5},
    "workload": {"default_duration_seconds": 4.0},
}


def blocker(name: str, seconds: int) -> str:
    """A 2-CPU job: the namespace's whole quota, so the next one waits."""
    return manifest(name, cpu="2", duration=seconds)


@contextlib.contextmanager
def dispatching(cluster: dict):
    """kubesim of `cluster` + the real gateway + the dispatcher loop (election none), ticking fast."""
    with running_kubesim(cluster) as sim:
        gateway = KubeGateway(api_client("kubeconfig", sim.kubeconfig_path), retries=1, backoff=0.01)
        config = DispatchSettings(
            policy="priority",
            release_mode="create",
            node_fit=True,
            start_timeout_s=60.0,
            max_attempts=3,
            backoff_s=0.5,
            concurrency=4,
        )
        loop = DispatcherLoop(Dispatcher(gateway, config), tick_seconds=0.5, leader="none")
        gateway.start(on_event=loop.on_cluster_event, timeout=10)
        loop.start()
        try:
            yield
        finally:
            loop.stop()
            gateway.stop()


@pytest.fixture
def stack(transactional_db, live_server):
    with dispatching(CLUSTER):
        yield live_server


@pytest.fixture
def page(monkeypatch, stack):
    # Playwright's sync API runs an event loop in this thread; the ORM calls the test makes
    # between browser steps are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="jobdash-chromium-")
    errors: list[str] = []
    with playwright_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=ARGS,
            viewport={"width": 1366, "height": 900},
        )
        page = context.pages[0] if context.pages else context.new_page()
        page.set_default_timeout(10_000)
        page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        try:
            yield page
        finally:
            page.goto("about:blank")  # stop the pages' polling before the server goes away
            context.close()
            shutil.rmtree(profile, ignore_errors=True)
            # The test's ORM calls ran in the context Playwright's sync API switches to, with a
            # database connection of their own: closed here, in that context, or it outlives
            # the test database ("being accessed by other users" at its teardown).
            connections.close_all()
    assert errors == [], errors


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_submit_queue_run_cancel_in_a_browser(page, stack):
    expect = playwright_api.expect
    url = stack.url
    root = User.objects.create_user("root", password="root-pass-123", is_staff=True, is_superuser=True)
    ns = Namespace.objects.create(name="team-a")
    ana = User.objects.create_user("ana", password="x")
    ns.members.add(ana)
    # Holds the quota until the test cancels it (a timed one would end early on a slow machine).
    warmup = services.job_submit(user=ana, manifest=blocker("warmup", 600), source="api")

    # log in
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("root-pass-123")
    shot(page, "login")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()

    # submit an example; the check beside the editor validates as it loads
    page.goto(f"{url}/submit/?example=mnist-cpu")
    expect(page.locator("#check-ok")).to_contain_text("Valid for team-a")
    page.get_by_label("Manifest").press("Control+End")
    page.get_by_label("Manifest").type("\nbogus: [", delay=5)  # invalid YAML: the check says where
    expect(page.locator("#check-problems")).to_contain_text("line")
    page.goto(f"{url}/submit/?example=mnist-cpu")
    expect(page.locator("#check-ok")).to_be_visible()
    shot(page, "submit")
    page.get_by_role("button", name="Submit").click()
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    job = Job.objects.get(name="mnist-cpu")

    # Queued behind the warm-up job, with a position and a reason in plain words (live)
    expect(page.locator("#job-state")).to_contain_text("Queued")
    expect(page.locator("#job-reason")).to_contain_text("Waiting for quota", timeout=15_000)
    expect(page.locator("#job-position")).to_contain_text("1 in team-a")
    shot(page, "job-queued")

    # cancel another job
    other = services.job_submit(user=ana, manifest=blocker("second", 2), source="api")
    page.goto(f"{url}/jobs/{other.pk}/")
    page.get_by_role("link", name="Cancel job…").click()
    page.get_by_label("Reason (optional)").fill("not needed")
    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#job-state")).to_contain_text("Cancelled")
    expect(page.locator("#timeline")).to_contain_text("cancelled by root: not needed")

    # the dashboard follows the queue without reloading the page
    page.goto(f"{url}/ns/team-a/")
    expect(page.locator("#queue-table")).to_contain_text("mnist-cpu")
    expect(page.locator("#quota-bars")).to_contain_text("requests.cpu")
    shot(page, "dashboard")
    page.evaluate("window.notReloaded = true")
    services.job_cancel(job_id=warmup.pk, user=root, reason="done warming up")
    expect(page.locator("#running-table")).to_contain_text("mnist-cpu", timeout=20_000)
    assert page.evaluate("window.notReloaded === true")
    expect(page.locator("#live-summary")).to_contain_text("0 queued")
    shot(page, "dashboard-running")

    # Running, then Succeeded after kubesim ran it
    page.goto(f"{url}/jobs/{job.pk}/")
    expect(page.locator("#job-state")).to_contain_text(re.compile("Running|Succeeded"), timeout=10_000)
    expect(page.locator("#job-state")).to_contain_text("Succeeded", timeout=20_000)
    expect(page.locator("#timeline")).to_contain_text("Running")
    shot(page, "job-succeeded")
    assert Job.objects.get(pk=job.pk).state == State.SUCCEEDED

    # the cluster page (staff)
    page.goto(f"{url}/cluster/")
    expect(page.locator("#nodes")).to_contain_text("gpu-0")
    expect(page.locator("#gpu-fit")).to_contain_text("8 GPUs")
    shot(page, "cluster")
    # keyboard: the skip link is the first stop and leads to the content
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
