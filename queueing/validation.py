"""Small building blocks shared by the job adapters.

Every check records a ``FieldError`` and carries on, so one pass over a
manifest reports all of its problems.  Optional fields that are ``null`` are
treated as absent, as Kubernetes does when decoding into pointer fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
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


def job_name_problem(value: str) -> str | None:
    """A batch Job's name: a DNS-1123 subdomain (the API server's rule for Jobs) that also
    fits the job-name label its pods carry, so at most 63 characters."""
    if len(value) > MAX_LABEL_LENGTH:
        return f"must be at most {MAX_LABEL_LENGTH} characters (it becomes the pods' job-name label)"
    return dns1123_subdomain_problem(value)


NameRule = Callable[[str], str | None]

# The API server's names.SimpleNameGenerator: generateName + 5 random characters, the
# prefix cut so that the result fits 63 characters whatever the kind's own limit is.
GENERATED_SUFFIX_LENGTH = 5
MAX_GENERATED_NAME_LENGTH = MAX_LABEL_LENGTH - GENERATED_SUFFIX_LENGTH


def generated_name(prefix: str, suffix: str) -> str:
    return prefix[:MAX_GENERATED_NAME_LENGTH] + suffix


def generate_name_problem(prefix: str, rule: NameRule) -> str | None:
    """generateName as the API server checks it: the kind's name rule, with a trailing '-'
    allowed (it is followed by the random suffix)."""
    masked = prefix[:-1] + "a" if len(prefix) > 1 and prefix.endswith("-") else prefix
    if problem := rule(masked):
        return problem.replace(repr(masked), repr(prefix))
    return None


@dataclass(frozen=True)
class ObjectMeta:
    name: str  # "" when only generateName is set (the API server names the object)
    namespace: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    generate_name: str = ""

    @property
    def name_for_checks(self) -> str:
        """The name, or one as long as the API server will generate: for the checks of
        names derived from it (pods, Jobs, hostnames)."""
        return self.name or generated_name(self.generate_name, "x" * GENERATED_SUFFIX_LENGTH)


def object_meta(manifest: Mapping[Any, Any], problems: Problems, name_rule: NameRule | None = None) -> ObjectMeta:
    """Validate ``metadata`` with the rules the API server and the kind's controller apply.

    ``name_rule`` defaults to a DNS-1035 label: operators derive Service names from the
    job's name, and Services are stricter than most objects.
    """
    rule = name_rule or dns1035_label_problem
    metadata = required_mapping(manifest, "metadata", "", problems)
    if metadata is None:
        return ObjectMeta(name="", namespace=None, labels={}, annotations={})
    generate_name = _optional_string(metadata, "generateName", problems)
    if generate_name and (problem := generate_name_problem(generate_name, rule)):
        problems.add("metadata.generateName", problem)
    name = _optional_string(metadata, "name", problems)
    if name:
        if problem := rule(name):
            problems.add("metadata.name", problem)
    elif not generate_name and "metadata.name" not in {e.path for e in problems.errors}:
        problems.add("metadata.name", "required (or set metadata.generateName)")

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
        name=name,
        namespace=namespace,
        labels=label_map(metadata, "labels", "metadata", problems),
        annotations=annotation_map(metadata, "annotations", "metadata", problems),
        generate_name=generate_name,
    )


def _optional_string(metadata: Mapping[Any, Any], key: str, problems: Problems) -> str:
    value = metadata.get(key)
    if value is None or isinstance(value, str):
        return value or ""
    problems.add(join("metadata", key), f"must be a string, got {describe(value)}")
    return ""


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
