"""Small building blocks shared by the job adapters.

Every check records a ``FieldError`` and carries on, so one pass over a
manifest reports all of its problems.  Optional fields that are ``null`` are
treated as absent, as Kubernetes does when decoding into pointer fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import FieldError, ManifestError

MAX_LABEL_LENGTH = 63
MAX_SUBDOMAIN_LENGTH = 253

_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class Problems:
    """Accumulates field errors during one validation pass."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def add(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def __bool__(self) -> bool:
        return bool(self.errors)

    def raise_if_any(self) -> None:
        if self.errors:
            raise ManifestError(self.errors)


def join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def index(path: str, position: int) -> str:
    return f"{path}[{position}]"


def describe(value: Any) -> str:
    """Name a value's type the way a YAML author thinks of it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def dns1035_label_problem(value: str) -> str | None:
    return _label_problem(
        value,
        _DNS1035_LABEL,
        "lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
    )


def dns1123_label_problem(value: str) -> str | None:
    return _label_problem(
        value, _DNS1123_LABEL, "lowercase letters, digits and '-', starting and ending with a letter or digit"
    )


def dns1123_subdomain_problem(value: str) -> str | None:
    if len(value) > MAX_SUBDOMAIN_LENGTH:
        return f"must be at most {MAX_SUBDOMAIN_LENGTH} characters"
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        return "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'"
    return None


def _label_problem(value: str, pattern: re.Pattern[str], rule: str) -> str | None:
    if len(value) > MAX_LABEL_LENGTH:
        return f"must be at most {MAX_LABEL_LENGTH} characters"
    if not pattern.fullmatch(value):
        kind = "DNS-1035" if pattern is _DNS1035_LABEL else "DNS-1123"
        return f"must be a {kind} label ({rule}), got {value!r}"
    return None


_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
MAX_ANNOTATIONS_BYTES = 256 * 1024  # the API server's TotalAnnotationSizeLimitB


def qualified_name_problem(key: str) -> str | None:
    """A label or annotation key as the API server checks it: an optional DNS-1123
    subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_', '.'."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        return "the prefix before '/' must not be empty"
    if prefix and (problem := dns1123_subdomain_problem(prefix)):
        return f"prefix {problem}"
    if not name:
        return "the name part must not be empty"
    if len(name) > MAX_LABEL_LENGTH:
        return f"the name part must be at most {MAX_LABEL_LENGTH} characters"
    if not _QUALIFIED_NAME.fullmatch(name):
        return "the name part must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > MAX_LABEL_LENGTH:
        return f"must be at most {MAX_LABEL_LENGTH} characters"
    if not _LABEL_VALUE.fullmatch(value):
        return (
            f"must be empty or alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric, got {value!r}"
        )
    return None


def label_map(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> dict[str, str]:
    """Labels or a nodeSelector: keys are qualified names, values label values."""
    labels = string_map(parent, key, path, problems)
    here = join(path, key)
    for name, value in labels.items():
        problem = qualified_name_problem(name)
        if problem:
            problems.add(join(here, name), f"key {problem}")
        elif problem := label_value_problem(value):
            problems.add(join(here, name), problem)
    return labels


def annotation_map(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> dict[str, str]:
    annotations = string_map(parent, key, path, problems)
    here = join(path, key)
    for name in annotations:
        if problem := qualified_name_problem(name):
            problems.add(join(here, name), f"key {problem}")
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        problems.add(here, f"may hold at most {MAX_ANNOTATIONS_BYTES} bytes in all, got {size}")
    return annotations


def optional_mapping(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> Mapping[Any, Any] | None:
    """The mapping at ``parent[key]``, ``None`` if absent; records an error if it is something else."""
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        problems.add(join(path, key), f"must be a mapping, got {describe(value)}")
        return None
    return value


def required_mapping(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> Mapping[Any, Any] | None:
    if parent.get(key) is None:
        problems.add(join(path, key), "required")
        return None
    return optional_mapping(parent, key, path, problems)


def optional_list(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> list[Any] | None:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        problems.add(join(path, key), f"must be a list, got {describe(value)}")
        return None
    return list(value)


def string_map(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> dict[str, str]:
    """A string -> string map such as labels or nodeSelector; ``{}`` if absent or invalid."""
    value = optional_mapping(parent, key, path, problems)
    if value is None:
        return {}
    here = join(path, key)
    result: dict[str, str] = {}
    for entry_key, entry_value in value.items():
        if not isinstance(entry_key, str):
            problems.add(join(here, entry_key), f"keys must be strings, got {describe(entry_key)}")
        elif not isinstance(entry_value, str):
            # "gpu: true" or "zone: 1" are decoded as bool/int by YAML, and
            # Kubernetes refuses them; quoting the value is the fix.
            problems.add(join(here, entry_key), f"must be a string, got {describe(entry_value)} (quote the value)")
        else:
            result[entry_key] = entry_value
    return result


@dataclass(frozen=True)
class ObjectMeta:
    name: str
    namespace: str | None
    labels: dict[str, str]
    annotations: dict[str, str]


def object_meta(manifest: Mapping[Any, Any], problems: Problems) -> ObjectMeta:
    """Validate ``metadata`` with the rules the API server and Kubeflow operators apply.

    The name must be a DNS-1035 label because operators derive Service names
    from it, and Services are stricter than most objects.
    """
    metadata = required_mapping(manifest, "metadata", "", problems)
    if metadata is None:
        return ObjectMeta(name="", namespace=None, labels={}, annotations={})
    name = metadata.get("name")
    if name is None:
        problems.add("metadata.name", "required")
    elif name is not None and not isinstance(name, str):
        problems.add("metadata.name", f"must be a string, got {describe(name)}")
    elif isinstance(name, str):
        problem = dns1035_label_problem(name)
        if problem:
            problems.add("metadata.name", problem)

    namespace = metadata.get("namespace")
    if namespace is not None:
        if not isinstance(namespace, str):
            problems.add("metadata.namespace", f"must be a string, got {describe(namespace)}")
            namespace = None
        else:
            problem = dns1123_label_problem(namespace)
            if problem:
                problems.add("metadata.namespace", problem)

    return ObjectMeta(
        name=name if isinstance(name, str) else "",
        namespace=namespace,
        labels=label_map(metadata, "labels", "metadata", problems),
        annotations=annotation_map(metadata, "annotations", "metadata", problems),
    )


def optional_bool(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> bool | None:
    value = parent.get(key)
    if value is not None and not isinstance(value, bool):
        problems.add(join(path, key), f"must be true or false, got {describe(value)}")
        return None
    return value


def optional_int(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> int | None:
    value = parent.get(key)
    if value is None:
        return None
    # bool is an int subclass in Python; "replicas: true" is a typo, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(join(path, key), f"must be an integer, got {describe(value)}")
        return None
    return value
