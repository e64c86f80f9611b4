"""Names the API server generates: ``metadata.generateName`` + 5 random characters.

jobdash must know a job's name before the object exists (it is the key of the job's row
and of its pods' job label), so it generates the name itself, the way the API server's
``names.SimpleNameGenerator`` would, and creates the object with that name.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from .capabilities import name_rule
from .errors import FieldError, ManifestError
from .validation import (
    GENERATED_SUFFIX_LENGTH,
    NameRule,
    describe,
    generate_name_problem,
    generated_name,
)
from .workload import adapter_for

# k8s.io/apimachinery/pkg/util/rand: no vowels (no words) and no look-alikes (0, 1, 3).
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def new_suffix() -> str:
    return "".join(secrets.choice(SUFFIX_ALPHABET) for _ in range(GENERATED_SUFFIX_LENGTH))


def name_rule_for(manifest: Mapping[str, Any]) -> NameRule:
    """The name rule of the manifest's kind (its adapter's ``name_problem``), DNS-1035 if
    the kind is unknown or its adapter says nothing."""
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    adapter = adapter_for(api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else None
    return name_rule(adapter)


def assign_generated_name(manifest: dict[str, Any], random_suffix: str | None = None) -> str:
    """Set ``metadata.name`` from ``metadata.generateName`` when the name is empty, and
    return the name (unchanged if it was set, "" if neither is: validation reports that).

    Raises ManifestError at ``metadata.generateName`` when the prefix or the generated
    name breaks the kind's name rule. ``random_suffix`` (5 characters of SUFFIX_ALPHABET)
    makes the result deterministic for tests.
    """
    metadata = manifest.get("metadata")
    if not isinstance(metadata, dict):
        return ""
    name = metadata.get("name")
    if name:
        return name if isinstance(name, str) else ""
    prefix = metadata.get("generateName")
    if prefix is None or prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise ManifestError([FieldError("metadata.generateName", f"must be a string, got {describe(prefix)}")])
    suffix = _checked_suffix(random_suffix)
    rule = name_rule_for(manifest)
    generated = generated_name(prefix, suffix)
    problem = generate_name_problem(prefix, rule) or rule(generated)
    if problem:
        raise ManifestError([FieldError("metadata.generateName", problem)])
    metadata["name"] = generated
    return generated


def _checked_suffix(suffix: str | None) -> str:
    if suffix is None:
        return new_suffix()
    if len(suffix) != GENERATED_SUFFIX_LENGTH or any(c not in SUFFIX_ALPHABET for c in suffix):
        raise ValueError(f"random_suffix must be {GENERATED_SUFFIX_LENGTH} characters of {SUFFIX_ALPHABET!r}")
    return suffix
