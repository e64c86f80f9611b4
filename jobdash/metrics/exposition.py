"""Where the metrics are served: the web app's /metrics (metrics_view, answered by the
MetricsEndpoint middleware before the host check, with the bearer token check when
JOBDASH_METRICS_TOKEN is set), and the HTTP port of the dispatcher's processes and the
webhook's listener (serve, on JOBDASH_METRICS_PORT).
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest, start_http_server

from .collectors import process_registry, web_registry

# The package's one logger, as before its split into modules.
log = logging.getLogger("jobdash.metrics")

# --- /metrics on the web app ---


def _token_refusal(request: HttpRequest) -> HttpResponse | None:
    token = getattr(settings, "JOBDASH_METRICS_TOKEN", "")
    if not token:
        return None
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        response = HttpResponse("a bearer token is required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="jobdash metrics"'
        return response
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return HttpResponse("wrong token\n", status=403, content_type="text/plain")
    return None


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format; no login (operators scrape from inside the cluster), a
    bearer token when JOBDASH_METRICS_TOKEN is set."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    refused = _token_refusal(request)
    if refused is not None:
        return refused
    try:
        body = generate_latest(web_registry())
    except DatabaseError as error:
        log.warning("metrics: the database is unavailable: %s", error)
        return HttpResponse("the database is unavailable\n", status=503, content_type="text/plain")
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


class MetricsEndpoint:
    """Answers `/metrics` before the rest of the middleware: a scrape by the pod's address
    (Prometheus' Host header) is not refused by ALLOWED_HOSTS, and needs no session or CSRF."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == "/metrics":
            return metrics_view(request)
        return self.get_response(request)


# --- the HTTP port of the dispatcher's processes and the webhook's ---

_served: dict[int, Any] = {}  # pid -> the server, one per process
_serve_lock = threading.Lock()


def serve(port: int | None = None, addr: str = "0.0.0.0") -> Any | None:
    """Export this process's metrics (under PROMETHEUS_MULTIPROC_DIR: its directory's) on
    `port`, by default JOBDASH_METRICS_PORT, where 0 means off (an explicit 0: an ephemeral
    port, for tests). Once per process; a port already taken (another worker of the same
    pod got it first) is logged and skipped. Returns the server (server_address has the
    port) or None."""
    if port is None:
        port = settings.JOBDASH_METRICS_PORT
        if not port:
            return None
    with _serve_lock:
        if os.getpid() in _served:
            return _served[os.getpid()]
        try:
            server, _ = start_http_server(port, addr=addr, registry=process_registry())
        except OSError as error:
            log.info("metrics: not serving on port %s in this process: %s", port, error)
            return None
        _served[os.getpid()] = server
        log.info("metrics: serving on %s:%s", addr, server.server_address[1])
        return server
