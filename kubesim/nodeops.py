"""Node operations through the API, as a kubelet, an administrator or kubectl makes them:
a node failing and recovering (its Ready condition), cordon (``spec.unschedulable``),
the Eviction API (``POST .../pods/{name}/eviction``), drain (cordon + evict every pod),
delete; and lending a node for a while (the ``jobdash.io/lent-*`` annotations a lender's
controller writes) and reclaiming it (drain + delete). The node lifecycle controller
(nodelifecycle.py) does the rest.

The Eviction API is kube-apiserver's (pkg/registry/core/pod/storage/eviction.go) without
PodDisruptionBudgets: every eviction is allowed, the pod gets the DisruptionTarget
condition (EvictionByEvictionAPI) and is deleted; a terminal pod is just deleted.
"""

from __future__ import annotations

from .api import Api
from .clock import rfc3339
from .errors import bad_request, conflict
from .jsoncodec import clone
from .resources import NODES, PODS
from .scheduler import set_pod_condition

MERGE = "application/merge-patch+json"
# What a kubelet posts, and what the node lifecycle controller writes for a silent one.
_READY = ("KubeletReady", "kubelet is posting ready status")
_NOT_READY = ("KubeletNotReady", "container runtime network not ready: NetworkReady=false")
_UNKNOWN = ("NodeStatusUnknown", "Kubelet stopped posting node status.")
EVICTION_VERSIONS = ("policy/v1", "policy/v1beta1")
# Issue 35's contract: all a consumer such as jobdash reads of a lent node.
LENT_UNTIL = "jobdash.io/lent-until"
LENT_POOL = "jobdash.io/lent-pool"
LENT_NOTICE = "jobdash.io/lent-notice-seconds"


def lent_annotations(until: float, pool: str | None = None, notice_seconds: float | None = None) -> dict[str, str]:
    """The annotations of a node lent until ``until`` (epoch seconds; written RFC 3339 UTC)."""
    annotations = {LENT_UNTIL: rfc3339(until)}
    if pool is not None:
        annotations[LENT_POOL] = pool
    if notice_seconds is not None:
        if notice_seconds < 0:
            raise ValueError("a lent node's notice is >= 0 seconds")
        annotations[LENT_NOTICE] = str(int(notice_seconds))
    return annotations


def set_ready(api: Api, name: str, status: str) -> dict:
    """The node's Ready condition becomes ``status``: True (a kubelet posting again), False
    (a kubelet reporting NotReady) or Unknown (a kubelet silent past the grace period: the
    node lifecycle controller sets every condition Unknown, heartbeats stay old)."""
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"a node's Ready status is True, False or Unknown, not {status!r}")
    now = rfc3339(api.clock.now())
    node = clone(api.get(NODES, "", name))
    conditions = node.setdefault("status", {}).setdefault("conditions", [])
    for condition in conditions:
        ctype = condition.get("type")
        if status == "Unknown":
            new = "Unknown"
            reason, message = _UNKNOWN
        elif ctype == "Ready":
            new = status
            reason, message = _READY if status == "True" else _NOT_READY
        else:  # the pressure conditions a posting kubelet reports: all clear
            new = "False"
            reason, message = condition.get("reason"), condition.get("message")
        if condition.get("status") != new:
            condition["lastTransitionTime"] = now
        if status != "Unknown":
            condition["lastHeartbeatTime"] = now
        condition.update(status=new, reason=reason, message=message)
    updated, _ = api.replace(NODES, "", name, node, subresource="status", internal=True)
    return updated


def set_unschedulable(api: Api, name: str, unschedulable: bool) -> dict:
    """kubectl cordon/uncordon: a patch of spec.unschedulable."""
    patch = {"spec": {"unschedulable": True if unschedulable else None}}
    updated, _ = api.patch(NODES, "", name, MERGE, patch)
    return updated


def evict(api: Api, namespace: str, name: str, body: object, dry_run: bool = False) -> dict:
    """POST pods/{name}/eviction: the pod is deleted (no PodDisruptionBudgets to refuse it)."""
    if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
        raise bad_request("the body of the request must be an Eviction")
    if body.get("apiVersion") not in (None, *EVICTION_VERSIONS):
        raise bad_request(f"unsupported Eviction version {body.get('apiVersion')!r}")
    if (body.get("metadata") or {}).get("name") != name:
        raise bad_request("name in URL does not match name in Eviction object")
    options = dict(body.get("deleteOptions") or {})
    dry_run = dry_run or "All" in (options.get("dryRun") or [])
    pod = api.get(PODS, namespace, name)
    preconditions = options.pop("preconditions", None) or {}
    if preconditions.get("uid") not in (None, pod["metadata"]["uid"]) or preconditions.get("resourceVersion") not in (
        None,
        pod["metadata"]["resourceVersion"],
    ):
        raise conflict("", "pods", name)
    if not dry_run and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
        # The condition is written first, as the API server does before the delete.
        status = clone(pod.get("status") or {})
        set_pod_condition(
            status, "DisruptionTarget", "True", api.clock.now(), "EvictionByEvictionAPI", "Eviction API: evicting"
        )
        pod, _ = api.replace(PODS, namespace, name, {**pod, "status": status}, subresource="status", internal=True)
    # The eviction deletes without the pod's DELETE admission (rest.ValidateAllObjectFunc).
    api.delete(PODS, namespace, name, {**options, "preconditions": {"uid": pod["metadata"]["uid"]}}, dry_run=dry_run)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def drain(api: Api, name: str) -> list[str]:
    """kubectl drain --ignore-daemonsets --delete-emptydir-data --force: cordon, then evict every
    pod bound to the node (kubesim runs no DaemonSets); returns the evicted pods' namespace/name."""
    set_unschedulable(api, name, True)
    evicted: list[str] = []
    for pod in api.list(PODS, None, field_selector=f"spec.nodeName={name}")["items"]:
        meta = pod["metadata"]
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        }
        evict(api, meta["namespace"], meta["name"], body)
        evicted.append(f"{meta['namespace']}/{meta['name']}")
    return evicted


def delete_node(api: Api, name: str) -> dict:
    return api.delete(NODES, "", name)


def lend(api: Api, name: str, until: float, pool: str | None = None, notice_seconds: float | None = None) -> dict:
    """Mark an existing node lent until ``until`` and schedulable: what a lender's operator
    does with ``kubectl annotate node`` and ``kubectl uncordon``."""
    annotations = lent_annotations(until, pool, notice_seconds)
    patch = {"metadata": {"annotations": annotations}, "spec": {"unschedulable": None}}
    updated, _ = api.patch(NODES, "", name, MERGE, patch)
    return updated


def reclaim(api: Api, name: str) -> list[str]:
    """Take a lent node back: drain it (cordon, evict every pod through the Eviction API), then
    delete it, as ``kubectl drain`` and ``kubectl delete node`` do; returns the evicted pods."""
    evicted = drain(api, name)
    delete_node(api, name)
    return evicted
