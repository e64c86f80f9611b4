"""The production serving path: gunicorn started by the image's entrypoint
(deploy/docker/entrypoint.sh web) generates a self-signed certificate at start and serves
the webhook over HTTPS; deploy/compose/inject_ca.py registers deploy/base/webhook.yaml
with its caBundle, as in `docker compose up`; kubesim, configured from
deploy/compose/kubesim.yaml, then calls the webhook over verified TLS."""

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

from jobdash.jobs.models import Job, Namespace, State
from kubesim.testing import running_kubesim

from .conftest import JOBDASH, KATIB, admission_review, trial_tfjob

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="the entrypoint generates the certificate with openssl"),
    pytest.mark.skipif("DATABASE_URL" not in os.environ, reason="gunicorn needs the PostgreSQL the harness starts"),
]
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url_of_the_test_database() -> str:
    """DATABASE_URL, pointed at the test database pytest-django made."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))


@pytest.fixture
def gunicorn(tmp_path):
    port = free_port()
    cert, key = tmp_path / "tls" / "tls.crt", tmp_path / "tls" / "tls.key"
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": database_url_of_the_test_database(),
        "DATABASE_CONN_MAX_AGE": "0",  # no connection outlives a request: the test database is dropped later
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "GUNICORN_THREADS": "4",
        "JOBDASH_TLS_CERT": str(cert),
        "JOBDASH_TLS_KEY": str(key),
        "JOBDASH_TLS_SELF_SIGNED": "true",
        "JOBDASH_TLS_SANS": "DNS:localhost,IP:127.0.0.1",
        "JOBDASH_WEBHOOK_MODE": "deny",
        "JOBDASH_OWN_IDENTITIES": JOBDASH,
    }
    log = (tmp_path / "gunicorn.log").open("w+")
    process = subprocess.Popen(
        ["sh", str(ROOT / "deploy/docker/entrypoint.sh"), "web"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                context = ssl.create_default_context(cafile=str(cert))
                with urllib.request.urlopen(f"{url}/healthz", timeout=2, context=context) as reply:
                    assert json.loads(reply.read()) == {"status": "ok"}
                break
            except (OSError, ssl.SSLError, urllib.error.URLError):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"gunicorn did not serve {url}/healthz:\n{log.read()}")
                time.sleep(0.1)
        yield url, cert
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def post_review(url: str, cert: Path, review: dict) -> dict:
    request = urllib.request.Request(
        f"{url}/webhooks/admission/tfjobs",
        data=json.dumps(review).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    context = ssl.create_default_context(cafile=str(cert))
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        return json.loads(reply.read())


def test_gunicorn_serves_the_webhook_over_https_with_the_generated_certificate(gunicorn):
    url, cert = gunicorn
    Namespace.objects.create(name="team-a")
    pem = cert.read_text()
    assert pem.startswith("-----BEGIN CERTIFICATE-----")
    assert oct((cert.parent / "tls.key").stat().st_mode & 0o777) == "0o600"

    review = admission_review(trial_tfjob("trial-1"))
    answer = post_review(url, cert, review)
    assert answer["response"]["uid"] == review["request"]["uid"] and answer["response"]["allowed"] is False
    assert Job.objects.get().state == State.QUEUED

    # the certificate is what makes it trusted: an unverified client is refused
    with pytest.raises(urllib.error.URLError) as error:
        urllib.request.urlopen(f"{url}/healthz", timeout=5, context=ssl.create_default_context())
    assert isinstance(error.value.reason, ssl.SSLCertVerificationError)


def test_kubesim_calls_the_webhook_over_tls_after_ca_injection(gunicorn):
    url, cert = gunicorn
    Namespace.objects.create(name="team-a")
    config = yaml.safe_load((ROOT / "deploy/compose/kubesim.yaml").read_text())
    config["services"] = {key: url for key in config["services"]}  # web:8443 is here 127.0.0.1:PORT
    with running_kubesim(config, manual_clock=True) as sim:
        injected = subprocess.run(
            [
                sys.executable,
                str(ROOT / "deploy/compose/inject_ca.py"),
                "--ca",
                str(cert),
                "--kubeconfig",
                sim.kubeconfig_path,
                "--wait",
                "10",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert injected.returncode == 0, injected.stderr
        assert "MutatingWebhookConfiguration jobdash created" in injected.stdout
        katib = client.CustomObjectsApi(sim.api_client(KATIB))
        body = trial_tfjob("trial-1")
        with pytest.raises(ApiException) as denied:
            katib.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", body)
        job = Job.objects.get()
        assert denied.value.status == 403 and f"jobdash job #{job.pk}" in json.loads(denied.value.body)["message"]
        # jobdash's own identity passes, through the same TLS hop
        jobdash = client.CustomObjectsApi(sim.api_client(JOBDASH))
        jobdash.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", trial_tfjob("direct"))
        assert sim.cluster.tfjob("team-a", "direct") is not None
        calls = [(c["user"], c.get("allowed"), c.get("error")) for c in sim.cluster.admission.calls]
        assert calls == [(KATIB, False, None), (JOBDASH, True, None)]
        # running it again (compose restarts) replaces the configuration
        again = subprocess.run(
            [
                sys.executable,
                str(ROOT / "deploy/compose/inject_ca.py"),
                "--ca",
                str(cert),
                "--kubeconfig",
                sim.kubeconfig_path,
                "--wait",
                "10",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 0 and "replaced" in again.stdout, again.stderr
