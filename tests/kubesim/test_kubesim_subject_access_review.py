"""kubesim answers a SubjectAccessReview (authorization.k8s.io/v1) as kube-apiserver does:
the spec's user and groups decided by RBAC, allowed with the binding as its reason or not
allowed without one; 422 for a review naming nobody; and 403 for a caller that may not
create subjectaccessreviews (anyone could otherwise map everyone's rights)."""

import json

import pytest
from kubernetes import client

from kubesim.testing import running_kubesim

RBAC = "rbac.authorization.k8s.io"


def binding(name: str, namespace: str, kind: str, subject: str, role: str = "edit") -> dict:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": kind, "name": subject}],
    }


REVIEWER = [
    {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "reviewer"},
        "rules": [{"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}],
    },
    {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "reviewer"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "reviewer"},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "reviewer"}],
    },
]


@pytest.fixture(scope="module")
def sim():
    config = {
        "rbac": True,
        "namespaces": [{"name": "team-a"}, {"name": "team-b"}],
        "users": [
            {"token": "reviewer-token", "username": "reviewer"},
            {"token": "alice-token", "username": "alice"},
        ],
        "objects": [
            *REVIEWER,
            binding("alice-edit", "team-a", "User", "alice"),
            binding("vision-view", "team-b", "Group", "vision", role="view"),
        ],
    }
    with running_kubesim(config, manual_clock=True) as running:
        yield running


def review(sim, caller: str, spec: dict) -> client.V1SubjectAccessReviewStatus:
    api = client.AuthorizationV1Api(sim.api_client(caller))
    answer = api.create_subject_access_review(client.V1SubjectAccessReview(spec=spec))
    assert answer.kind == "SubjectAccessReview"
    return answer.status


def can(verb: str, resource: str, namespace: str, group: str = "batch") -> dict:
    return {"verb": verb, "group": group, "resource": resource, "namespace": namespace}


def test_a_review_decides_for_the_specs_user_and_groups(sim):
    allowed = review(sim, "reviewer", {"user": "alice", "resourceAttributes": can("create", "jobs", "team-a")})
    assert allowed.allowed is True
    assert allowed.reason == 'RBAC: allowed by RoleBinding "alice-edit/team-a" of ClusterRole "edit" to User "alice"'
    refused = review(sim, "reviewer", {"user": "alice", "resourceAttributes": can("create", "jobs", "team-b")})
    assert refused.allowed is False and not refused.reason
    # a group's binding counts for a user in it, and only for what its role grants
    spec = {"user": "carol", "groups": ["vision"], "resourceAttributes": can("list", "jobs", "team-b")}
    by_group = review(sim, "reviewer", spec)
    assert by_group.allowed is True
    assert (
        by_group.reason == 'RBAC: allowed by RoleBinding "vision-view/team-b" of ClusterRole "view" to Group "vision"'
    )
    spec["resourceAttributes"] = can("create", "jobs", "team-b")
    assert review(sim, "reviewer", spec).allowed is False
    assert (
        review(sim, "reviewer", {"user": "carol", "resourceAttributes": can("list", "jobs", "team-b")}).allowed is False
    )
    # edit is no admin: it cannot let others in
    spec = {"user": "alice", "resourceAttributes": can("create", "rolebindings", "team-a", group=RBAC)}
    assert review(sim, "reviewer", spec).allowed is False
    spec = {"user": "root", "groups": ["system:masters"], "resourceAttributes": can("delete", "nodes", "")}
    assert review(sim, "reviewer", spec).allowed is True


def test_a_review_naming_nobody_is_invalid(sim):
    api = client.AuthorizationV1Api(sim.api_client("reviewer"))
    with pytest.raises(client.ApiException) as invalid:
        api.create_subject_access_review(
            client.V1SubjectAccessReview(spec={"resourceAttributes": can("get", "pods", "team-a", group="")})
        )
    assert invalid.value.status == 422
    assert "at least one of user or group must be specified" in invalid.value.body


def test_only_a_caller_allowed_to_create_reviews_may_ask(sim):
    api = client.AuthorizationV1Api(sim.api_client("alice"))
    spec = {"user": "reviewer", "resourceAttributes": can("create", "jobs", "team-a")}
    with pytest.raises(client.ApiException) as forbidden:
        api.create_subject_access_review(client.V1SubjectAccessReview(spec=spec))
    assert forbidden.value.status == 403
    message = json.loads(forbidden.value.body)["message"]
    assert 'User "alice" cannot create resource "subjectaccessreviews"' in message
    # asking about oneself needs no right (a SelfSubjectAccessReview, kubectl auth can-i)
    own = api.create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(spec={"resourceAttributes": can("create", "jobs", "team-a")})
    )
    assert own.status.allowed is True
