"""AdmissionReview admission.k8s.io/v1: parse a request, render a response. No database.

Only what the decision needs is read; a body that is not a well-formed AdmissionReview
raises Malformed (the view answers 400 with its message, never a 500). Which kinds jobdash
manages is queueing's adapter registry (pure, no I/O): nothing here names a kind.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import queueing  # noqa: F401  (registers every kind's adapter)
from queueing.workload import JobAdapter, adapter_for

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
# The API server sends at most its own request limit (3 MiB) plus the review's envelope.
MAX_REVIEW_BYTES = 4 * 1024 * 1024


class Malformed(ValueError):
    """Not a well-formed AdmissionReview v1 request."""


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    operation: str
    group: str  # request.kind: what the object is
    version: str
    kind: str
    resource: str  # request.resource: where it is written (its plural)
    sub_resource: str
    namespace: str
    name: str
    username: str
    groups: tuple[str, ...]
    dry_run: bool
    object: dict[str, Any] | None = field(repr=False)
    resource_group: str = ""
    resource_version: str = ""
    old_object: dict[str, Any] | None = field(default=None, repr=False)  # UPDATE and DELETE

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def adapter(self) -> JobAdapter | None:
        """The registered adapter of the request's kind, when the request writes that kind's
        own resource (same group and version, the adapter's plural): a kind jobdash manages."""
        found = adapter_for(self.api_version, self.kind)
        if found is None or found.plural != self.resource:
            return None
        if (self.resource_group, self.resource_version) != (self.group, self.version):
            return None
        return found

    @property
    def is_job_write(self) -> bool:
        """A CREATE or UPDATE of a managed kind's object itself (not a subresource such as status)."""
        return self.operation in ("CREATE", "UPDATE") and not self.sub_resource and self.adapter is not None

    @property
    def is_job_create(self) -> bool:
        return self.operation == "CREATE" and not self.sub_resource and self.adapter is not None

    @property
    def is_job_update(self) -> bool:
        return self.operation == "UPDATE" and not self.sub_resource and self.adapter is not None

    @property
    def is_job_delete(self) -> bool:
        """A DELETE of a managed kind's object: request.object is null, oldObject the object."""
        return self.operation == "DELETE" and not self.sub_resource and self.adapter is not None


def _text(value: Any, where: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise Malformed(f"{where}: must be a {'non-empty ' if required else ''}string")
    return value


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise Malformed(f"{where}: must be an object")
    return value


def parse(body: bytes) -> AdmissionRequest:
    if len(body) > MAX_REVIEW_BYTES:
        raise Malformed(f"the body is larger than {MAX_REVIEW_BYTES} bytes")
    try:
        review = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise Malformed("the body is not JSON") from None
    review = _mapping(review, "the body")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        raise Malformed(
            f"expected apiVersion {API_VERSION} and kind {KIND}, got {review.get('apiVersion')!r} {review.get('kind')!r}"
        )
    request = _mapping(review.get("request"), "request")
    kind = _mapping(request.get("kind"), "request.kind")
    resource = _mapping(request.get("resource"), "request.resource")
    user = _mapping(request.get("userInfo"), "request.userInfo")
    groups = user.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise Malformed("request.userInfo.groups: must be a list of strings")
    dry_run = request.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise Malformed("request.dryRun: must be a boolean")
    obj = request.get("object")
    if obj is not None and not isinstance(obj, dict):
        raise Malformed("request.object: must be an object or null")
    old = request.get("oldObject")
    if old is not None and not isinstance(old, dict):
        raise Malformed("request.oldObject: must be an object or null")
    parsed = AdmissionRequest(
        uid=_text(request.get("uid"), "request.uid"),
        operation=_text(request.get("operation"), "request.operation"),
        group=_text(kind.get("group"), "request.kind.group", required=False),
        version=_text(kind.get("version"), "request.kind.version"),
        kind=_text(kind.get("kind"), "request.kind.kind"),
        resource=_text(resource.get("resource"), "request.resource.resource"),
        resource_group=_text(resource.get("group"), "request.resource.group", required=False),
        resource_version=_text(resource.get("version"), "request.resource.version", required=False),
        sub_resource=_text(request.get("subResource"), "request.subResource", required=False),
        namespace=_text(request.get("namespace"), "request.namespace", required=False),
        name=_text(request.get("name"), "request.name", required=False),
        username=_text(user.get("username"), "request.userInfo.username", required=False),
        groups=tuple(groups),
        dry_run=dry_run,
        object=obj,
        old_object=old,
    )
    if parsed.is_job_create and obj is None:
        raise Malformed("request.object: a CREATE carries the object")
    return parsed


def response(
    uid: str,
    *,
    allowed: bool,
    message: str = "",
    code: int | None = None,
    reason: str = "",
    patch: list[dict] | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    answer: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed or message:
        status: dict[str, Any] = {"code": code or (200 if allowed else 403)}
        if message:
            status["message"] = message
        if reason:
            status["reason"] = reason
        answer["status"] = status
    if patch:
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    if warnings:
        answer["warnings"] = warnings
    return {"apiVersion": API_VERSION, "kind": KIND, "response": answer}
