"""kubesim's default RBAC objects and its clusterrole-aggregation controller, as
kube-apiserver and kube-controller-manager have them: cluster-admin bound to system:masters,
admin ⊇ edit ⊇ view filled from the ClusterRoles labelled aggregate-to-*, and no quota
writes for anyone but the cluster admin."""

from __future__ import annotations

import copy

import pytest

from kubesim.admission import UserInfo
from kubesim.cluster import Cluster
from kubesim.errors import ApiError
from kubesim.resources import CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS

AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
TFJOBS_RULE = {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": ["create", "delete"]}
ALICE = UserInfo("alice", ("ml-team",))


def allowed(cluster: Cluster, user: UserInfo, verb: str, resource: str, namespace: str, group: str = "") -> bool:
    attrs = {"verb": verb, "group": group, "resource": resource, "namespace": namespace, "name": ""}
    return cluster.authorizer.decide(user, attrs)[0]


def rules(cluster: Cluster, name: str) -> list[dict]:
    return cluster.store.get(CLUSTERROLES, "", name)["rules"]


@pytest.fixture
def cluster() -> Cluster:
    made = Cluster({"rbac": True, "clock": "manual", "namespaces": [{"name": "team-a"}, {"name": "team-b"}]})
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "alice-edit", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
    }
    made.api.create(ROLEBINDINGS, "team-a", binding)
    return made


def test_the_default_roles_nest_and_leave_quotas_to_the_cluster_admin(cluster):
    admin = cluster.store.get(CLUSTERROLEBINDINGS, "", "cluster-admin")
    assert admin["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]
    view, edit, everything = rules(cluster, "view"), rules(cluster, "edit"), rules(cluster, "admin")
    assert view and all(rule in edit for rule in view) and all(rule in everything for rule in edit)
    assert len(view) < len(edit) < len(everything)
    assert allowed(cluster, ALICE, "create", "pods", "team-a")
    assert allowed(cluster, ALICE, "get", "pods/log", "team-a")
    assert allowed(cluster, ALICE, "list", "resourcequotas", "team-a")
    for verb in ("create", "update", "patch", "delete"):
        assert not allowed(cluster, ALICE, verb, "resourcequotas", "team-a")
    assert not allowed(cluster, ALICE, "get", "pods", "team-b")
    assert not allowed(cluster, ALICE, "list", "nodes", "")
    assert not allowed(cluster, ALICE, "create", "tfjobs", "team-a", "kubeflow.org")  # no operator's role yet
    assert allowed(cluster, UserInfo("root", ("system:masters",)), "delete", "resourcequotas", "team-b")


def test_a_labelled_cluster_role_is_aggregated_until_it_is_not(cluster):
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "tfjobs-edit", "labels": {AGGREGATE + "edit": "true"}},
        "rules": [TFJOBS_RULE],
    }
    cluster.api.create(CLUSTERROLES, "", copy.deepcopy(role))
    assert TFJOBS_RULE in rules(cluster, "edit") and TFJOBS_RULE in rules(cluster, "admin")
    assert TFJOBS_RULE not in rules(cluster, "view")
    assert allowed(cluster, ALICE, "create", "tfjobs", "team-a", "kubeflow.org")
    assert not allowed(cluster, ALICE, "create", "tfjobs", "team-b", "kubeflow.org")

    unlabelled = copy.deepcopy(cluster.store.get(CLUSTERROLES, "", "tfjobs-edit"))
    unlabelled["metadata"]["labels"] = {}
    cluster.api.replace(CLUSTERROLES, "", "tfjobs-edit", unlabelled)
    assert TFJOBS_RULE not in rules(cluster, "edit") and TFJOBS_RULE not in rules(cluster, "admin")
    assert not allowed(cluster, ALICE, "create", "tfjobs", "team-a", "kubeflow.org")

    # rules written into an aggregated role are the controller's to overwrite
    edit = copy.deepcopy(cluster.store.get(CLUSTERROLES, "", "edit"))
    edit["rules"] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    cluster.api.replace(CLUSTERROLES, "", "edit", edit)
    assert {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]} not in rules(cluster, "edit")
    assert not allowed(cluster, ALICE, "delete", "resourcequotas", "team-a")


def test_rbac_names_are_path_segments(cluster):
    assert cluster.store.get(CLUSTERROLES, "", "system:aggregate-to-edit")["rules"]
    bad = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "a/b"}}
    with pytest.raises(ApiError) as refused:
        cluster.api.create(CLUSTERROLES, "", bad)
    assert refused.value.code == 422 and "may not contain '/'" in str(refused.value.message)
