"""batch/v1 Job, validated as the API server does for the fields that decide its pods.

``job_spec`` turns a Job spec into (pods running at once, one pod's shape); JobSet's
replicated Jobs and TrainJob's runtimes are Job specs too and go through it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..podspec import PodShape
from ..validation import (
    Problems,
    describe,
    dns1123_label_problem,
    job_name_problem,
    join,
    object_meta,
    optional_bool,
    optional_mapping,
    required_mapping,
)
from ..workload import JobStatus, RuntimeSource, Workload, read_path, register
from .common import (
    TemplatesInObject,
    condition_status,
    count,
    domain_prefixed_path,
    non_negative,
    one_of,
    pod_set,
    pod_template_shape,
    template_at,
    workload,
)

COMPLETION_MODES = ("NonIndexed", "Indexed")
MAX_PARALLELISM_INDEXED = 100_000  # the API server's maxParallelismForIndexedJob
RESTART_POLICIES = ("OnFailure", "Never")


@dataclass(frozen=True)
class JobShape:
    pods: int  # running at once: min(parallelism, completions)
    completions: int | None
    indexed: bool
    shape: PodShape


def job_spec(
    spec: Mapping[Any, Any],
    path: str,
    problems: Problems,
    *,
    default_restart_policy: str = "",
    default_completion_mode: str = "NonIndexed",
) -> JobShape | None:
    """A Job spec at ``path``; the defaults are those of whoever creates the Job (JobSet's
    webhook defaults restartPolicy to OnFailure and completionMode to Indexed)."""
    parallelism = count(spec, "parallelism", path, problems, default=1)
    completions = None if spec.get("completions") is None else count(spec, "completions", path, problems, default=0)
    mode = one_of(spec, "completionMode", path, problems, COMPLETION_MODES) or default_completion_mode
    indexed = mode == "Indexed"
    if spec.get("parallelism") is None and spec.get("completions") is None:
        completions = 1  # the API server's defaulting: a non-parallel Job
    if indexed and completions is None:
        problems.add(join(path, "completions"), "required when completionMode is Indexed")
    if indexed and parallelism > MAX_PARALLELISM_INDEXED:
        problems.add(
            join(path, "parallelism"), f"must be at most {MAX_PARALLELISM_INDEXED} when completionMode is Indexed"
        )
    non_negative(spec, ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"), path, problems)
    shape = pod_template_shape(spec, path, problems)
    _restart_policy(spec, path, problems, default_restart_policy)
    if shape is None:
        return None
    pods = parallelism if completions is None else min(parallelism, completions)
    return JobShape(pods=pods, completions=completions, indexed=indexed, shape=shape)


def _restart_policy(spec: Mapping[Any, Any], path: str, problems: Problems, default: str) -> None:
    policy = read_path(spec, ("template", "spec", "restartPolicy")) or default
    here = join(path, "template.spec.restartPolicy")
    if not isinstance(read_path(spec, ("template", "spec")), Mapping):
        return
    if policy in ("", "Always"):
        problems.add(here, "required: OnFailure or Never (a Job's pods must finish; Always is the pods' default)")
    elif policy not in RESTART_POLICIES:
        shown = repr(policy) if isinstance(policy, str) else describe(policy)
        problems.add(here, f"must be OnFailure or Never, got {shown}")


@dataclass(frozen=True)
class BatchJobAdapter(TemplatesInObject):
    api_version: str = "batch/v1"
    kind: str = "Job"
    plural: str = "jobs"
    suspend_path: tuple[str, ...] = ("spec", "suspend")
    pod_job_label: str = "batch.kubernetes.io/job-name"
    role: str = "main"  # the pod set's name, as Kueue names a Job's

    def name_problem(self, name: str) -> str | None:
        return job_name_problem(name)

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        found = condition_status(obj, {"Failed": "Failed", "Complete": "Succeeded", "Suspended": "Suspended"})
        if found is not None:
            return found
        active = read_path(obj, ("status", "active"))
        return JobStatus("Running" if isinstance(active, int) and active > 0 else "Created")

    def pod_templates(
        self, obj: MutableMapping[str, Any], roles: Sequence[str] = ()
    ) -> list[tuple[str, MutableMapping[str, Any]]]:
        """spec.template, its one pod set's."""
        template = template_at(obj, ("spec", "template"))
        return [] if template is None else [(self.role, template)]

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        problems = Problems()
        meta = object_meta(manifest, problems, job_name_problem)
        spec = required_mapping(manifest, "spec", "", problems)
        shaped = None
        if spec is not None:
            shaped = job_spec(spec, "spec", problems)
            optional_bool(spec, "suspend", "spec", problems)
            domain_prefixed_path(spec, "managedBy", "spec", problems)
            optional_mapping(spec, "selector", "spec", problems)
        if shaped is not None and shaped.indexed and shaped.completions:
            # Indexed pods' hostnames are "<job>-<index>": they must be DNS labels.
            hostname = f"{meta.name_for_checks}-{shaped.completions - 1}"
            here = "metadata.name" if meta.name else "metadata.generateName"
            if dns1123_label_problem(hostname) and not any(e.path == here for e in problems.errors):
                problems.add(here, f"too long for Indexed pods: their hostname {hostname!r} is not a DNS label")
        problems.raise_if_any()
        pod_sets = [pod_set(self.role, shaped.pods, shaped.shape)] if shaped is not None else []
        return workload(self.kind, self.api_version, meta, pod_sets)


JOB = register(BatchJobAdapter())
