"""Sign-in through a real OpenID Connect provider: panva's certified `oidc-provider` (npm,
installed by `make install` under tests/oidc_provider/), run as a subprocess with its
development login and consent pages. The browser is a requests session that follows the
provider's forms; jobdash runs on the live server. What is tested is the authorization code
flow with PKCE end to end, the claims kept, and that a wrong state, a forged token and an
expired token sign no one in."""

import re
import time
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import pytest
import requests
from django.conf import settings
from django.contrib.auth.models import User
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey

from jobdash.accounts import identity, oidc

from .oidc_support import CLIENT_ID, configure, running_provider, to_callback

pytestmark = pytest.mark.django_db(transaction=True)
USERS = {"alice": {"email": "alice@example.com", "groups": ["ml-team", "kubeflow-users"]}}


@pytest.fixture
def provider(live_server, tmp_path, settings):
    """The provider, registered with jobdash's live server as its client; yields its issuer
    URL and the key it signs ID tokens with (the test's own, to mint expired ones)."""
    with running_provider(live_server.url, tmp_path, USERS) as (issuer, key):
        configure(settings, issuer)
        yield issuer, key


def test_sign_in_with_the_provider_end_to_end(provider, live_server):
    browser = requests.Session()
    login_page = browser.get(f"{live_server.url}/login/").text
    assert "Sign in with Dex" in login_page and 'name="password"' in login_page  # local accounts stay
    landed = browser.get(to_callback(browser, live_server.url))
    assert landed.status_code == 200 and landed.url == f"{live_server.url}/account/token/"

    alice = User.objects.get(username="oidc:alice@example.com")
    assert not alice.has_usable_password()
    assert identity.groups_of(alice) == ("ml-team", "kubeflow-users")  # kept for role checks

    # a user signed in by OIDC gets an API token on the token page, and the API knows them
    csrf = browser.cookies["csrftoken"]
    created = browser.post(landed.url, data={"csrfmiddlewaretoken": csrf, "action": "create"})
    key = re.search(r"\b([0-9a-f]{40})\b", created.text)
    assert key, created.text
    api = requests.get(f"{live_server.url}/api/v1/jobs/?mine=true", headers={"Authorization": f"Token {key[1]}"})
    assert api.status_code == 200 and api.json()["results"] == []

    # signing in again is the same user, not a second one
    browser2 = requests.Session()
    browser2.get(to_callback(browser2, live_server.url))
    assert User.objects.filter(username__endswith="alice@example.com").count() == 1


def test_a_wrong_state_signs_no_one_in(provider, live_server):
    browser = requests.Session()
    callback = urlsplit(to_callback(browser, live_server.url))
    query = parse_qs(callback.query)
    assert query.get("code")
    forged = urlunsplit(callback._replace(query=urlencode({"code": query["code"][0], "state": "not-the-state"})))
    refused = browser.get(forged, allow_redirects=False)
    assert refused.status_code == 403 and "Sign-in refused" in refused.text
    assert not User.objects.filter(username="oidc:alice@example.com").exists()
    assert browser.get(f"{live_server.url}/", allow_redirects=False).status_code == 302  # still signed out


def test_a_callback_nobody_started_is_refused(provider, live_server):
    refused = requests.get(f"{live_server.url}/login/oidc/callback/?code=abc&state=xyz", allow_redirects=False)
    assert refused.status_code == 403


def id_token(key: RSAKey, issuer: str, **changes) -> dict:
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": CLIENT_ID,
        "sub": "alice",
        "email": "alice@example.com",
        "nonce": "n-1",
        "iat": now,
        "exp": now + 300,
        **changes,
    }
    return {"id_token": jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)}


def verified_claims(token: dict, nonce: str) -> dict:
    """The ID token's claims as the callback believes them (else JoseError): its
    authorize_access_token has authlib check the ID token with parse_id_token, the sign-in's
    nonce and jobdash's leeway, exactly this call."""
    return dict(oidc.client().parse_id_token(token, nonce=nonce, leeway=settings.JOBDASH_OIDC_LEEWAY_SECONDS))


def test_only_the_providers_unexpired_tokens_for_this_client_are_believed(provider):
    issuer, key = provider
    # the provider's key, this client, this sign-in: believed (so the refusals below are
    # for what each one changes, not for how the test made them)
    assert verified_claims(id_token(key, issuer), nonce="n-1")["email"] == "alice@example.com"
    forger = RSAKey.generate_key(2048, parameters={"kid": key.kid, "use": "sig", "alg": "RS256"})
    refusals = {
        "forged": (id_token(forger, issuer), "n-1"),
        "expired": (id_token(key, issuer, iat=int(time.time()) - 600, exp=int(time.time()) - 60), "n-1"),
        "another client's": (id_token(key, issuer, aud="someone-else"), "n-1"),
        "another issuer's": (id_token(key, "https://evil.example.com"), "n-1"),
        "another sign-in's": (id_token(key, issuer), "n-2"),
    }
    for what, (token, nonce) in refusals.items():
        with pytest.raises(JoseError):
            verified_claims(token, nonce=nonce)
            pytest.fail(f"a {what} token was believed")


def test_without_an_issuer_there_is_no_oidc_sign_in(client, settings):
    settings.JOBDASH_OIDC_ISSUER = ""
    assert client.get("/login/oidc/").status_code == 404
    assert "Sign in with" not in client.get("/login/").content.decode()
