"""The production serving path, as the image runs it (deploy/docker/entrypoint.sh):
`certs` generates the webhook's certificates as docker compose does; `webhook` serves the
webhook alone with gunicorn, TLS and a required client certificate from the client CA;
`web` serves the UI over TLS and does not route the webhook. kubesim, configured from
deploy/compose/ (its AdmissionConfiguration names the API server's client certificate),
calls the webhook after deploy/compose/inject_ca.py registered deploy/base/webhook.yaml
with its caBundle, as in `docker compose up`."""

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import yaml
from django.db import connection
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobdash.jobs.models import Job, JobEvent, Namespace, State
from kubesim.testing import running_kubesim

from .conftest import JOBDASH, KATIB, admission_review, trial_tfjob

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="the entrypoint generates certificates with openssl"),
    pytest.mark.skipif("DATABASE_URL" not in os.environ, reason="gunicorn needs the PostgreSQL the harness starts"),
]
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENTRYPOINT = ROOT / "deploy/docker/entrypoint.sh"
REFUSED = (urllib.error.URLError, ssl.SSLError, ConnectionError)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url_of_the_test_database() -> str:
    """DATABASE_URL, pointed at the test database pytest-django made."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))


def environment(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": database_url_of_the_test_database(),
        "DATABASE_CONN_MAX_AGE": "0",  # no connection outlives a request: the test database is dropped later
        "WEB_CONCURRENCY": "1",
        "WEBHOOK_CONCURRENCY": "1",
        "GUNICORN_THREADS": "4",
        "JOBDASH_WEBHOOK_MODE": "deny",
        "JOBDASH_OWN_IDENTITIES": JOBDASH,
        **extra,
    }


def serve(command: str, env: dict, ready, log_path: Path) -> subprocess.Popen:
    log = log_path.open("w+")
    process = subprocess.Popen(["sh", str(ENTRYPOINT), command], cwd=ROOT, env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 30
    while True:
        try:
            ready()
            return process
        except (OSError, ssl.SSLError, urllib.error.URLError):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                log.seek(0)
                pytest.fail(f"entrypoint {command} did not come up:\n{log.read()}")
            time.sleep(0.1)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=20)


@pytest.fixture
def certs(tmp_path) -> Path:
    directory = tmp_path / "tls"
    made = subprocess.run(["sh", str(ENTRYPOINT), "certs", str(directory)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return directory


def context(certs: Path, client_cert: str | None = "apiserver") -> ssl.SSLContext:
    tls = ssl.create_default_context(cafile=str(certs / "webhook.crt"))
    if client_cert:
        tls.load_cert_chain(str(certs / f"{client_cert}.crt"), str(certs / f"{client_cert}.key"))
    return tls


@pytest.fixture
def webhook_server(tmp_path, certs):
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    env = environment(
        WEBHOOK_PORT=str(port),
        JOBDASH_WEBHOOK_TLS_CERT=str(certs / "webhook.crt"),
        JOBDASH_WEBHOOK_TLS_KEY=str(certs / "webhook.key"),
        JOBDASH_WEBHOOK_CLIENT_CA=str(certs / "client-ca.crt"),
    )

    def ready():
        with urllib.request.urlopen(f"{url}/healthz", timeout=2, context=context(certs)) as reply:
            assert json.loads(reply.read()) == {"status": "ok"}

    process = serve("webhook", env, ready, tmp_path / "webhook.log")
    yield url
    stop(process)


def post_review(url: str, tls: ssl.SSLContext, review: dict) -> dict:
    request = urllib.request.Request(
        f"{url}/webhooks/admission/tfjobs",
        data=json.dumps(review).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Host": "jobdash-webhook.jobdash.svc:443"},
    )
    with urllib.request.urlopen(request, timeout=10, context=tls) as reply:
        return json.loads(reply.read())


def test_the_generated_certificates(certs):
    for name in ("webhook", "client-ca", "apiserver"):
        assert (certs / f"{name}.crt").read_text().startswith("-----BEGIN CERTIFICATE-----")
        assert oct((certs / f"{name}.key").stat().st_mode & 0o777) == "0o600", name
    verified = subprocess.run(
        ["openssl", "verify", "-CAfile", str(certs / "client-ca.crt"), str(certs / "apiserver.crt")],
        capture_output=True,
        text=True,
    )
    assert verified.returncode == 0, verified.stderr
    again = subprocess.run(["sh", str(ENTRYPOINT), "certs", str(certs)], capture_output=True, text=True)
    assert again.returncode == 0 and again.stderr == ""  # kept: a restart does not rotate them under kubesim


def test_gunicorn_answers_only_the_api_servers_certificate(webhook_server, certs):
    Namespace.objects.create(name="team-a")
    forged = admission_review(trial_tfjob("forged"), user="someone-else@example.com")
    with pytest.raises(REFUSED):
        post_review(webhook_server, context(certs, client_cert=None), forged)
    stranger = certs.parent / "stranger"
    subprocess.run(["sh", str(ENTRYPOINT), "certs", str(stranger)], check=True, capture_output=True)
    with pytest.raises(REFUSED):  # a well-formed client certificate, from a CA the webhook does not trust
        tls = ssl.create_default_context(cafile=str(certs / "webhook.crt"))
        tls.load_cert_chain(str(stranger / "apiserver.crt"), str(stranger / "apiserver.key"))
        post_review(webhook_server, tls, forged)
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0

    # The API server's certificate, with the Service's name as Host (no ALLOWED_HOSTS on this listener)
    review = admission_review(trial_tfjob("trial-1"))
    answer = post_review(webhook_server, context(certs), review)
    assert answer["response"]["uid"] == review["request"]["uid"] and answer["response"]["allowed"] is False
    assert Job.objects.get().state == State.QUEUED


def test_the_webhook_listener_will_not_start_without_a_client_ca(tmp_path, certs):
    env = environment(
        JOBDASH_WEBHOOK_TLS_CERT=str(certs / "webhook.crt"), JOBDASH_WEBHOOK_TLS_KEY=str(certs / "webhook.key")
    )
    env.pop("JOBDASH_WEBHOOK_CLIENT_CA", None)
    started = subprocess.run(["sh", str(ENTRYPOINT), "webhook"], env=env, capture_output=True, text=True, timeout=30)
    assert started.returncode == 2 and "JOBDASH_WEBHOOK_CLIENT_CA" in started.stderr


def test_the_web_serves_tls_and_not_the_webhook(tmp_path):
    port = free_port()
    cert = tmp_path / "web" / "tls.crt"
    env = environment(
        PORT=str(port),
        JOBDASH_TLS_CERT=str(cert),
        JOBDASH_TLS_KEY=str(tmp_path / "web" / "tls.key"),
        JOBDASH_TLS_SELF_SIGNED="true",
        JOBDASH_TLS_SANS="DNS:localhost,IP:127.0.0.1",
    )
    url = f"https://127.0.0.1:{port}"

    def ready():
        with urllib.request.urlopen(f"{url}/healthz", timeout=2, context=ssl.create_default_context(cafile=cert)):
            pass

    process = serve("web", env, ready, tmp_path / "web.log")
    try:
        Namespace.objects.create(name="team-a")
        with pytest.raises(urllib.error.HTTPError) as missing:
            post_review(url, ssl.create_default_context(cafile=cert), admission_review(trial_tfjob("trial-1")))
        assert missing.value.code in (400, 404)  # 400: the forged Host header is not an allowed host
        request = urllib.request.Request(
            f"{url}/webhooks/admission/tfjobs",
            data=json.dumps(admission_review(trial_tfjob("trial-1"))).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(request, timeout=10, context=ssl.create_default_context(cafile=cert))
        assert missing.value.code == 404
        assert Job.objects.count() == 0
        # the certificate is what makes it trusted: an unverified client is refused
        with pytest.raises(urllib.error.URLError) as error:
            urllib.request.urlopen(f"{url}/healthz", timeout=5, context=ssl.create_default_context())
        assert isinstance(error.value.reason, ssl.SSLCertVerificationError)
    finally:
        stop(process)


def compose_cluster(webhook_url: str, certs: Path, workdir: Path) -> dict:
    """deploy/compose/kubesim.yaml with its AdmissionConfiguration, /tls being here `certs`."""
    compose = ROOT / "deploy/compose"
    config = yaml.safe_load((compose / "kubesim.yaml").read_text())
    config["services"] = {key: webhook_url for key in config["services"]}  # webhook:9443 is here 127.0.0.1:PORT
    admission = yaml.safe_load((compose / config["admission_config"]).read_text())
    for plugin in admission["plugins"]:
        name = plugin["configuration"]["kubeConfigFile"]
        kubeconfig = (compose / name).read_text().replace("/tls/", f"{certs}/")
        (workdir / name).write_text(kubeconfig)
    (workdir / "admission.yaml").write_text(yaml.safe_dump(admission))
    config["admission_config"] = str(workdir / "admission.yaml")
    return config


def inject_ca(certs: Path, kubeconfig: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            *(sys.executable, str(ROOT / "deploy/compose/inject_ca.py")),
            *("--ca", str(certs / "webhook.crt"), "--kubeconfig", kubeconfig, "--wait", "10"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_kubesim_calls_the_webhook_with_its_client_certificate_after_ca_injection(webhook_server, certs, tmp_path):
    Namespace.objects.create(name="team-a")
    with running_kubesim(compose_cluster(webhook_server, certs, tmp_path), manual_clock=True) as sim:
        injected = inject_ca(certs, sim.kubeconfig_path)
        assert injected.returncode == 0, injected.stderr
        assert "MutatingWebhookConfiguration jobdash created" in injected.stdout
        katib = client.CustomObjectsApi(sim.api_client(KATIB))
        with pytest.raises(ApiException) as denied:
            katib.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", trial_tfjob("trial-1"))
        job = Job.objects.get()
        assert denied.value.status == 403 and f"jobdash job #{job.pk}" in json.loads(denied.value.body)["message"]
        # jobdash's own identity passes, through the same TLS hop
        jobdash = client.CustomObjectsApi(sim.api_client(JOBDASH))
        jobdash.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", trial_tfjob("direct"))
        assert sim.cluster.tfjob("team-a", "direct") is not None
        calls = [(c["user"], c.get("allowed"), c.get("error")) for c in sim.cluster.admission.calls]
        assert calls == [(KATIB, False, None), (JOBDASH, True, None)]
        # running it again (compose restarts) replaces the configuration
        again = inject_ca(certs, sim.kubeconfig_path)
        assert again.returncode == 0 and "replaced" in again.stdout, again.stderr
