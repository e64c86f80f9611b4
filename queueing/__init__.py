"""The pure admission core of the job-admission queue.

- Intake: untrusted text -> one validated Kubernetes object -> a ``Workload``
  saying how many pods the job runs and what they request (safe_yaml,
  quantity, workload, podspec, validation, errors); one adapter per job kind
  (kinds: the Kubeflow v1 family, MPIJob, batch Job, JobSet, TrainJob), and
  names the API server would generate (names).
- Admission: from a ``Snapshot`` (snapshot), ``plan`` (planner) decides which
  queued jobs to release and why the others wait: quota and gang fit on nodes
  (fit), the policies' orders and head-of-line rules (policy, policies,
  duration_policy, backfill), a reason (reasons) and an estimated start (eta)
  for every job that waits.

No Django, no cluster access, no I/O: everything here is deterministic and
safe to call on arbitrary user input.
"""

from __future__ import annotations

from typing import Any

from . import capabilities, kinds
from . import kinds as _kinds  # noqa: F401  (registers every kind's adapter)
from .decisions import Admission, Plan, Resize
from .errors import FieldError, ManifestError
from .eta import DURATION_ANNOTATION, duration_of, parse_duration, shape_key
from .names import assign_generated_name
from .namespace_quota import NamespaceQuota
from .planner import DEFAULT_ETA_HORIZON_S, plan
from .policies import DEFAULT_POLICY, POLICY_NAMES, get_policy
from .policy import Policy
from .quantity import canonical, format_quantity, parse_quantity
from .reasons import PendingStatus, Reason
from .safe_yaml import DEFAULT_MAX_BYTES, Document, TooManyDocuments, load_document, load_documents
from .snapshot import InFlightJob, Node, PendingJob, RunningJob, Snapshot, Taint
from .tide import CHECKPOINTS_ANNOTATION, LentPool, clock_words
from .time_triggers import next_trigger
from .workload import (
    ADAPTERS,
    BY_KEY,
    PHASES,
    JobAdapter,
    JobStatus,
    PodSet,
    RuntimeSource,
    Workload,
    adapter_by_key,
    adapter_for,
    adapter_key,
    register,
    resource_key,
    workload_from_manifest,
)

__all__ = [
    "capabilities",
    "kinds",
    "ADAPTERS",
    "BY_KEY",
    "PHASES",
    "JobStatus",
    "RuntimeSource",
    "adapter_by_key",
    "adapter_for",
    "adapter_key",
    "assign_generated_name",
    "resource_key",
    "Admission",
    "DEFAULT_ETA_HORIZON_S",
    "DEFAULT_POLICY",
    "DURATION_ANNOTATION",
    "CHECKPOINTS_ANNOTATION",
    "Document",
    "FieldError",
    "InFlightJob",
    "JobAdapter",
    "LentPool",
    "ManifestError",
    "NamespaceQuota",
    "Node",
    "POLICY_NAMES",
    "PendingJob",
    "PendingStatus",
    "Plan",
    "PodSet",
    "Policy",
    "Reason",
    "Resize",
    "RunningJob",
    "Snapshot",
    "Taint",
    "TooManyDocuments",
    "Workload",
    "canonical",
    "clock_words",
    "duration_of",
    "format_quantity",
    "get_policy",
    "load_document",
    "load_documents",
    "next_trigger",
    "parse_duration",
    "parse_job",
    "parse_quantity",
    "plan",
    "register",
    "shape_key",
    "workload_from_manifest",
]


def parse_job(
    text: str | bytes, *, max_bytes: int = DEFAULT_MAX_BYTES, runtimes: RuntimeSource | None = None
) -> tuple[dict[str, Any], Workload]:
    """Parse and validate a submitted job; raises ``ManifestError`` and nothing else.
    ``runtimes`` serves the objects a kind refers to (a TrainJob's runtime)."""
    manifest = load_document(text, max_bytes=max_bytes)
    return manifest, workload_from_manifest(manifest, runtimes)
