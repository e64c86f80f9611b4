"""Sign-in with the platform's OpenID Connect provider (Dex in Kubeflow): the
authorization code flow with PKCE (S256), through authlib's Django client. authlib reads
the issuer's discovery document, keeps state, nonce and the code verifier in the session,
and checks the ID token (signature against the provider's JWKS, issuer, audience, expiry,
nonce); jobdash only maps the verified claims to its user (identity.py)."""

import logging
from typing import Any

import requests
from authlib.integrations.base_client import OAuthError
from authlib.integrations.django_client import OAuth
from django.conf import settings
from django.contrib.auth import login
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET
from joserfc.errors import JoseError

from . import identity

log = logging.getLogger(__name__)

NAME = "oidc"
NEXT = "jobdash-oidc-next"
# The session's backend for a platform user: ModelBackend loads any active user by id.
BACKEND = "django.contrib.auth.backends.ModelBackend"

_oauth: OAuth | None = None
_configured_for: tuple[str, str, str, str] | None = None


def enabled() -> bool:
    return bool(settings.JOBDASH_OIDC_ISSUER)


def client() -> Any:
    """authlib's client for the configured provider (made again if the settings change,
    as tests change them)."""
    global _oauth, _configured_for
    key = (
        settings.JOBDASH_OIDC_ISSUER,
        settings.JOBDASH_OIDC_CLIENT_ID,
        settings.JOBDASH_OIDC_CLIENT_SECRET,
        settings.JOBDASH_OIDC_SCOPES,
    )
    if _oauth is None or _configured_for != key:
        _oauth, _configured_for = OAuth(), key
        _oauth.register(
            NAME,
            client_id=settings.JOBDASH_OIDC_CLIENT_ID,
            client_secret=settings.JOBDASH_OIDC_CLIENT_SECRET or None,
            server_metadata_url=f"{settings.JOBDASH_OIDC_ISSUER}/.well-known/openid-configuration",
            client_kwargs={"scope": settings.JOBDASH_OIDC_SCOPES, "code_challenge_method": "S256"},
        )
    return _oauth.create_client(NAME)


@require_GET
def oidc_login(request):
    if not enabled():
        raise Http404("OIDC sign-in is not configured")
    wanted = request.GET.get("next", "")
    safe = url_has_allowed_host_and_scheme(wanted, {request.get_host()}, require_https=request.is_secure())
    request.session[NEXT] = wanted if safe else ""
    try:
        return client().authorize_redirect(request, request.build_absolute_uri(reverse("oidc-callback")))
    except requests.RequestException as error:
        return _refused(request, f"the sign-in provider cannot be reached: {error}", status=503)


@require_GET
def oidc_callback(request):
    if not enabled():
        raise Http404("OIDC sign-in is not configured")
    try:
        token = client().authorize_access_token(request, leeway=settings.JOBDASH_OIDC_LEEWAY_SECONDS)
        claims = token.get("userinfo")
        if not claims:
            raise OAuthError(description="the provider sent no ID token")
        user = identity.user_for(identity.from_oidc_claims(claims))
    except (OAuthError, JoseError, identity.Refused) as error:
        log.warning("OIDC sign-in refused: %s", error)
        return _refused(request, f"sign-in refused: {error}")
    except requests.RequestException as error:
        return _refused(request, f"the sign-in provider cannot be reached: {error}", status=503)
    login(request, user, backend=BACKEND)
    log.info("OIDC sign-in: %s", user.get_username())
    return redirect(request.session.pop(NEXT, "") or settings.LOGIN_REDIRECT_URL)


def _refused(request, message: str, status: int = 403) -> HttpResponse:
    return render(request, "accounts/signin_refused.html", {"message": message}, status=status)
