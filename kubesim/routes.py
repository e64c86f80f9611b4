"""Which handler a request of the simulated API server goes to: a REST path as a resource
(type, namespace, name, subresource), the verb a method makes of it, and the endpoints that
are no resource (the authorization reviews).  Pure: server.py does the HTTP."""

from __future__ import annotations

from typing import NamedTuple

from .admission import UserInfo
from .errors import method_not_allowed
from .resources import BY_GROUP_PLURAL, ResourceType

TRUE = ("true", "1", "True")

# POST path -> the Authorizer's method that answers it (with the caller and the body).
REVIEWS = {
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews": "review",
    "/apis/authorization.k8s.io/v1/subjectaccessreviews": "subject_review",
    "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews": "rules",
}

# Subresources with a handler of their own, and the one verb each serves (status goes
# with its object's verbs).
SUBRESOURCE_VERBS = {"log": "get", "eviction": "create"}


class Call(NamedTuple):
    """One authorized request on a resource."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str
    verb: str
    query: dict
    user: UserInfo

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun") == "All"

    @property
    def object_name(self) -> str:
        """The name of a verb's one object (``verb`` gives get, update, patch and delete only
        to a named object)."""
        assert self.name is not None
        return self.name


def route(path: str) -> tuple[ResourceType, str | None, str | None, str] | None:
    """Map a REST path to (resource type, namespace, name, subresource)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    rt = BY_GROUP_PLURAL.get((group, rest[0]))
    if rt is None or (namespace is not None and not rt.namespaced):
        return None
    version = parts[2] if group else "v1"
    if version != rt.version:
        return None
    name = rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3 or (
        subresource
        and subresource != "status"
        and (subresource, rt.plural) not in (("log", "pods"), ("eviction", "pods"))
    ):
        return None
    if rt.namespaced and name is not None and namespace is None:
        return None
    return rt, namespace, name, subresource


def verb(method: str, name: str | None, query: dict, path_subresource: str = "") -> str:
    if method == "GET":
        if query.get("watch") in TRUE:
            return "watch"
        return "get" if name else "list"
    if method == "POST" and (name is None or path_subresource == "eviction"):
        return "create"
    if name is None:
        raise method_not_allowed()
    return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method) or "unsupported"
