"""kube.py's access reviews: a SubjectAccessReview for one of jobdash's users, and the watch
of the bindings whose changes make earlier answers stale."""

from collections.abc import Callable, Sequence
from typing import Any

from kubernetes import client

from .gateway import Access
from .informer import Informer

REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def review_body(user: str, groups: Sequence[str], verb: str, group: str, resource: str, namespace: str) -> dict:
    attributes = {"verb": verb, "group": group, "resource": resource, "namespace": namespace}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": list(groups), "resourceAttributes": attributes},
    }


def answer(review: dict[str, Any]) -> Access:
    status = review.get("status") or {}
    # `denied` is an authorizer's explicit no; RBAC never says it, a webhook authorizer may.
    allowed = bool(status.get("allowed")) and not status.get("denied")
    return Access(allowed, str(status.get("reason") or status.get("evaluationError") or ""))


def binding_informers(api: client.ApiClient, on_change: Callable[[], None]) -> list[Informer]:
    """Watches of every RoleBinding and ClusterRoleBinding; each event (a relist too) calls
    `on_change`. Only the names are kept: nothing reads the bindings, their change is the news."""
    rbac = client.RbacAuthorizationV1Api(api)

    def changed(_kind: str, _type: str, _namespace: str, _name: str) -> None:
        on_change()

    def name(obj: dict) -> str:
        return str(obj["metadata"]["name"])

    return [
        Informer("rolebinding", rbac.list_role_binding_for_all_namespaces, name, changed),
        Informer("clusterrolebinding", rbac.list_cluster_role_binding, name, changed),
    ]
