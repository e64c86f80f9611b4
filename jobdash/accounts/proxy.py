"""Kubeflow's authenticating proxy (oauth2-proxy or the Istio gateway's ext-authz in front
of the central dashboard) signs people in and passes who they are in `kubeflow-userid`
(and `kubeflow-groups`). Django's RemoteUserMiddleware/RemoteUserBackend do the session
part; what is added here is whom to believe: the header counts only from the proxies'
addresses (JOBDASH_PROXY_TRUSTED). Anyone else can send that header too, so from any
other address it is refused with a 403 and logged, never ignored: a client that reaches
jobdash around the proxy is a misconfiguration worth seeing."""

import functools
import ipaddress
import logging

from django.conf import settings
from django.contrib.auth.backends import RemoteUserBackend
from django.contrib.auth.middleware import RemoteUserMiddleware
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponseForbidden

from . import identity

log = logging.getLogger(__name__)


def meta_key(header: str) -> str:
    """How Django's request.META names an HTTP header."""
    return "HTTP_" + header.upper().replace("-", "_")


@functools.cache
def trusted_networks(entries: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)
    except ValueError as error:
        raise ImproperlyConfigured(f"JOBDASH_PROXY_TRUSTED: {error}") from None


class ProxyUserMiddleware(RemoteUserMiddleware):
    """The settings are read per request (cheap; the networks parsed once per value), so
    that the header's name is the one configured, not RemoteUserMiddleware's class constant."""

    @property
    def header(self) -> str:  # type: ignore[override]
        return meta_key(settings.JOBDASH_PROXY_USER_HEADER)

    def __call__(self, request):
        self.networks = trusted_networks(tuple(settings.JOBDASH_PROXY_TRUSTED))
        if not self.networks:
            return self.get_response(request)
        if self.header in request.META and not self._from_proxy(request):
            log.warning(
                "proxy header %s from %s, which is not a trusted proxy: refused",
                settings.JOBDASH_PROXY_USER_HEADER,
                request.META.get("REMOTE_ADDR"),
            )
            return HttpResponseForbidden(
                f"{settings.JOBDASH_PROXY_USER_HEADER} is accepted only from the authenticating proxy",
                content_type="text/plain",
            )
        return super().__call__(request)

    def _from_proxy(self, request) -> bool:
        try:
            address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
        except ValueError:
            return False
        return any(address in network for network in self.networks)


class ProxyUserBackend(RemoteUserBackend):
    """The proxy's user, through identity.py: the same User as their kubectl identity."""

    def clean_username(self, username: str) -> str:
        prefix = settings.JOBDASH_PROXY_USERID_PREFIX
        username = username.strip()
        return username[len(prefix) :] if prefix and username.startswith(prefix) else username

    def authenticate(self, request, remote_user=None):  # type: ignore[override]
        if not remote_user or request is None:
            return None
        groups = request.META.get(meta_key(settings.JOBDASH_PROXY_GROUPS_HEADER), "")
        try:
            return identity.user_for(identity.from_proxy(remote_user, groups))
        except identity.Refused as error:
            log.warning("proxy user %r refused: %s", remote_user, error)
            return None
