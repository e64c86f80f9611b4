"""Discovery: /api, /apis, /apis/<group>, /apis/<group>/<version>, as kube-apiserver serves them.

Each resource carries what kubectl reads from discovery: its verbs, short names (``ns``,
``po``, ``quota``...) and categories (``kubectl get all``) as the real API server and the
real CRDs declare them (the training-operator, MPI operator, JobSet and Trainer CRDs declare
none), and the subresources. Besides the stored resources, the create-only reviews kubesim
answers (SelfSubjectAccessReview).
"""

from __future__ import annotations

import re

from . import queuedjob
from .resources import ALL, ResourceType

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
# (group, plural) -> short names, as the API server's REST storage declares them.
SHORT_NAMES: dict[tuple[str, str], list[str]] = {
    ("", "namespaces"): ["ns"],
    ("", "nodes"): ["no"],
    ("", "pods"): ["po"],
    ("", "resourcequotas"): ["quota"],
    ("", "events"): ["ev"],
    ("", "services"): ["svc"],
    ("scheduling.k8s.io", "priorityclasses"): ["pc"],
    (queuedjob.GROUP, queuedjob.PLURAL): queuedjob.SHORT_NAMES,
}
CATEGORIES: dict[tuple[str, str], list[str]] = {
    ("", "pods"): ["all"],
    ("", "services"): ["all"],
    ("batch", "jobs"): ["all"],
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): ["api-extensions"],
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): ["api-extensions"],
    (queuedjob.GROUP, queuedjob.PLURAL): queuedjob.CATEGORIES,
}
# Create-only resources answered without storage: (group, version, plural, kind, namespaced).
REVIEWS = (
    ("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
    ("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False),
)


def version_priority(version: str) -> tuple:
    """Kubernetes version priority: GA before beta before alpha, higher numbers first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (3, 0, 0, version)
    level = {None: 0, "beta": 1, "alpha": 2}[match.group(2)]
    return (level, -int(match.group(1)), -int(match.group(3) or 0), version)


def group_versions() -> dict[str, list[str]]:
    versions: dict[str, list[str]] = {}
    for group, version in [(rt.group, rt.version) for rt in ALL] + [(r[0], r[1]) for r in REVIEWS]:
        if group and version not in versions.setdefault(group, []):
            versions[group].append(version)
    return {g: sorted(v, key=version_priority) for g, v in sorted(versions.items())}


def _api_group(group: str, versions: list[str]) -> dict:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def api_resource(rt: ResourceType) -> dict:
    resource = {
        "name": rt.plural,
        "singularName": rt.kind.lower(),
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": VERBS,
    }
    if short := SHORT_NAMES.get((rt.group, rt.plural)):
        resource["shortNames"] = short
    if categories := CATEGORIES.get((rt.group, rt.plural)):
        resource["categories"] = categories
    return resource


def _resource_list(group: str, version: str) -> dict:
    resources: list[dict] = []
    for rt in ALL:
        if rt.group != group or rt.version != version:
            continue
        resources.append(api_resource(rt))
        if rt.plural == "pods":
            log = {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]}
            resources.append(log)
            # kubectl drain looks for this entry (its group and version) before it evicts.
            eviction = {
                "name": "pods/eviction",
                "singularName": "",
                "namespaced": True,
                "group": "policy",
                "version": "v1",
                "kind": "Eviction",
                "verbs": ["create"],
            }
            resources.append(eviction)
        if rt.status_subresource:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    for r_group, r_version, plural, kind, namespaced in REVIEWS:
        if (r_group, r_version) == (group, version):
            resources.append(
                {
                    "name": plural,
                    "singularName": kind.lower(),
                    "namespaced": namespaced,
                    "kind": kind,
                    "verbs": ["create"],
                }
            )
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def discovery(path: str) -> dict | None:
    """The discovery document at ``path``, or None when it is not a discovery path."""
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }
    if path == "/api/v1":
        return _resource_list("", "v1")
    groups = group_versions()
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_api_group(g, v) for g, v in groups.items()]}
    parts = path.split("/")
    if len(parts) == 3 and parts[1] == "apis" and parts[2] in groups:
        return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(parts[2], groups[parts[2]])}
    if len(parts) == 4 and parts[1] == "apis" and parts[3] in groups.get(parts[2], ()):
        return _resource_list(parts[2], parts[3])
    return None
