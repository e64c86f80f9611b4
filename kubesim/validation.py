"""Field validation helpers shared by the served resource types.

A validator returns a list of causes (field + message + reason) that the API layer turns
into a 422 Invalid, the way the API server (or a CRD's schema, or an operator's
validating webhook, which kubesim answers the same way) reports them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from queueing.quantity import parse_quantity as _parse_quantity

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)


@lru_cache(maxsize=65536)
def _parse_cached(value):
    return _parse_quantity(value)


def parse_quantity(value):
    """Memoized: manifests repeat a handful of quantities thousands of times."""
    try:
        return _parse_cached(value)
    except TypeError:  # unhashable (a list or mapping where a quantity belongs): let the parser refuse it
        return _parse_quantity(value)


def cause(field_path: str, message: str, reason: str = "FieldValueInvalid") -> dict:
    return {"reason": reason, "message": message, "field": field_path}


def required(field_path: str, message: str = "Required value") -> dict:
    return cause(field_path, message, "FieldValueRequired")


def not_supported(field_path: str, value: object, supported: tuple[str, ...] | list[str]) -> dict:
    values = ", ".join(f'"{s}"' for s in supported)
    return cause(field_path, f"Unsupported value: {value!r}: supported values: {values}", "FieldValueNotSupported")


def immutable(field_path: str, old: object, new: object) -> list[dict]:
    """ValidateImmutableField: a change is refused with 'field is immutable'."""
    if old == new:
        return []
    return [cause(field_path, f"Invalid value: {new!r}: field is immutable")]


def dns1035_label(name: str) -> bool:
    return len(name) <= 63 and bool(DNS1035_LABEL.match(name))


def optional_int(obj: dict, key: str, path: str, minimum: int = 0) -> list[dict]:
    """An optional integer field that must be >= ``minimum`` (the API server's wording)."""
    value = obj.get(key)
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int):
        return [cause(path, f"Invalid value: {value!r}: must be an integer")]
    if value < minimum:
        return [cause(path, f"Invalid value: {value}: must be greater than or equal to {minimum}")]
    return []


def validate_resources(path: str, resources: object) -> list[dict]:
    causes: list[dict] = []
    if resources is None:
        return causes
    if not isinstance(resources, dict):
        return [cause(path, "must be an object")]
    for section in ("requests", "limits"):
        for name, value in (resources.get(section) or {}).items():
            try:
                if parse_quantity(value) < 0:
                    causes.append(
                        cause(
                            f"{path}.{section}[{name}]", f"Invalid value: {value!r}: must be greater than or equal to 0"
                        )
                    )
            except ValueError as exc:
                causes.append(cause(f"{path}.{section}[{name}]", f"Invalid value: {value!r}: {exc}"))
    return causes


def validate_pod_spec(path: str, spec: object) -> list[dict]:
    if not isinstance(spec, dict):
        return [required(path)]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [required(f"{path}.containers")]
    causes: list[dict] = []
    for key in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(key) or []):
            where = f"{path}.{key}[{i}]"
            if not isinstance(container, dict):
                causes.append(cause(where, "must be an object"))
                continue
            if not container.get("name"):
                causes.append(required(f"{where}.name"))
            if not container.get("image"):
                causes.append(required(f"{where}.image"))
            causes.extend(validate_resources(f"{where}.resources", container.get("resources")))
    return causes


def default_pod_spec(spec: dict) -> None:
    """SetDefaults_PodSpec (what kubesim fills in): on pods and on the pod templates of built-in workloads."""
    # Like the API server: a container that sets only limits requests the same amounts.
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") if isinstance(container, dict) else None
        if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")


def labels_of(obj: object) -> dict:
    """metadata.labels of an object or template, {} when absent or malformed."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}
