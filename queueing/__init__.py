"""Pure manifest intake for the job-admission queue.

Untrusted text -> one validated Kubernetes object -> a ``Workload`` saying
how many pods the job runs and what they request.  No Django, no cluster
access, no I/O: everything here is deterministic and safe to call on
arbitrary user input.
"""

from __future__ import annotations

from typing import Any

from . import tfjob as _tfjob  # noqa: F401  (registers the TFJob adapter)
from .errors import FieldError, ManifestError
from .quantity import canonical, format_quantity, parse_quantity
from .safe_yaml import DEFAULT_MAX_BYTES, load_document
from .workload import ADAPTERS, JobAdapter, PodSet, Workload, register, workload_from_manifest

__all__ = [
    "ADAPTERS",
    "FieldError",
    "JobAdapter",
    "ManifestError",
    "PodSet",
    "Workload",
    "canonical",
    "format_quantity",
    "load_document",
    "parse_job",
    "parse_quantity",
    "register",
    "workload_from_manifest",
]


def parse_job(text: str | bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[dict[str, Any], Workload]:
    """Parse and validate a submitted job; raises ``ManifestError`` and nothing else."""
    manifest = load_document(text, max_bytes=max_bytes)
    return manifest, workload_from_manifest(manifest)
