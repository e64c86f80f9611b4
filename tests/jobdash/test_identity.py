"""Who a person is (jobdash/accounts/identity.py) and the authenticating proxy's header
(jobdash/accounts/proxy.py): the same Kubernetes username is the same jobdash user, from an
OIDC token's claims, Kubeflow's kubeflow-userid, or an admission request."""

import logging

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from jobdash.accounts import identity
from jobdash.accounts.models import PlatformIdentity
from jobdash.jobs import services
from jobdash.jobs.models import Job
from kubesim.testing import tfjob_manifest

pytestmark = pytest.mark.django_db
PROXY = "10.0.0.7"


def test_oidc_claims_map_as_kube_apiserver_maps_them(settings):
    settings.JOBDASH_OIDC_USERNAME_CLAIM = "email"
    settings.JOBDASH_OIDC_USERNAME_PREFIX = "oidc:"
    settings.JOBDASH_OIDC_GROUPS_PREFIX = "oidc:"
    who = identity.from_oidc_claims({"sub": "x1", "email": "alice@example.com", "groups": ["ml", "ml"]})
    assert who == identity.Identity("oidc:alice@example.com", ("oidc:ml",), "oidc")
    with pytest.raises(identity.Refused, match="not verified"):
        identity.from_oidc_claims({"email": "alice@example.com", "email_verified": False})
    with pytest.raises(identity.Refused, match="no 'email' claim"):
        identity.from_oidc_claims({"sub": "x1"})
    with pytest.raises(identity.Refused, match="list of strings"):
        identity.from_oidc_claims({"email": "a@example.com", "groups": [1]})


def test_a_sign_in_cannot_pass_for_a_service_account_or_a_system_user(settings):
    settings.JOBDASH_OIDC_USERNAME_CLAIM = "sub"
    for name in ("system:serviceaccount:kubeflow:katib-controller", "system:admin"):
        with pytest.raises(identity.Refused, match="reserved system"):
            identity.from_oidc_claims({"sub": name})
        with pytest.raises(identity.Refused, match="reserved system"):
            identity.from_proxy(name)
    # the admission request's service account is a user of its own (a controller's jobs are its)
    sa = identity.from_admission("system:serviceaccount:kubeflow:katib-controller", ["system:serviceaccounts"])
    assert sa is not None and sa.is_service_account
    assert identity.from_admission("system:anonymous", []) is None
    assert identity.from_admission("x" * 151, []) is None


def test_the_same_person_is_one_user_from_every_door(settings):
    settings.JOBDASH_OIDC_USERNAME_CLAIM = "email"
    settings.JOBDASH_PROXY_USERID_PREFIX = "accounts.google.com:"
    by_kubectl = identity.admission_owner("alice@example.com", ["system:authenticated"])
    by_proxy = identity.user_for(identity.from_proxy("accounts.google.com:alice@example.com", "ml, research"))
    by_oidc = identity.user_for(identity.from_oidc_claims({"email": "alice@example.com", "groups": ["ml"]}))
    assert by_kubectl.pk == by_proxy.pk == by_oidc.pk
    assert User.objects.filter(username="alice@example.com").count() == 1
    assert not by_oidc.has_usable_password()
    # the groups of the last sign-in, kept for role checks
    assert identity.groups_of(by_oidc) == ("ml",)
    assert PlatformIdentity.objects.get(user=by_oidc).source == "oidc"


def test_a_sign_in_never_takes_over_a_local_account():
    User.objects.create_user("admin", password="break-glass-123", is_superuser=True)
    with pytest.raises(identity.Refused, match="local jobdash account"):
        identity.user_for(identity.from_proxy("admin"))
    # kubectl's "admin" creating a job is still that account's (ownership, no sign-in)
    assert identity.admission_owner("admin", []).username == "admin"


def test_a_deactivated_user_owns_nothing_new_and_cannot_sign_in():
    User.objects.create_user("gone", is_active=False)
    assert identity.admission_owner("gone", []) is None
    with pytest.raises(identity.Refused, match="deactivated"):
        identity.user_for(identity.from_proxy("gone"))


def test_the_webhooks_service_sets_the_owner_once(team_a):
    manifest = yaml.safe_dump(tfjob_manifest("owned", "team-a", workers=1, cpu="1", memory="1Gi"))
    job, created = services.job_submit_or_find(
        namespace="team-a",
        name="owned",
        manifest=manifest,
        source="webhook",
        submitted_by_name="carol",
        submitted_by_groups=["ml"],
    )
    assert created and job is not None
    assert Job.objects.get(pk=job.pk).submitted_by.username == "carol"
    again, created = services.job_submit_or_find(
        namespace="team-a", name="owned", manifest=manifest, source="webhook", submitted_by_name="dave"
    )
    assert not created and again.pk == job.pk
    assert not User.objects.filter(username="dave").exists()  # a retry that finds its job makes no one


@pytest.fixture
def proxied(settings):
    settings.JOBDASH_PROXY_TRUSTED = ["10.0.0.0/24", "127.0.0.1"]
    return settings


def test_the_proxy_header_from_a_trusted_address_signs_in(proxied, team_a):
    client = Client(REMOTE_ADDR=PROXY)
    response = client.get("/", HTTP_KUBEFLOW_USERID="carol@example.com", HTTP_KUBEFLOW_GROUPS="ml,research")
    assert response.status_code == 200
    assert "carol@example.com" in response.content.decode()
    carol = User.objects.get(username="carol@example.com")
    assert identity.groups_of(carol) == ("ml", "research")
    # the API too, as the same user
    assert client.get("/api/v1/jobs/?mine=true", HTTP_KUBEFLOW_USERID="carol@example.com").status_code == 200


def test_the_proxy_header_from_anywhere_else_is_refused_and_logged(proxied, caplog):
    client = Client(REMOTE_ADDR="192.168.1.9")
    with caplog.at_level(logging.WARNING, logger="jobdash.accounts.proxy"):
        response = client.get("/", HTTP_KUBEFLOW_USERID="carol@example.com")
    assert response.status_code == 403
    assert b"kubeflow-userid" in response.content
    assert "192.168.1.9" in caplog.text
    assert not User.objects.filter(username="carol@example.com").exists()
    # without the header, the same address is an ordinary visitor (the login page)
    assert client.get("/").status_code == 302


def test_the_proxy_header_is_ignored_when_no_proxy_is_configured(settings):
    settings.JOBDASH_PROXY_TRUSTED = []
    response = Client(REMOTE_ADDR=PROXY).get("/", HTTP_KUBEFLOW_USERID="carol@example.com")
    assert response.status_code == 302  # to the login page
    assert not User.objects.filter(username="carol@example.com").exists()


def test_a_configured_header_name_and_a_refused_name(proxied):
    proxied.JOBDASH_PROXY_USER_HEADER = "X-Forwarded-User"
    client = Client(REMOTE_ADDR=PROXY)
    assert client.get("/", HTTP_X_FORWARDED_USER="erin").status_code == 200
    # a name in the system: space signs no one in
    assert Client(REMOTE_ADDR=PROXY).get("/", HTTP_X_FORWARDED_USER="system:admin").status_code == 302


def test_owning_a_new_job_costs_two_reads_once_the_user_is_known(team_a, django_assert_num_queries):
    identity.admission_owner("carol", ["ml"])
    with django_assert_num_queries(2):  # the user, their recorded identity; nothing written
        assert identity.admission_owner("carol", ["ml"]).username == "carol"


def test_mine_is_a_yes_or_no(team_a):
    carol = identity.admission_owner("carol", [])
    client = Client()
    client.force_login(carol)
    refused = client.get("/api/v1/jobs/?mine=maybe")
    assert refused.status_code == 400
    assert "mine" in {e["path"] for e in refused.json()["errors"]}
    assert client.get("/api/v1/jobs/?mine=false").status_code == 200
