"""The control plane under ``/kubesim/``, unauthenticated, for tests run against a separate
process: the job create audit, faults, dropping watches, cutting the API server off (POST /kubesim/cut {"off": bool}), compaction, advancing a manual clock
and the server's state.  Each endpoint answers 200 with a JSON object."""

from __future__ import annotations

from collections.abc import Callable

from .cluster import Cluster
from .errors import ApiError, bad_request


def _audit(cluster: Cluster, body: dict, errors: list[str]) -> dict:
    return {"items": list(cluster.audit)}


def _add_fault(cluster: Cluster, body: dict, errors: list[str]) -> dict:
    cluster.faults.add(**body)
    return {"rules": len(cluster.faults.rules)}


def _clear_faults(cluster: Cluster, body: dict, errors: list[str]) -> dict:
    cluster.faults.clear()
    return {"rules": 0}


def _drop_watches(cluster: Cluster, body: dict, errors: list[str]) -> dict:
    return {"dropped": cluster.drop_watches(bool(body.get("abrupt")))}


def _cut(cluster: Cluster, body: dict, errors: list[str]) -> dict:
    off = body.get("off", True)
    if not isinstance(off, bool):
        raise bad_request("off must be true or false")
    cluster.cut_off(off)
    return {"cut": off}


def _compact(cluster: Cluster, body: dict, errors: list[str]) -> dict:
    return {"compacted": cluster.store.compact()}


def _advance(cluster: Cluster, body: dict, errors: list[str]) -> dict:
    if not cluster.clock.manual:
        raise bad_request("advance needs `clock: manual`; a real clock moves by itself")
    cluster.advance(float(body.get("seconds", 0)))
    return {"now": cluster.clock.now()}


def _state(cluster: Cluster, body: dict, errors: list[str]) -> dict:
    return {
        "now": cluster.clock.now(),
        "resourceVersion": cluster.store.resource_version,
        "watchers": cluster.store.watcher_count(),
        "errors": list(errors),
    }


_ENDPOINTS: dict[tuple[str, str], Callable[[Cluster, dict, list[str]], dict]] = {
    ("GET", "/kubesim/audit"): _audit,
    ("POST", "/kubesim/faults"): _add_fault,
    ("DELETE", "/kubesim/faults"): _clear_faults,
    ("POST", "/kubesim/drop-watches"): _drop_watches,
    ("POST", "/kubesim/cut"): _cut,
    ("POST", "/kubesim/compact"): _compact,
    ("POST", "/kubesim/advance"): _advance,
    ("GET", "/kubesim/state"): _state,
}


def answer(cluster: Cluster, errors: list[str], method: str, path: str, body: dict) -> dict:
    """The reply of the endpoint ``method path`` (``errors``: the server's, for its state)."""
    endpoint = _ENDPOINTS.get((method, path))
    if endpoint is None:
        raise ApiError(404, "NotFound", f"no kubesim control endpoint {method} {path}")
    return endpoint(cluster, body, errors)
