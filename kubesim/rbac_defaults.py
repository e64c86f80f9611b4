"""The RBAC objects kube-apiserver bootstraps, and the clusterrole-aggregation controller.

The user-facing roles are kube-apiserver's (plugin/pkg/auth/authorizer/rbac/bootstrappolicy):
``cluster-admin`` may do everything and is bound to the group ``system:masters``;
``admin``, ``edit`` and ``view`` hold no rules of their own but an ``aggregationRule``,
and the controller fills them with the rules of every ClusterRole labelled
``rbac.authorization.k8s.io/aggregate-to-<role>: "true"``. ``view`` is labelled
aggregate-to-edit and ``edit`` aggregate-to-admin, so admin ⊇ edit ⊇ view, and an
operator's ClusterRole labelled aggregate-to-edit reaches admin too. The built-in
resources each role covers are the ``system:aggregate-to-*`` roles below (the resources of
kube-apiserver's lists that kubesim serves or that kubectl users meet; a rule may name a
resource nobody serves). Nothing in ``edit`` or ``admin`` writes a ResourceQuota or a
cluster-scoped object: a namespace's quota is the cluster admin's.
"""

from __future__ import annotations

import copy
from typing import Any

from .selectors import match_label_selector_object

GROUP, VERSION = "rbac.authorization.k8s.io", "v1"
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


_AGGREGATE_TO_VIEW = [
    _rule(
        [""],
        [
            *("configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods"),
            *("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services"),
            "services/status",
        ],
        READ,
    ),
    _rule(
        [""],
        [
            *("bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status"),
            *("replicationcontrollers/status", "resourcequotas", "resourcequotas/status"),
        ],
        READ,
    ),
    _rule([""], ["namespaces"], READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], READ),
    _rule(
        ["apps"],
        [
            *("controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale"),
            *("deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets"),
            *("statefulsets/scale", "statefulsets/status"),
        ],
        READ,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], READ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
    _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], READ),
]

_AGGREGATE_TO_EDIT = [
    _rule([""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"], READ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule(
        [""],
        [
            *("configmaps", "events", "persistentvolumeclaims", "replicationcontrollers"),
            *("replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"),
        ],
        WRITE,
    ),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(
        ["apps"],
        [
            *("daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets"),
            *("replicasets/scale", "statefulsets", "statefulsets/scale"),
        ],
        WRITE,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], WRITE),
    _rule(["coordination.k8s.io"], ["leases"], [*READ, *WRITE]),
]

_AGGREGATE_TO_ADMIN = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule([GROUP], ["rolebindings", "roles"], [*READ, *WRITE]),
]


def _cluster_role(name: str, rules: list[dict] | None, labels: dict[str, str], aggregate_from: str = "") -> dict:
    role: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {**BOOTSTRAP_LABELS, **labels},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules or [],
    }
    if aggregate_from:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE + aggregate_from: "true"}}]}
    return role


def default_objects() -> list[dict]:
    """The ClusterRoles and the ClusterRoleBinding kube-apiserver creates at its first start."""
    everything = [
        _rule(["*"], ["*"], ["*"]),
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ]
    return [
        _cluster_role("cluster-admin", everything, {}),
        _cluster_role("admin", None, {}, aggregate_from="admin"),
        _cluster_role("edit", None, {AGGREGATE + "admin": "true"}, aggregate_from="edit"),
        _cluster_role("view", None, {AGGREGATE + "edit": "true"}, aggregate_from="view"),
        _cluster_role("system:aggregate-to-admin", _AGGREGATE_TO_ADMIN, {AGGREGATE + "admin": "true"}),
        _cluster_role("system:aggregate-to-edit", _AGGREGATE_TO_EDIT, {AGGREGATE + "edit": "true"}),
        _cluster_role("system:aggregate-to-view", _AGGREGATE_TO_VIEW, {AGGREGATE + "view": "true"}),
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "name": "cluster-admin",
                "labels": dict(BOOTSTRAP_LABELS),
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
            },
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": "system:masters"}],
        },
    ]


class Aggregator:
    """kube-controller-manager's clusterrole-aggregation controller: a ClusterRole with an
    ``aggregationRule`` gets, as its rules, the rules of every other ClusterRole its
    selectors match (in name order, each rule once). Run as a store hook, at once: a
    ClusterRole created through the API is in ``edit`` by the next request (the real
    controller takes a moment)."""

    def __init__(self, store: Any, cluster_roles: Any):
        self.store, self.rt = store, cluster_roles
        self._busy = False

    def on_event(self, rt: Any, _event: Any) -> None:
        if rt.plural != self.rt.plural or self._busy:
            return
        self._busy = True
        try:
            # Each pass may change a role another selects (view -> edit -> admin): until quiet.
            for _ in range(16):
                if not self._sync():
                    break
        finally:
            self._busy = False

    def _sync(self) -> bool:
        roles = sorted(self.store.items(self.rt, None), key=lambda r: r["metadata"]["name"])
        for role in roles:
            selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
            if not selectors:
                continue
            rules: list[dict] = []
            for other in roles:
                if other is role:
                    continue
                labels = other["metadata"].get("labels") or {}
                if any(match_label_selector_object(s, labels) for s in selectors):
                    rules += [r for r in other.get("rules") or [] if r not in rules]
            if rules != (role.get("rules") or []):
                updated = copy.deepcopy(role)
                updated["rules"] = rules
                self.store.update(self.rt, updated)
                return True
        return False
