"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch on plain JSON values.

Strategic merge patch, for the built-in kinds only as in the API server, merges the keyed
lists of ``MERGE_KEYS`` (containers by name, conditions by type, ...) and replaces other lists.
"""

from __future__ import annotations

import copy

from .errors import ApiError


class PatchError(ValueError):
    pass


def merge_patch(target: object, patch: object) -> object:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _parse_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"invalid JSON pointer {pointer!r}")
    return [_unescape(p) for p in pointer[1:].split("/")]


def _index(container: list, token: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise PatchError(f"array index {index} out of bounds")
    return index


def _get(doc: object, tokens: list[str]) -> object:
    for token in tokens:
        if isinstance(doc, dict):
            if token not in doc:
                raise PatchError(f"path element {token!r} not found")
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, False)]
        else:
            raise PatchError(f"cannot traverse into {type(doc).__name__}")
    return doc


def _add(doc: object, tokens: list[str], value: object) -> object:
    if not tokens:
        return value
    parent = _get(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, True), value)
    else:
        raise PatchError("add target is not a container")
    return doc


def _remove(doc: object, tokens: list[str]) -> object:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, False)]
    else:
        raise PatchError("remove target is not a container")
    return doc


def json_patch(target: object, operations: object) -> object:
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        kind, tokens = op["op"], _parse_pointer(op["path"])
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)  # must exist
            doc = (
                _add(_remove(doc, tokens), tokens, copy.deepcopy(op.get("value")))
                if tokens
                else copy.deepcopy(op.get("value"))
            )
        elif kind in ("move", "copy"):
            source = _parse_pointer(op.get("from", ""))
            value = copy.deepcopy(_get(doc, source))
            if kind == "move":
                doc = _remove(doc, source)
            doc = _add(doc, tokens, value)
        elif kind == "test":
            if _get(doc, tokens) != op.get("value"):
                raise PatchError(f"testing value {op['path']} failed")
        else:
            raise PatchError(f"unexpected op {kind!r}")
    return doc


# patchMergeKey of the built-in types' keyed lists (strategic merge); other lists are replaced.
# A field's candidate keys: the first its items all have (a container's ports by containerPort,
# a Service's by port).
MERGE_KEYS = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "ports": ("containerPort", "port"),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "imagePullSecrets": ("name",),
    "schedulingGates": ("name",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
}
PRIMITIVE_SETS = ("finalizers",)  # patchStrategy merge on a list of strings: a union


def strategic_merge(target: object, patch: object) -> object:
    """A strategic merge patch of a built-in object (apimachinery's strategicpatch, the common
    part): maps merge, keyed lists merge by their key, ``$patch: delete|replace``,
    ``$deleteFromPrimitiveList/<f>`` and ``$retainKeys`` honoured, ``$setElementOrder`` ignored."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    plain = {k: v for k, v in patch.items() if not str(k).startswith("$")}
    if patch.get("$patch") == "replace":
        return copy.deepcopy(plain)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if str(key).startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in (value or [])]
        elif str(key).startswith("$"):
            continue
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in PRIMITIVE_SETS and isinstance(result.get(key), list):
            result[key] = result[key] + [v for v in value if v not in result[key]]
        elif isinstance(value, dict) and value.get("$patch") == "delete":
            result.pop(key, None)
        else:
            result[key] = strategic_merge(result.get(key), value)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(current: list, items: list, keys: tuple[str, ...]) -> list:
    if any(item == {"$patch": "replace"} for item in items):
        return [copy.deepcopy(i) for i in items if i != {"$patch": "replace"}]
    key = next((k for k in keys if all(isinstance(i, dict) and k in i for i in items)), None)
    if key is None:
        return copy.deepcopy(items)  # not keyed after all: replaced, as a merge patch would
    merged = [copy.deepcopy(c) for c in current]
    for item in items:
        at = next((n for n, c in enumerate(merged) if isinstance(c, dict) and c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del merged[at]
        elif at is None:
            merged.append(strategic_merge({}, item))
        else:
            merged[at] = strategic_merge(merged[at], item)
    return merged


MERGE_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
JSON_PATCH_TYPE = "application/json-patch+json"


def apply_patch(target: dict, content_type: str, body: object, custom: bool = False) -> dict:
    """Apply a PATCH body of the given media type; errors are the API server's 4xx.
    ``custom``: a custom resource, for which the API server has no strategic merge (415)."""
    media = content_type.split(";")[0].strip().lower()
    try:
        if media == MERGE_TYPES[1] and custom:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got "{content_type}")',
            )
        if media in MERGE_TYPES:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of a merge patch must be a JSON object")
            if media == MERGE_TYPES[1]:
                result = strategic_merge(copy.deepcopy(target), body)
            else:
                # Deep copy first: merge_patch shares untouched subtrees with its target.
                result = merge_patch(copy.deepcopy(target), body)
        elif media == JSON_PATCH_TYPE:
            result = json_patch(target, body)
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got "{content_type}")',
            )
    except PatchError as exc:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from None
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "the patched object is not a JSON object")
    return result
