"""core/v1 Service, stored and defaulted as the API server does (no proxy, no endpoints).

Nothing in kubesim routes traffic; Services exist so that what kubectl expects of a cluster
is there (``kubectl get svc``, ``get all``, ``cluster-info``, the ``kubernetes`` Service in
``default``): a ClusterIP from 10.96.0.0/12 unless ``None`` (headless), ports' protocol TCP
and targetPort defaulted to the port, ``type`` ClusterIP.
"""

from __future__ import annotations

import hashlib

from .validation import cause, not_supported, required

TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")


def cluster_ip(uid: str) -> str:
    digest = hashlib.sha256(uid.encode()).digest()
    return f"10.{96 + digest[0] % 16}.{digest[1]}.{1 + digest[2] % 254}"


def default(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
        spec["clusterIP"] = cluster_ip(obj["metadata"].get("uid") or obj["metadata"].get("name", ""))
    if spec.get("clusterIP") and spec["type"] != "ExternalName":
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    obj.setdefault("status", {}).setdefault("loadBalancer", {})


def validate(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    causes: list[dict] = []
    if spec.get("type", "ClusterIP") not in TYPES:
        causes.append(not_supported("spec.type", spec.get("type"), TYPES))
    ports = spec.get("ports") or []
    if not ports and spec.get("clusterIP") != "None" and spec.get("type", "ClusterIP") != "ExternalName":
        causes.append(required("spec.ports"))
    for i, port in enumerate(ports):
        number = port.get("port") if isinstance(port, dict) else None
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
            causes.append(cause(f"spec.ports[{i}].port", f"Invalid value: {number!r}: must be between 1 and 65535"))
    return causes


def validate_update(old: dict, new: dict) -> list[dict]:
    before, after = (old.get("spec") or {}).get("clusterIP"), (new.get("spec") or {}).get("clusterIP")
    if before and after != before:
        return [cause("spec.clusterIP", f"Invalid value: {after!r}: field is immutable")]
    return []


def kubernetes_service() -> dict:
    """The API server's own Service in ``default``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]},
    }


def cells(obj: dict, age: str) -> list:
    spec = obj.get("spec") or {}
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress) or (
        spec.get("externalName", "<none>") if spec.get("type") == "ExternalName" else "<none>"
    )
    ports = ",".join(
        f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    )
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    return [
        obj["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or "<none>",
        external,
        ports or "<none>",
        age,
        selector or "<none>",
    ]
