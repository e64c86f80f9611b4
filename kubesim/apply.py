"""Server-side apply: PATCH with ``application/apply-patch+yaml`` (``kubectl apply --server-side``).

Create-or-update of the applied configuration with field ownership kept in
``metadata.managedFields`` (one ``Apply`` entry per field manager, ``FieldsV1``), as the API
server does for the common case: maps merge field by field, lists are atomic (owned and
replaced whole; the real server merges associative lists such as containers by key). A
field the configuration no longer sets is removed when this manager owned it and no other
manager does. Setting a field another manager owns to a different value is a 409 conflict
naming the manager and the field, unless ``force=true``, which takes the field over.
Dry runs, admission, validation and quota are those of create and update.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING

import yaml

from .clock import rfc3339
from .errors import ApiError, bad_request

if TYPE_CHECKING:
    from .admission import UserInfo
    from .api import Api
    from .resources import ResourceType

APPLY_PATCH = "application/apply-patch+yaml"
Path = tuple[str, ...]
# Never owned through apply: server-set metadata.
_IGNORED: set[Path] = {
    ("metadata", k) for k in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation")
}
_IGNORED |= {("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"), ("status",)}


def parse(raw: bytes) -> dict:
    """An apply body: YAML (or JSON, which is YAML)."""
    try:
        body = json.loads(raw)
    except ValueError:
        try:
            body = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request("the body of an apply patch must be an object")
    return body


def leaves(obj: object, prefix: Path = ()) -> set[Path]:
    """The fields a configuration sets: paths to every scalar, list and empty map."""
    if isinstance(obj, dict) and obj:
        found: set[Path] = set()
        for key, value in obj.items():
            found |= leaves(value, (*prefix, str(key)))
        return found
    return {prefix} if prefix else set()


def _owned(paths: set[Path], resource_status: bool) -> set[Path]:
    return {
        p
        for p in paths
        if p[:2] not in _IGNORED and p[:1] not in _IGNORED and not (resource_status and p[0] == "status")
    }


def to_fields_v1(paths: set[Path]) -> dict:
    tree: dict = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return tree


def from_fields_v1(tree: object, prefix: Path = ()) -> set[Path]:
    if not isinstance(tree, dict) or not tree:
        return {prefix} if prefix else set()
    found: set[Path] = set()
    for key, sub in tree.items():
        if key == ".":
            found.add(prefix)
        elif key.startswith("f:"):
            found |= from_fields_v1(sub, (*prefix, key[2:]))
    return found


def _get(obj: object, path: Path) -> tuple[bool, object]:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return False, None
        obj = obj[key]
    return True, obj


def _remove(obj: dict, path: Path) -> None:
    parents = []
    node: object = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
        for parent, key in reversed(parents):  # maps left empty by the removal go too
            if parent[key] == {}:
                del parent[key]
            else:
                break


def _merge(target: dict, applied: dict) -> None:
    for key, value in applied.items():
        if isinstance(value, dict) and value and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _entries(obj: dict) -> list[dict]:
    return [e for e in obj.get("metadata", {}).get("managedFields") or [] if isinstance(e, dict)]


def _entry(manager: str, api_version: str, paths: set[Path], now: float, subresource: str) -> dict:
    entry = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": rfc3339(now),
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def merge_applied(current: dict, applied: dict, manager: str, force: bool, now: float, subresource: str = "") -> dict:
    """The object after ``manager`` applies ``applied`` to ``current`` (409 on a conflict)."""
    wanted = _owned(leaves(applied), resource_status=not subresource)
    if subresource == "status":
        wanted = {p for p in leaves(applied) if p[:1] == ("status",)}
    others: list[tuple[dict, set[Path]]] = []
    mine: set[Path] = set()
    for entry in _entries(current):
        same = entry.get("manager") == manager and entry.get("operation") == "Apply"
        same = same and entry.get("subresource", "") == subresource
        paths = from_fields_v1(entry.get("fieldsV1"))
        if same:
            mine = paths
        else:
            others.append((entry, paths))
    conflicts: list[tuple[str, Path]] = []
    for path in sorted(wanted):
        present, value = _get(current, path)
        _, new_value = _get(applied, path)
        if present and value == new_value:
            continue
        for entry, paths in others:
            if any(_overlaps(path, p) for p in paths) and entry.get("subresource", "") == subresource:
                conflicts.append((f'"{entry.get("manager", "")}" using {entry.get("apiVersion", "")}', path))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    result = copy.deepcopy(current)
    body = {k: v for k, v in applied.items() if k not in ("apiVersion", "kind")}
    body["metadata"] = {k: v for k, v in (applied.get("metadata") or {}).items() if k not in ("managedFields",)}
    _merge(result, body)
    kept_by_others = [p for _e, paths in others for p in paths]
    for path in mine - wanted:
        if not any(_overlaps(path, p) for p in kept_by_others):
            _remove(result, path)
    entries = []
    for entry, paths in others:
        if force:  # forced fields change hands
            paths = {p for p in paths if not any(_overlaps(p, w) for w in wanted)}
            if not paths:
                continue
            entry = {**entry, "fieldsV1": to_fields_v1(paths)}
        entries.append(entry)
    entries.append(_entry(manager, applied.get("apiVersion", ""), wanted, now, subresource))
    result["metadata"]["managedFields"] = entries
    return result


def _conflict_error(conflicts: list[tuple[str, Path]]) -> ApiError:
    """409 as the API server words it (structured-merge-diff's Conflicts): one conflict on a
    line, several grouped by manager."""
    fields = [(m, "." + ".".join(p)) for m, p in conflicts]
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {m}", "field": f} for m, f in fields]
    if len(fields) == 1:
        text = f"conflict with {fields[0][0]}: {fields[0][1]}"
    else:
        lines: list[str] = []
        for manager in sorted({m for m, _ in fields}):
            lines.append(f"conflicts with {manager}:")
            lines += [f"- {f}" for m, f in fields if m == manager]
        text = "\n".join(lines)
    plural = "s" if len(fields) > 1 else ""
    return ApiError(409, "Conflict", f"Apply failed with {len(fields)} conflict{plural}: {text}", {"causes": causes})


def server_side_apply(
    api: Api,
    rt: ResourceType,
    namespace: str,
    name: str,
    raw: bytes,
    query: dict,
    user: UserInfo,
    dry_run: bool,
    subresource: str,
) -> tuple[int, dict, list[str]]:
    """(HTTP code, object, warnings) of an apply request: 201 when it created the object."""
    manager = query.get("fieldManager") or ""
    if not manager:
        raise bad_request("PATCH, application/apply-patch+yaml requires fieldManager to be set")
    force = query.get("force") in ("true", "1", "True")
    applied = parse(raw)
    if applied.get("apiVersion") != rt.api_version or applied.get("kind") != rt.kind:
        raise bad_request(
            f"the API version in the data ({applied.get('apiVersion')}) does not match the expected API version "
            f"({rt.api_version}) or kind {applied.get('kind')!r} is not {rt.kind!r}"
        )
    meta = applied.get("metadata")
    if not isinstance(meta, dict) or meta.get("name") != name:
        raise bad_request(
            f"the name of the object ({(meta or {}).get('name')}) does not match the name on the URL ({name})"
        )
    now = api.clock.now()
    if api.store.find(rt, namespace, name) is None:
        if subresource:
            from .errors import not_found

            raise not_found(rt.group, rt.plural, name)
        obj = copy.deepcopy(applied)
        paths = _owned(leaves(applied), resource_status=True)
        obj["metadata"]["managedFields"] = [_entry(manager, rt.api_version, paths, now, "")]
        created, warnings = api.create(rt, namespace, obj, user, dry_run)
        return 201, created, warnings
    updated, warnings = api.update_with(
        rt,
        namespace,
        name,
        lambda current: merge_applied(current, applied, manager, force, now, subresource),
        user,
        dry_run,
        subresource,
    )
    return 200, updated, warnings


# --- the fields of other writes (operation Update) ------------------------------------------


def _update_fields(current: dict | None, new: dict, manager: str, api_version: str, now: float) -> list[dict] | None:
    """``new``'s managedFields after a write (create, update, patch) by ``manager``: the fields it
    set or changed become its own (operation Update; never a conflict) and leave their other
    owners; fields it removed leave every owner. None when the write changed no field."""
    paths = _owned(leaves(new), resource_status=True)
    if current is None:
        changed, removed = paths, set()
    else:
        changed = {p for p in paths if _get(current, p) != (True, _get(new, p)[1])}
        removed = {p for p in _owned(leaves(current), resource_status=True) if not _get(new, p)[0]}
    if not changed and not removed:
        return None
    touched = changed | removed
    entries, mine = [], set()
    for entry in _entries(current) if current is not None else []:
        owned = from_fields_v1(entry.get("fieldsV1"))
        if (entry.get("manager"), entry.get("operation"), entry.get("subresource", "")) == (manager, "Update", ""):
            mine = owned
            continue
        kept = {p for p in owned if not any(_overlaps(p, t) for t in touched)}
        if kept:
            entries.append(entry if kept == owned else {**entry, "fieldsV1": to_fields_v1(kept)})
    mine = {p for p in mine if not any(_overlaps(p, r) for r in removed)} | changed
    if mine:
        entries.append({**_entry(manager, api_version, mine, now, ""), "operation": "Update"})
    return entries


def track(
    api: Api, rt: ResourceType, namespace: str, name: str | None, verb: str, body: object, media: str, manager: str
) -> object:
    """The request body of a create, update or patch with ``metadata.managedFields`` as the
    write leaves them, so that a later apply conflicts with what others set (the patch is
    previewed on the current object; a write that fails later records nothing)."""
    now = api.clock.now()
    if verb == "create":
        if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
            return body
        fields = _update_fields(None, body, manager, rt.api_version, now)
        return {**body, "metadata": {**body.get("metadata", {}), "managedFields": fields}} if fields else body
    current = api.store.find(rt, namespace, name or "")
    if current is None:
        return body
    if verb == "update":
        new = body
    else:
        from .patch import apply_patch

        try:
            new = apply_patch(current, media, body, custom=not rt.unconditional_update)
        except ApiError:
            return body  # the patch itself will be refused
    if not isinstance(new, dict):
        return body
    fields = _update_fields(current, new, manager, rt.api_version, now)
    if fields is None:
        return body
    if isinstance(body, list):  # a JSON patch
        return [*body, {"op": "add", "path": "/metadata/managedFields", "value": fields}]
    if isinstance(body, dict):
        return {**body, "metadata": {**(body.get("metadata") or {}), "managedFields": fields}}
    return body
