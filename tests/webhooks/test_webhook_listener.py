"""Only the API server can call the webhook: its own TLS listener admits a caller only with
a client certificate from the API server's client CA, and the UI's listener does not route
it at all. A forged review (no certificate, a certificate from another CA, or through the
UI) is refused before Django reads it, and nothing is stored; kubesim, presenting the
certificate its AdmissionConfiguration names, gets through."""

import json
import ssl
import urllib.error
import urllib.request

import pytest
from django.test import Client
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobdash.jobs.models import Job, JobEvent, Namespace
from kubesim.testing import running_kubesim
from tests.pki import with_webhook
from tests.waiting import eventually

from .conftest import JOBDASH, KATIB, admission_review, trial_tfjob

pytestmark = pytest.mark.django_db(transaction=True)
PATH = "/webhooks/admission/tfjobs"
REFUSED = (urllib.error.URLError, ssl.SSLError, ConnectionError)
USERS = [
    {"token": "katib-token", "username": KATIB},
    {"token": "jobdash-token", "username": JOBDASH},
]


@pytest.fixture(autouse=True)
def deny_mode(settings):
    settings.JOBDASH_WEBHOOK_MODE = "deny"


@pytest.fixture
def team_a():
    return Namespace.objects.create(name="team-a")


def tls_context(pki, cert=None, key=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.serving_ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def post(url: str, context: ssl.SSLContext, body: dict, path: str = PATH):
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        return reply.status, json.loads(reply.read())


def forged_review() -> dict:
    """Another team's namespace, a made-up userInfo: what an attacker would post."""
    return admission_review(trial_tfjob("sneaky", namespace="team-a"), user="alice-from-team-b@example.com")


def test_a_review_without_a_client_certificate_is_refused_and_stores_nothing(webhook_listener, webhook_pki, team_a):
    # TLS 1.3 reports the missing certificate on the first read, after the request was sent
    with pytest.raises(REFUSED):
        post(webhook_listener.url, tls_context(webhook_pki), forged_review())
    # the server's thread records the refusal after the client has seen it
    assert eventually(lambda: any("CERTIFICATE" in r.upper() for r in webhook_listener.refused), 5)
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0


def test_a_certificate_from_another_ca_is_refused_and_stores_nothing(webhook_listener, webhook_pki, team_a):
    context = tls_context(webhook_pki, webhook_pki.stranger_cert, webhook_pki.stranger_key)
    with pytest.raises(REFUSED):
        post(webhook_listener.url, context, forged_review())
    assert eventually(lambda: webhook_listener.refused, 5) and Job.objects.count() == 0


def test_plain_http_to_the_listener_is_refused(webhook_listener, team_a):
    with pytest.raises(REFUSED):
        post(webhook_listener.url.replace("https://", "http://"), None, forged_review())
    assert Job.objects.count() == 0


def test_the_api_servers_certificate_is_answered(webhook_listener, webhook_pki, team_a):
    context = tls_context(webhook_pki, webhook_pki.apiserver_cert, webhook_pki.apiserver_key)
    review = admission_review(trial_tfjob("trial-1"))
    status, answer = post(webhook_listener.url, context, review)
    assert status == 200 and answer["response"]["uid"] == review["request"]["uid"]
    assert answer["response"]["allowed"] is False and Job.objects.get().name == "trial-1"


def test_the_listener_serves_the_webhook_and_nothing_else(webhook_listener, webhook_pki):
    context = tls_context(webhook_pki, webhook_pki.apiserver_cert, webhook_pki.apiserver_key)
    for path in ("/api/v1/jobs/", "/admin/", "/", "/account/token/"):
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(webhook_listener.url + path, timeout=10, context=context)
        assert missing.value.code == 404, path
    with urllib.request.urlopen(webhook_listener.url + "/healthz", timeout=10, context=context) as reply:
        assert json.loads(reply.read()) == {"status": "ok"}


def test_the_ui_does_not_route_the_webhook(team_a, django_user_model):
    """Served with the UI, an anonymous or logged-in caller could post a review naming any user."""
    web = Client()
    assert web.post(PATH, json.dumps(forged_review()), content_type="application/json").status_code == 404
    web.force_login(django_user_model.objects.create_user("alice-from-team-b", is_staff=True))
    assert web.post(PATH, json.dumps(forged_review()), content_type="application/json").status_code == 404
    assert Job.objects.count() == 0


def cluster(listener, pki, **overrides) -> dict:
    config = with_webhook({"namespaces": [{"name": "team-a"}], "users": USERS}, listener.url, pki)
    return {**config, **overrides}


def test_kubesim_presenting_the_api_servers_certificate_gets_through(webhook_listener, webhook_pki, team_a):
    with running_kubesim(cluster(webhook_listener, webhook_pki), manual_clock=True) as sim:
        katib = client.CustomObjectsApi(sim.api_client(KATIB))
        with pytest.raises(ApiException) as queued:
            katib.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", trial_tfjob("trial-1"))
        job = Job.objects.get()
        assert queued.value.status == 403 and f"jobdash job #{job.pk}" in json.loads(queued.value.body)["message"]
        assert sim.cluster.admission.calls[-1].get("error") is None


def test_an_api_server_without_the_client_certificate_is_refused_fail_closed(webhook_listener, webhook_pki, team_a):
    """Nothing is queued, and with failurePolicy Fail nothing slips past the queue either."""
    config = cluster(webhook_listener, webhook_pki)
    del config["admission_config"]
    with running_kubesim(config, manual_clock=True) as sim:
        katib = client.CustomObjectsApi(sim.api_client(KATIB))
        with pytest.raises(ApiException) as failed:
            katib.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", trial_tfjob("trial-1"))
        assert failed.value.status == 500 and "failed calling webhook" in json.loads(failed.value.body)["message"]
        assert sim.cluster.tfjob("team-a", "trial-1") is None
    assert Job.objects.count() == 0 and eventually(lambda: webhook_listener.refused, 5)
