"""The `kubernetes` client's set-up and its errors in the gateway's terms (kube.py's)."""

import json

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from .gateway import (
    STALE_TERM_REASON,
    AlreadyExists,
    Conflict,
    Fatal,
    Fenced,
    GatewayError,
    NotFound,
    QuotaExceeded,
    Transient,
)

__all__ = ["answers", "api_client", "translate"]

TRANSIENT_STATUSES = {0, 408, 429, 500, 502, 503, 504}


def api_client(mode: str, kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """mode: `kubeconfig` (or `sim`: kubesim writes a kubeconfig; `context`: one of its
    contexts, else its current one) or `incluster`."""
    configuration = client.Configuration()
    if mode == "incluster":
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    # Watches hold connections for minutes; releases run concurrently beside them.
    configuration.connection_pool_maxsize = 32
    configuration.retries = False  # retries are ours, with backoff, in `_call`
    return client.ApiClient(configuration)


def answers(api: client.ApiClient, timeout: float) -> bool:
    """Whether the API server answers now (GET /version), within `timeout` seconds."""
    try:
        client.VersionApi(api).get_code(_request_timeout=timeout)
    except Exception:  # any failure to answer: refused, reset, timed out, an error status
        return False
    return True


def translate(error: ApiException) -> GatewayError:
    status = error.status or 0
    try:
        body = json.loads(error.body) if error.body else {}
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") or error.reason or str(error)
    if status in TRANSIENT_STATUSES:
        return Transient(f"{status}: {message}")
    if status == 404:
        return NotFound(message)
    if status == 409:
        return AlreadyExists(message) if body.get("reason") == "AlreadyExists" else Conflict(message)
    if status == 403 and body.get("reason") == STALE_TERM_REASON:
        return Fenced(message)
    if status == 403 and "exceeded quota" in message:
        return QuotaExceeded(message)
    return Fatal(f"{status}: {message}")
