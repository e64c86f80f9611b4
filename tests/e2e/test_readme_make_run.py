"""The README's main job, as a newcomer runs it: `make run` on its embedded defaults.

`make run` runs as a subprocess, exactly as the README says (no DATABASE_URL: its own
PostgreSQL from the wheel under a fresh var directory, JOBDASH_VAR_DIR pointing at it; a
free port). Then a job through each door a user has, each to Succeeded: the REST API with a
token made on the token page, the `jobdash` CLI, kubectl as the demo member with the
kubeconfig `make run` wrote, and the submit form in a browser, signed in as the demo member.
Last, Ctrl-C and `make run` again: every job is still listed, a job left queued is released,
a new one runs. The tests share one stack and run in order, in one worker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
ADMIN_PASSWORD = "readme-Admin-1"  # (the generated ones are tested in test_views)
DEMO_PASSWORD = "readme-Demo-1"

pytestmark = [pytest.mark.xdist_group("readme-make-run")]


def batch_job(name: str, *, seconds: int = 2, pods: int = 1, gpus: int = 0) -> str:
    limits = f", limits: {{nvidia.com/gpu: {gpus}}}" if gpus else ""
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: team-a
  annotations: {{kubesim.io/duration-seconds: "{seconds}"}}
spec:
  parallelism: {pods}
  completions: {pods}
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox
          resources: {{requests: {{cpu: "1", memory: 1Gi}}{limits}}}
"""


class MakeRun:
    """`make run` in its own process group, as a terminal runs it (Ctrl-C reaches all of it)."""

    def __init__(self, var_dir: Path):
        self.var_dir = var_dir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = var_dir.parent / "make-run.log"
        self.process: subprocess.Popen[bytes] | None = None

    def environment(self) -> dict[str, str]:
        # The harness's database and broker are the suite's: a newcomer has neither.
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
        env = {k: v for k, v in env.items() if not k.startswith(("JOBDASH_", "DJANGO_"))}
        env.pop("PORT", None)  # given to make, as `make run PORT=…`
        env.update(
            JOBDASH_VAR_DIR=str(self.var_dir),
            JOBDASH_ADMIN_PASSWORD=ADMIN_PASSWORD,
            JOBDASH_DEMO_PASSWORD=DEMO_PASSWORD,
            PYTHONUNBUFFERED="1",
        )
        return env

    def start(self) -> float:
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["make", "run", f"PORT={self.port}"], cwd=ROOT, env=self.environment(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        assert wait_until(self._ready, 120, interval=0.25), f"make run never answered /healthz:\n{self.log()}"
        return time.monotonic() - started

    def _ready(self) -> bool:
        assert self.process is not None and self.process.poll() is None, f"make run exited:\n{self.log()}"
        try:
            return requests.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    def interrupt(self) -> int:
        """Ctrl-C: SIGINT to the whole foreground group."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=60)
        finally:
            self.process = None

    def kill(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def postgres_running(self) -> bool:
        data = str(self.var_dir / "postgres" / "data")
        found = subprocess.run(["pgrep", "-f", f"postgres -D {data}"], capture_output=True, text=True)
        return bool(found.stdout.strip())


@pytest.fixture(scope="module")
def stack() -> Iterator[MakeRun]:
    home = Path(tempfile.mkdtemp(prefix="jobdash-readme-"))
    run = MakeRun(home / "var")
    run.start()
    try:
        yield run
    finally:
        run.kill()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def token(stack) -> str:
    """An API token, made the way the README says: sign in, the API token page, Create."""
    session = requests.Session()
    page = session.get(f"{stack.url}/login/", timeout=10)
    session.post(
        f"{stack.url}/login/",
        data={"username": "demo", "password": DEMO_PASSWORD, "csrfmiddlewaretoken": _csrf(page.text)},
        headers={"Referer": f"{stack.url}/login/"},
        timeout=10,
    ).raise_for_status()
    page = session.get(f"{stack.url}/account/token/", timeout=10)
    created = session.post(
        f"{stack.url}/account/token/",
        data={"action": "create", "csrfmiddlewaretoken": _csrf(page.text)},
        headers={"Referer": f"{stack.url}/account/token/"},
        timeout=10,
    )
    found = re.search(r'id="token">([0-9a-f]{40})<', created.text)
    assert found, created.text[:2000]
    return found.group(1)


def api(stack: MakeRun, token: str, method: str, path: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"Token {token}", **kwargs.pop("headers", {})}
    return requests.request(method, f"{stack.url}/api/v1/{path}", headers=headers, timeout=10, **kwargs)


def job_named(stack: MakeRun, token: str, name: str) -> dict | None:
    found = api(stack, token, "GET", f"jobs/?namespace=team-a&name={name}").json()["results"]
    return found[0] if found else None


def wait_for_state(stack: MakeRun, token: str, name: str, state: str, timeout: float = 60) -> dict:
    seen: dict = {}

    def reached() -> bool:
        seen["job"] = job_named(stack, token, name)
        return seen["job"] is not None and seen["job"]["state"] == state

    assert wait_until(reached, timeout, interval=0.5), (seen.get("job"), stack.log())
    return seen["job"]


def test_make_run_prints_both_logins_and_keeps_its_database_in_postgresql_under_var(stack):
    log = stack.log()
    assert f"jobdash on {stack.url}/  —  log in as admin / {ADMIN_PASSWORD}" in log
    assert f"demo member demo / {DEMO_PASSWORD}" in log
    assert (stack.var_dir / "postgres" / "data" / "PG_VERSION").read_text().strip() == "18"
    assert stack.postgres_running()
    assert not list(stack.var_dir.glob("*.sqlite3"))
    # and its dispatcher completes cycles: what the README's main job rests on
    assert wait_until(lambda: requests.get(f"{stack.url}/readyz", timeout=5).status_code == 200, 30), stack.log()


def test_a_job_through_the_rest_api_succeeds(stack, token):
    created = api(
        stack, token, "POST", "jobs/", data=batch_job("via-api"), headers={"Content-Type": "application/yaml"}
    )
    assert created.status_code == 201, created.text
    assert created.json()["state"] == "Queued"
    wait_for_state(stack, token, "via-api", "Succeeded")


def test_a_job_through_the_cli_succeeds(stack, token, tmp_path):
    (tmp_path / "job.yaml").write_text(batch_job("via-cli"))
    env = {**os.environ, "HOME": str(tmp_path), "JOBDASH_CONFIG": str(tmp_path / "config.yaml")}
    cli = str(BIN / "jobdash")
    login = subprocess.run([cli, "login", "--server", stack.url, "--token", token], env=env, capture_output=True)
    assert login.returncode == 0, login.stderr
    submitted = subprocess.run([cli, "submit", str(tmp_path / "job.yaml"), "-o", "json"], env=env, capture_output=True)
    assert submitted.returncode == 0, submitted.stderr
    (job,) = json.loads(submitted.stdout)
    waited = subprocess.run(
        [cli, "wait", str(job["id"]), "--for", "Succeeded", "--timeout", "60", "-q"], env=env, capture_output=True
    )
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    assert wait_for_state(stack, token, "via-cli", "Succeeded")["source"] == "api"


def test_a_job_through_kubectl_with_the_printed_kubeconfig_succeeds(stack, token, tmp_path):
    kubeconfig = stack.var_dir / "kubeconfig"
    assert f"kubectl --kubeconfig {kubeconfig} -n team-a create -f" in stack.log()
    (tmp_path / "job.yaml").write_text(batch_job("via-kubectl"))
    kubectl = [str(BIN / "kubectl"), "--kubeconfig", str(kubeconfig), "-n", "team-a"]
    created = subprocess.run([*kubectl, "create", "-f", str(tmp_path / "job.yaml")], capture_output=True, text=True)
    # The webhook's default mode (deny) answers the create with where the job went.
    assert created.returncode == 1 and "is queued by jobdash as jobdash job #" in created.stderr, created.stderr
    job = wait_for_state(stack, token, "via-kubectl", "Succeeded")
    assert job["source"] == "webhook"
    listed = subprocess.run([*kubectl, "get", "jobs", "via-kubectl"], capture_output=True, text=True)
    assert listed.returncode == 0 and "via-kubectl" in listed.stdout, listed.stderr


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} missing (make test installs it as root)")
def test_a_job_through_the_submit_form_succeeds_signed_in_as_the_demo_member(stack, token):
    import playwright.sync_api as playwright_api

    expect = playwright_api.expect
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{stack.url}/login/")
            page.get_by_label("Username").fill("demo")
            page.get_by_label("Password").fill(DEMO_PASSWORD)
            page.get_by_role("button", name="Log in").click()
            expect(page.get_by_role("heading", name="Queues")).to_be_visible()
            page.goto(f"{stack.url}/submit/")
            page.get_by_label("Manifest").fill(batch_job("via-form"))
            expect(page.locator("#check-ok")).to_be_visible()
            page.get_by_role("button", name="Submit").click()
            expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
            expect(page.locator("#job-state")).to_contain_text("Succeeded", timeout=60_000)
        finally:
            browser.close()
    assert job_named(stack, token, "via-form")["state"] == "Succeeded"


def test_after_ctrl_c_and_make_run_again_every_job_is_there_and_the_queue_moves_on(stack, token):
    # team-a's quota is 16 GPUs: the second job waits for the first.
    for name, pods, seconds in (("holds-quota", 2, 6), ("left-queued", 1, 2)):
        body = batch_job(name, pods=pods, gpus=8, seconds=seconds)
        created = api(stack, token, "POST", "jobs/", data=body, headers={"Content-Type": "application/yaml"})
        assert created.status_code == 201, created.text
    wait_for_state(stack, token, "holds-quota", "Running")
    assert job_named(stack, token, "left-queued")["state"] == "Queued"
    # the waiting job has its QueuedJob on the cluster: a new cluster lacks it, and that is
    # no one's delete
    kubectl = [str(BIN / "kubectl"), "--kubeconfig", str(stack.var_dir / "kubeconfig"), "-n", "team-a"]
    assert wait_until(
        lambda: "left-queued" in subprocess.run([*kubectl, "get", "queuedjobs"], capture_output=True, text=True).stdout,
        30,
    )
    before = {job["name"] for job in api(stack, token, "GET", "jobs/?page_size=100").json()["results"]}

    assert stack.interrupt() in (0, -signal.SIGINT), stack.log()  # make re-raises the interrupt
    assert wait_until(lambda: not stack.postgres_running(), 30), "PostgreSQL outlived make run"
    assert "Traceback" not in stack.log(), stack.log()  # Ctrl-C is a quiet way out
    stack.start()

    after = {job["name"] for job in api(stack, token, "GET", "jobs/?page_size=100").json()["results"]}
    assert before <= after and {"via-api", "via-cli", "via-kubectl", "left-queued"} <= after
    wait_for_state(stack, token, "left-queued", "Succeeded", timeout=90)
    # the run the old cluster took with it is queued again and runs, not failed
    held = wait_for_state(stack, token, "holds-quota", "Succeeded", timeout=90)
    timeline = api(stack, token, "GET", f"jobs/{held['id']}/").json()
    assert "started anew" in json.dumps(timeline), timeline
    created = api(
        stack, token, "POST", "jobs/", data=batch_job("after-restart"), headers={"Content-Type": "application/yaml"}
    )
    assert created.status_code == 201, created.text
    wait_for_state(stack, token, "after-restart", "Succeeded")


def _csrf(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found, page[:2000]
    return found.group(1)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
