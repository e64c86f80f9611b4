"""OpenAPI for what kubesim serves: ``/openapi/v2`` and ``/openapi/v3`` (+ a document per group-version).

kubectl reads them: ``apply`` to learn that the server validates fields itself (the PATCH
operations' ``fieldValidation`` and ``dryRun`` parameters), ``explain`` to walk a kind's
schema, found by ``x-kubernetes-group-version-kind``. The schemas are generated, not
written out: the built-in kinds' from the official Python client's models (the same
generated API types jobdash uses), the custom resources' from kubesim/crdschemas.py (the
CRDs' fields, with the core types they embed by reference). Built once, on first request.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from functools import cache

from .crdschemas import CRD_SCHEMAS, crd_definition_name
from .discovery import REVIEWS
from .patch import MERGE_KEYS
from .resources import ALL, ResourceType

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_META_MODELS = {
    "ObjectMeta",
    "ListMeta",
    "LabelSelector",
    "LabelSelectorRequirement",
    "OwnerReference",
    "ManagedFieldsEntry",
    "Condition",
    "Status",
    "StatusDetails",
    "StatusCause",
    "DeleteOptions",
    "Preconditions",
}
# Python client model -> the API package its type lives in (default: core/v1).
_PACKAGES = (
    (("V1Job", "V1PodFailurePolicy", "V1SuccessPolicy", "V1UncountedTerminatedPods"), "io.k8s.api.batch.v1"),
    (("V1PriorityClass",), "io.k8s.api.scheduling.v1"),
    (("V1Lease",), "io.k8s.api.coordination.v1"),
    (
        (
            "V1MutatingWebhook",
            "V1ValidatingWebhook",
            "V1RuleWithOperations",
            "V1MatchCondition",
            "Admissionregistration",
        ),
        "io.k8s.api.admissionregistration.v1",
    ),
    (
        (
            "V1SelfSubjectAccessReview",
            "V1SelfSubjectRulesReview",
            "V1SubjectRulesReviewStatus",
            "V1ResourceRule",
            "V1NonResourceRule",
            "V1ResourceAttributes",
            "V1NonResourceAttributes",
            "V1SubjectAccessReviewStatus",
            "V1FieldSelectorAttributes",
            "V1LabelSelectorAttributes",
        ),
        "io.k8s.api.authorization.v1",
    ),
    (
        ("V1Role", "V1ClusterRole", "V1PolicyRule", "V1Subject", "RbacV1Subject", "V1AggregationRule"),
        "io.k8s.api.rbac.v1",
    ),
)
# Kind -> the Python client's model of it.
_MODELS = {
    "Namespace": "V1Namespace",
    "Node": "V1Node",
    "Pod": "V1Pod",
    "ResourceQuota": "V1ResourceQuota",
    "Event": "CoreV1Event",
    "Service": "V1Service",
    "Job": "V1Job",
    "PriorityClass": "V1PriorityClass",
    "Lease": "V1Lease",
    "MutatingWebhookConfiguration": "V1MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration": "V1ValidatingWebhookConfiguration",
    "SelfSubjectAccessReview": "V1SelfSubjectAccessReview",
    "SelfSubjectRulesReview": "V1SelfSubjectRulesReview",
    "Role": "V1Role",
    "ClusterRole": "V1ClusterRole",
    "RoleBinding": "V1RoleBinding",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
}


def definition_name(model: str) -> str:
    """The OpenAPI definition name of a Python client model (V1PodSpec -> io.k8s.api.core.v1.PodSpec)."""
    for prefix in ("CoreV1", "RbacV1", "AdmissionregistrationV1", "V1"):
        if model.startswith(prefix):
            short = model[len(prefix) :]
            break
    else:
        short = model
    if short in _META_MODELS:
        return f"{META}.{short}"
    for prefixes, package in _PACKAGES:
        if model.startswith(prefixes):
            return f"{package}.{short}"
    return f"io.k8s.api.core.v1.{short}"


def _clean(node: object, names: dict[str, str]) -> object:
    """Pydantic's JSON schema -> Kubernetes' OpenAPI: no nullable anyOf, titles or null defaults."""
    if isinstance(node, list):
        return [_clean(n, names) for n in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    options = node.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) == 1:
            node.pop("anyOf")
            node = {**kept[0], **node}
    node.pop("title", None)
    if node.get("additionalProperties") is False:  # pydantic's closed models; Kubernetes' schemas are open
        node.pop("additionalProperties")
    if "default" in node and node["default"] is None:
        node.pop("default")
    if isinstance(node.get("description"), str):
        node["description"] = node["description"].split("\n\nAttributes:")[0].strip()
    if isinstance(node.get("$ref"), str):
        model = node["$ref"].rsplit("/", 1)[1]
        node["$ref"] = f"#/components/schemas/{names.setdefault(model, definition_name(model))}"
    return {k: _clean(v, names) if k != "$ref" else v for k, v in node.items()}


_lock = threading.Lock()


@cache
def _definitions() -> dict[str, dict]:
    """Every definition (OpenAPI v3 refs), keyed by its name."""
    import kubernetes.client.models as models

    names: dict[str, str] = {}
    schemas: dict[str, dict] = {}
    for model in (*_MODELS.values(), "V1PodTemplateSpec", "V1JobTemplateSpec"):
        raw = getattr(models, model).model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
        for sub, schema in raw.pop("$defs", {}).items():
            schemas[names.setdefault(sub, definition_name(sub))] = _clean(schema, names)  # type: ignore[assignment]
        schemas[names.setdefault(model, definition_name(model))] = _clean(raw, names)  # type: ignore[assignment]
    _patch_keys(schemas)
    schemas.update(copy.deepcopy(CRD_SCHEMAS))
    # The kinds: the GVK extension kubectl finds them by, and apiVersion/kind described.
    for rt_group, rt_version, kind in _kinds():
        name = _kind_definition(rt_group, kind)
        schema = schemas[name]
        schema["x-kubernetes-group-version-kind"] = [{"group": rt_group, "kind": kind, "version": rt_version}]
        schema["type"] = "object"
    return schemas


def _patch_keys(schemas: dict[str, dict]) -> None:
    """The keyed lists strategic merge patches merge (patch.MERGE_KEYS), marked as the API
    server's schemas mark them, so that kubectl computes its patches item by item."""
    for schema in schemas.values():
        for name, prop in (schema.get("properties") or {}).items():
            ref = (prop.get("items") or {}).get("$ref") if prop.get("type") == "array" else None
            if name not in MERGE_KEYS or not isinstance(ref, str):
                continue
            item = schemas.get(ref.rsplit("/", 1)[1], {})
            key = next((k for k in MERGE_KEYS[name] if k in (item.get("properties") or {})), None)
            if key is not None:
                prop["x-kubernetes-patch-merge-key"] = key
                prop["x-kubernetes-patch-strategy"] = "merge"
                prop["x-kubernetes-list-type"] = "map"
                prop["x-kubernetes-list-map-keys"] = [key]


def _kinds() -> list[tuple[str, str, str]]:
    kinds = [(rt.group, rt.version, rt.kind) for rt in ALL]
    return kinds + [(group, version, kind) for group, version, _plural, kind, _ns in REVIEWS]


def _kind_definition(group: str, kind: str) -> str:
    if kind in _MODELS:
        return definition_name(_MODELS[kind])
    return crd_definition_name(group, kind)


def _refs(node: object, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.rsplit("/", 1)[1] not in found:
            name = ref.rsplit("/", 1)[1]
            found.add(name)
            _refs(_definitions().get(name, {}), found)
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _parameters(*names: str) -> list[dict]:
    docs = {
        "dryRun": "When present, indicates that modifications should not be persisted.",
        "fieldManager": "fieldManager is a name associated with the actor or entity that is making these changes.",
        "fieldValidation": "fieldValidation instructs the server on how to handle objects in the request "
        "containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
        "force": 'Force is going to "force" Apply requests (application/apply-patch+yaml only).',
        "pretty": "If 'true', then the output is pretty printed.",
    }
    return [
        {"name": n, "in": "query", "description": docs[n], "schema": {"type": "boolean" if n == "force" else "string"}}
        for n in names
    ]


def _operation(
    action: str, gvk: dict, ref: str, op_id: str, params: list[dict], body: bool = False, custom: bool = False
) -> dict:
    """``custom``: a custom resource, whose PATCH takes no strategic merge (kubectl apply reads
    this to choose a merge patch for it)."""
    content = {"application/json": {"schema": {"$ref": ref}}}
    op: dict = {
        "operationId": op_id,
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": content}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
    if body:
        media = ["application/json"]
        if action == "patch":
            media = [
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json",
            ]
            if not custom:
                media.append("application/strategic-merge-patch+json")
        op["requestBody"] = {"content": {m: {"schema": {"$ref": ref}} for m in media}, "required": True}
    return op


def _paths(group: str, version: str) -> dict:
    prefix = f"/apis/{group}/{version}" if group else "/api/v1"
    paths: dict = {}
    resources = [
        (rt.plural, rt.kind, rt.namespaced, True, not rt.unconditional_update)
        for rt in ALL
        if (rt.group, rt.version) == (group, version)
    ]
    resources += [(r[2], r[3], r[4], False, False) for r in REVIEWS if (r[0], r[1]) == (group, version)]
    for plural, kind, namespaced, stored, custom in resources:
        gvk = {"group": group, "kind": kind, "version": version}
        ref = f"#/components/schemas/{_kind_definition(group, kind)}"
        op = f"{kind}{'Namespaced' if namespaced else ''}"
        base = f"{prefix}/namespaces/{{namespace}}/{plural}" if namespaced else f"{prefix}/{plural}"
        write = _parameters("dryRun", "fieldManager", "fieldValidation", "pretty")
        collection: dict = {"post": _operation("post", gvk, ref, f"create{op}", write, body=True)}
        if stored:
            collection["get"] = _operation("list", gvk, ref, f"list{op}", _parameters("pretty"))
            item = {
                "get": _operation("get", gvk, ref, f"read{op}", _parameters("pretty")),
                "put": _operation("put", gvk, ref, f"replace{op}", write, body=True),
                "patch": _operation(
                    "patch",
                    gvk,
                    ref,
                    f"patch{op}",
                    _parameters("dryRun", "fieldManager", "fieldValidation", "force"),
                    True,
                    custom,
                ),
                "delete": _operation("delete", gvk, ref, f"delete{op}", _parameters("dryRun")),
            }
            paths[f"{base}/{{name}}"] = item
        paths[base] = collection
    return paths


def _group_versions() -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for group, version, _kind in _kinds():
        if (group, version) not in seen:
            seen.append((group, version))
    return seen


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else "api/v1"


@cache
def v3_document(gv_path: str) -> bytes | None:
    """The OpenAPI v3 document of one group-version (``api/v1``, ``apis/batch/v1``), JSON."""
    for group, version in _group_versions():
        if _gv_path(group, version) == gv_path:
            break
    else:
        return None
    with _lock:
        definitions = _definitions()
    paths = _paths(group, version)
    needed: set[str] = set()
    _refs(paths, needed)
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.30.0-kubesim"},
        "paths": paths,
        "components": {"schemas": {name: definitions[name] for name in sorted(needed) if name in definitions}},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@cache
def v3_root() -> bytes:
    paths = {}
    for group, version in _group_versions():
        path = _gv_path(group, version)
        digest = hashlib.sha512(v3_document(path) or b"").hexdigest().upper()[:128]
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return json.dumps({"paths": paths}, separators=(",", ":")).encode()


def _to_v2(node: object) -> object:
    if isinstance(node, dict):
        out = {k: _to_v2(v) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str):
            out["$ref"] = ref.replace("#/components/schemas/", "#/definitions/")
        return out
    if isinstance(node, list):
        return [_to_v2(v) for v in node]
    return node


@cache
def v2_document() -> bytes:
    """Swagger 2.0 of everything, for clients that still read /openapi/v2."""
    with _lock:
        definitions = _definitions()
    paths: dict = {}
    for group, version in _group_versions():
        for path, item in _paths(group, version).items():
            converted = {}
            for method, op in item.items():
                op = copy.deepcopy(op)
                ref = op["responses"]["200"]["content"]["application/json"]["schema"]
                op["responses"] = {"200": {"description": "OK", "schema": ref}}
                params = [
                    {"name": p["name"], "in": "query", "type": p["schema"]["type"], "uniqueItems": True}
                    for p in op["parameters"]
                ]
                if op.pop("requestBody", None):
                    params.append({"name": "body", "in": "body", "required": True, "schema": ref})
                op["parameters"] = params
                converted[method] = op
            paths[path] = converted
    doc = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.30.0-kubesim"},
        "paths": _to_v2(paths),
        "definitions": _to_v2(definitions),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def schema_of(rt: ResourceType) -> dict:
    with _lock:
        return _definitions()[_kind_definition(rt.group, rt.kind)]


def resolve(schema: dict) -> dict:
    """Follow a ``$ref`` to its definition."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _definitions().get(ref.rsplit("/", 1)[1], {})
    return schema


def _schema(schema: dict) -> dict:
    schema = resolve(schema)
    while "allOf" in schema and len(schema["allOf"]) == 1 and "properties" not in schema:
        schema = resolve(schema["allOf"][0])
    return schema


def unknown_fields(rt: ResourceType, obj: object) -> list[str]:
    """The fields of ``obj`` its kind's schema does not declare (``fieldValidation``), as paths."""
    found: list[str] = []

    def walk(value: object, schema: dict, path: str) -> None:
        schema = _schema(schema)
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        if isinstance(value, dict):
            properties = schema.get("properties")
            extra = schema.get("additionalProperties")
            for key, sub in value.items():
                if str(key).startswith("$"):  # a strategic merge patch's directive
                    continue
                where = f"{path}.{key}" if path else str(key)
                if isinstance(properties, dict) and key in properties:
                    walk(sub, properties[key], where)
                elif isinstance(extra, dict):
                    walk(sub, extra, where)
                elif isinstance(properties, dict):
                    found.append(where)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                walk(item, schema["items"], f"{path}[{i}]")

    walk(obj, schema_of(rt), "")
    return found


def warm() -> None:
    """Build the schemas now (a second or two), so kubectl's first request does not wait."""
    with _lock:
        _definitions()
