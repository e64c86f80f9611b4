"""What the webhook does to objects: the copy jobdash stores of an intercepted one (its
YAML for people), and the JSONPatch of suspend mode. No decisions here (decide.py)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import yaml

from jobdash.cluster.gateway import QUEUED_LABEL
from queueing import capabilities
from queueing.workload import JobAdapter, read_path

from .review import AdmissionRequest

# Set by the API server; a create that carries them is refused, so jobdash's own create
# of the stored object must not.
SERVER_SET_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)

try:  # libyaml's emitter is several times faster; the pure-Python one is the fallback
    _BaseDumper = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    # types-PyYAML aliases CSafeDumper to CDumper; really both are SafeRepresenter dumpers.
    _BaseDumper = yaml.SafeDumper  # type: ignore[assignment, misc]


class _Dumper(_BaseDumper):
    def ignore_aliases(self, data) -> bool:
        return True  # never anchors: jobdash's manifest parser refuses aliases


def stored_object(request: AdmissionRequest) -> dict[str, Any]:
    """The object as jobdash keeps it: as the creator sent it, minus status and the fields
    the API server sets, in the request's namespace."""
    obj = copy.deepcopy(request.object or {})
    obj.pop("status", None)
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = obj["metadata"] = {}
    for key in SERVER_SET_METADATA:
        metadata.pop(key, None)
    if request.namespace:
        metadata["namespace"] = request.namespace
    if request.name and not metadata.get("name"):
        metadata["name"] = request.name  # a name the API server generated
    return obj


def manifest_text(obj: dict[str, Any]) -> str:
    """YAML for the job page (JSON is YAML too, but people read this)."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _set_path(obj: Mapping[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """One JSONPatch `add` setting obj[path...] = value, creating the parents that are
    missing or not objects (an `add` into a missing parent fails; onto a member, it replaces)."""
    here: Any = obj
    for depth, step in enumerate(path[:-1]):
        child = here.get(step) if isinstance(here, Mapping) else None
        if not isinstance(child, Mapping):
            nested = value
            for inner in reversed(path[depth + 1 :]):
                nested = {inner: nested}
            return {"op": "add", "path": "/" + "/".join(_escape(p) for p in path[: depth + 1]), "value": nested}
        here = child
    return {"op": "add", "path": "/" + "/".join(_escape(p) for p in path), "value": value}


def suspend_patch(
    obj: dict[str, Any], suspend_path: tuple[str, ...] = ("spec", "runPolicy", "suspend"), name: str = ""
) -> list[dict[str, Any]]:
    """JSONPatch: the kind's suspend flag (its adapter's suspend_path) = true and the
    jobdash.io/queued label, creating the parents that are missing (an object already
    suspended gets the label alone); with `name`, also
    metadata.name (a name the webhook generated, so the API server keeps it)."""
    patch = [] if read_path(obj, suspend_path) is True else [_set_path(obj, suspend_path, True)]
    patch.append(_set_path(obj, ("metadata", "labels", QUEUED_LABEL), "true"))
    if name:
        patch.append(_set_path(obj, ("metadata", "name"), name))
    return patch


def suspended(obj: dict[str, Any] | None, adapter: JobAdapter) -> bool:
    path = capabilities.suspend_path(adapter)
    return path is not None and read_path(obj or {}, path) is True


def unsuspended(obj: dict[str, Any], adapter: JobAdapter) -> dict[str, Any]:
    """`obj` with the kind's suspend flag false where it was true (a copy; else obj itself):
    a job created suspended is queued, and its release must let it run."""
    path = capabilities.suspend_path(adapter)
    if path is None or not suspended(obj, adapter):
        return obj
    obj = copy.deepcopy(obj)
    here: Any = obj
    for step in path[:-1]:
        here = here[step]
    here[path[-1]] = False
    return obj
