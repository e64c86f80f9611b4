"""RBAC (rbac.authorization.k8s.io/v1), SelfSubjectAccessReview and SubjectAccessReview
(authorization.k8s.io/v1).

Roles, ClusterRoles and their bindings are stored like any object. With ``rbac: true`` in
the config every API request is authorized by them as kube-apiserver's RBAC authorizer
does (rules by verb, API group, resource[/subresource] and resource name; bindings to a
User, Group or ServiceAccount; ``system:masters`` may do everything); without, every
authenticated user may do everything (AlwaysAllow), kubesim's historic behaviour. A
SelfSubjectAccessReview (``kubectl auth can-i``) answers from the same decision; a
SubjectAccessReview asks it for the spec's user and groups, and only a caller allowed to
``create`` subjectaccessreviews may ask (a service such as jobdash deciding for its users).
The default roles and their aggregation are rbac_defaults.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .validation import cause, required

if TYPE_CHECKING:
    from .admission import UserInfo

GROUP, VERSION = "rbac.authorization.k8s.io", "v1"
ALL_ACCESS = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]


def validate_role(obj: dict) -> list[dict]:
    causes: list[dict] = []
    for i, rule in enumerate(obj.get("rules") or []):
        if not isinstance(rule, dict) or not rule.get("verbs"):
            causes.append(required(f"rules[{i}].verbs", "Required value: verbs must contain at least one value"))
        elif rule.get("nonResourceURLs") and obj.get("kind") == "Role":
            causes.append(
                cause(
                    f"rules[{i}].nonResourceURLs", "Invalid value: namespaced rules cannot apply to non-resource URLs"
                )
            )
    return causes


def validate_binding(obj: dict) -> list[dict]:
    ref = obj.get("roleRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        return [required("roleRef.name")]
    allowed = ("ClusterRole",) if obj.get("kind") == "ClusterRoleBinding" else ("Role", "ClusterRole")
    if ref.get("kind") not in allowed:
        return [
            cause("roleRef.kind", f"Unsupported value: {ref.get('kind')!r}: supported values: {', '.join(allowed)}")
        ]
    return []


def validate_binding_update(old: dict, new: dict) -> list[dict]:
    if old.get("roleRef") != new.get("roleRef"):
        return [cause("roleRef", "Invalid value: cannot change roleRef", "FieldValueInvalid")]
    return []


def _matches(values: list | None, wanted: str) -> bool:
    return bool(values) and ("*" in values or wanted in values)  # type: ignore[operator]


def _rule_allows(rule: dict, attrs: dict) -> bool:
    if not _matches(rule.get("verbs"), attrs["verb"]):
        return False
    if attrs.get("path") is not None:  # a non-resource request
        urls = rule.get("nonResourceURLs") or []
        path = attrs["path"]
        return any(u == "*" or u == path or (u.endswith("*") and path.startswith(u[:-1])) for u in urls)
    if not _matches(rule.get("apiGroups"), attrs.get("group", "")):
        return False
    resource = attrs.get("resource", "")
    sub = attrs.get("subresource", "")
    full = f"{resource}/{sub}" if sub else resource
    resources = rule.get("resources") or []
    if not ("*" in resources or full in resources or (sub and f"*/{sub}" in resources)):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.get("name", "") in names


def _subject_matches(subject: dict, user: UserInfo, namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.username
    if kind == "Group":
        return name in user.groups or name in ("system:authenticated",)
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return user.username == f"system:serviceaccount:{sa_namespace}:{name}"
    return False


class Authorizer:
    def __init__(self, store: Any, enabled: bool, role_types: dict[str, Any]):
        """``role_types``: Kind -> ResourceType of Role, ClusterRole, RoleBinding, ClusterRoleBinding."""
        self.store, self.enabled, self.types = store, enabled, role_types

    def decide(self, user: UserInfo, attrs: dict) -> tuple[bool, str]:
        """(allowed, reason) for request attributes (verb, group, resource, subresource,
        namespace, name; or path and verb for a non-resource URL)."""
        if "system:masters" in user.groups:
            return True, ""
        if not self.enabled:
            return True, ""
        namespace = attrs.get("namespace") or ""
        for binding in self.store.items(self.types["ClusterRoleBinding"], None):
            if self._grants(binding, user, attrs, ""):
                return True, self._reason(binding, user)
        if namespace and attrs.get("path") is None:
            for binding in self.store.items(self.types["RoleBinding"], namespace):
                if self._grants(binding, user, attrs, namespace):
                    return True, self._reason(binding, user)
        return False, ""

    def _grants(self, binding: dict, user: UserInfo, attrs: dict, namespace: str) -> bool:
        subjects = binding.get("subjects") or []
        if not any(_subject_matches(s, user, namespace) for s in subjects):
            return False
        ref = binding.get("roleRef") or {}
        kind = ref.get("kind")
        if kind == "ClusterRole":
            role = self.store.find(self.types["ClusterRole"], "", ref.get("name", ""))
        elif kind == "Role":
            role = self.store.find(self.types["Role"], namespace, ref.get("name", ""))
        else:
            role = None
        return role is not None and any(_rule_allows(r, attrs) for r in role.get("rules") or [])

    @staticmethod
    def _reason(binding: dict, user: UserInfo) -> str:
        """kube-apiserver's words: `RBAC: allowed by RoleBinding "name/namespace" of
        ClusterRole "edit" to Group "vision"`, naming the subject that matched."""
        ref = binding.get("roleRef") or {}
        namespace = binding["metadata"].get("namespace") or ""
        name = binding["metadata"]["name"] + (f"/{namespace}" if namespace else "")
        subject = next(s for s in binding.get("subjects") or [] if _subject_matches(s, user, namespace))
        who = subject.get("name", "")
        if subject.get("kind") == "ServiceAccount":
            who += "/" + (subject.get("namespace") or namespace)
        return f'RBAC: allowed by {binding["kind"]} "{name}" of {ref.get("kind")} "{ref.get("name")}" to {subject.get("kind")} "{who}"'

    def authorize(self, user: UserInfo, verb: str, group: str, plural: str, sub: str, namespace: str, name: str):
        """Raise 403 Forbidden like kube-apiserver when RBAC does not allow the request."""
        attrs = {"verb": verb, "group": group, "resource": plural, "subresource": sub}
        attrs.update(namespace=namespace or "", name=name or "")
        allowed, _reason = self.decide(user, attrs)
        if allowed:
            return
        resource = f"{plural}/{sub}" if sub else plural
        qualified = f"{plural}.{group}" if group else plural
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        subject = f'{qualified} "{name}"' if name else qualified
        raise ApiError(
            403,
            "Forbidden",
            f'{subject} is forbidden: User "{user.username}" cannot {verb} resource "{resource}" '
            f'in API group "{group}"{where}',
            {"name": name, "group": group, "kind": plural} if name else {"group": group, "kind": plural},
        )

    def subject_review(self, caller: UserInfo, body: object) -> dict:
        """A SubjectAccessReview: the spec's attributes decided for spec.user and spec.groups,
        asked by `caller`, who must itself be allowed to create subjectaccessreviews."""
        self.authorize(caller, "create", "authorization.k8s.io", "subjectaccessreviews", "", "", "")
        kind = "SubjectAccessReview"
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise ApiError(400, "BadRequest", f"the body of the request must be a {kind}")
        spec = body["spec"]
        groups = spec.get("groups") or []
        if not spec.get("user") and not groups:
            raise ApiError(
                422,
                "Invalid",
                f'{kind}.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or '
                "group must be specified",
            )
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise ApiError(422, "Invalid", f'{kind}.authorization.k8s.io "" is invalid: spec.groups: must be strings')
        # Here, not at the top: admission imports resources, which imports this module.
        from .admission import UserInfo as Subject

        subject = Subject(username=str(spec.get("user") or ""), groups=tuple(groups))
        return self.review(subject, body, kind=kind)

    def review(self, user: UserInfo, body: object, kind: str = "SelfSubjectAccessReview") -> dict:
        """A SelfSubjectAccessReview: the spec's attributes decided for the caller."""
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise ApiError(400, "BadRequest", f"the body of the request must be a {kind}")
        spec = body["spec"]
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if bool(resource) == bool(non_resource):
            raise ApiError(
                422,
                "Invalid",
                f'{kind}.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: '
                '"null": exactly one of nonResourceAttributes or resourceAttributes must be specified',
            )
        if resource:
            attrs = {
                k: resource.get(k, "") or "" for k in ("verb", "group", "resource", "subresource", "namespace", "name")
            }
        else:
            attrs = {"verb": non_resource.get("verb", ""), "path": non_resource.get("path", "")}
            public = attrs["path"] in ("/version", "/healthz", "/readyz", "/livez")
            if self.enabled and (public or attrs["path"].startswith(("/api", "/openapi"))):
                # system:discovery and system:public-info-viewer: every authenticated user.
                return self._answer(body, True, 'RBAC: allowed by ClusterRoleBinding "system:discovery"', kind)
        allowed, reason = self.decide(user, attrs)
        return self._answer(body, allowed, reason, kind)

    def rules(self, user: UserInfo, body: object) -> dict:
        """A SelfSubjectRulesReview (``kubectl auth can-i --list``): the rules that apply to the
        caller in the spec's namespace."""
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise ApiError(400, "BadRequest", "the body of the request must be a SelfSubjectRulesReview")
        namespace = body["spec"].get("namespace") or ""
        if "system:masters" in user.groups or not self.enabled:
            found = [*ALL_ACCESS, {"nonResourceURLs": ["*"], "verbs": ["*"]}]
        else:
            found = [
                {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]},
                {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"]},
                {"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/openapi/*", "/version"]},
            ]
            bindings = [(b, "") for b in self.store.items(self.types["ClusterRoleBinding"], None)]
            if namespace:
                bindings += [(b, namespace) for b in self.store.items(self.types["RoleBinding"], namespace)]
            for binding, where in bindings:
                if not any(_subject_matches(s, user, where) for s in binding.get("subjects") or []):
                    continue
                ref = binding.get("roleRef") or {}
                role_type = self.types["ClusterRole" if ref.get("kind") == "ClusterRole" else "Role"]
                role = self.store.find(
                    role_type, "" if ref.get("kind") == "ClusterRole" else where, ref.get("name", "")
                )
                found += [r for r in (role or {}).get("rules") or [] if isinstance(r, dict)]
        resource = [r for r in found if not r.get("nonResourceURLs")]
        non_resource = [
            {"verbs": r["verbs"], "nonResourceURLs": r["nonResourceURLs"]} for r in found if r.get("nonResourceURLs")
        ]
        return {
            "kind": "SelfSubjectRulesReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": body["spec"],
            "status": {"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": False},
        }

    @staticmethod
    def _answer(body: dict, allowed: bool, reason: str, kind: str) -> dict:
        status: dict = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return {
            "kind": kind,
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": body["spec"],
            "status": status,
        }
