"""JobSet (jobset.x-k8s.io/v1alpha2): replicated batch Jobs, validated as its webhook does.

Each replicatedJob runs ``replicas`` Jobs of one template, so it is one pod set of
replicas x min(parallelism, completions) pods. The webhook defaults a template's
completionMode to Indexed and its pods' restartPolicy to OnFailure before the Jobs exist.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..validation import (
    Problems,
    describe,
    dns1035_label_problem,
    index,
    join,
    object_meta,
    optional_bool,
    optional_list,
    required_mapping,
)
from ..workload import JobStatus, PodSet, RuntimeSource, Workload, read_path, register
from .batchjob import JobShape, job_spec
from .common import TemplatesInObject, condition_status, count, domain_prefixed_path, pod_set, template_at, workload


@dataclass(frozen=True)
class ReplicatedJob:
    position: int  # index in spec.replicatedJobs
    name: str
    replicas: int
    job: JobShape

    @property
    def pods(self) -> int:
        return self.replicas * self.job.pods

    def pod_set(self, pods: int | None = None) -> PodSet:
        return pod_set(self.name, self.pods if pods is None else pods, self.job.shape)


def replicated_jobs(spec: Mapping[Any, Any], path: str, problems: Problems) -> list[ReplicatedJob]:
    """spec.replicatedJobs of a JobSet spec found at ``path``."""
    items = optional_list(spec, "replicatedJobs", path, problems)
    here = join(path, "replicatedJobs")
    if not items:
        if items is not None or spec.get("replicatedJobs") is None:
            problems.add(here, "required: at least one replicatedJob")
        return []
    seen: dict[str, str] = {}
    result = []
    for position, item in enumerate(items):
        item_path = index(here, position)
        if not isinstance(item, Mapping):
            problems.add(item_path, f"must be a mapping with name and template, got {describe(item)}")
            continue
        name = _name(item, item_path, problems, seen)
        replicas = count(item, "replicas", item_path, problems, default=1)
        template = required_mapping(item, "template", item_path, problems)
        job_spec_map = (
            None if template is None else required_mapping(template, "spec", join(item_path, "template"), problems)
        )
        if job_spec_map is None:
            continue
        shaped = job_spec(
            job_spec_map,
            join(item_path, "template.spec"),
            problems,
            default_restart_policy="OnFailure",
            default_completion_mode="Indexed",
        )
        if shaped is not None and name is not None:
            result.append(ReplicatedJob(position, name, replicas, shaped))
    return result


def _name(item: Mapping[Any, Any], path: str, problems: Problems, seen: dict[str, str]) -> str | None:
    name = item.get("name")
    here = join(path, "name")
    if name is None or name == "":
        problems.add(here, "required")
    elif not isinstance(name, str):
        problems.add(here, f"must be a string, got {describe(name)}")
    elif problem := dns1035_label_problem(name):
        problems.add(here, problem)
    elif name in seen:
        problems.add(here, f"duplicate replicatedJob name {name!r} (also at {seen[name]})")
    else:
        seen[name] = here
        return name
    return None


def name_problems(jobset_name: str, jobs: Sequence[ReplicatedJob]) -> list[tuple[ReplicatedJob, str]]:
    """The webhook's checks of the names derived from the JobSet's: Jobs are named
    "<jobset>-<replicatedJob>-<i>", Indexed pods "<job>-<index>-<5 random>", all DNS labels."""
    found = []
    for job in jobs:
        longest_job = f"{jobset_name}-{job.name}-{max(job.replicas - 1, 0)}"
        if dns1035_label_problem(longest_job):
            found.append((job, f"the Job name {longest_job!r} would not be a DNS label of at most 63 characters"))
        elif job.job.indexed and job.job.completions:
            longest_pod = f"{longest_job}-{job.job.completions - 1}-abcde"
            if dns1035_label_problem(longest_pod):
                found.append((job, f"the pod name {longest_pod!r} would not be a DNS label of at most 63 characters"))
    return found


def replicated_jobs_status(obj: Mapping[str, Any], phases: Mapping[str, str]) -> JobStatus:
    """By condition, else Running while a child Job has active pods, else Created."""
    found = condition_status(obj, phases)
    if found is not None:
        return found
    statuses = read_path(obj, ("status", "replicatedJobsStatus"))
    active = any(
        isinstance(s, Mapping) and isinstance(s.get("active"), int) and s["active"] > 0
        for s in (statuses if isinstance(statuses, list) else ())
    )
    return JobStatus("Running" if active else "Created")


@dataclass(frozen=True)
class JobSetAdapter(TemplatesInObject):
    api_version: str = "jobset.x-k8s.io/v1alpha2"
    kind: str = "JobSet"
    plural: str = "jobsets"
    suspend_path: tuple[str, ...] = ("spec", "suspend")
    pod_job_label: str = "jobset.sigs.k8s.io/jobset-name"
    pod_role_label: str = "jobset.sigs.k8s.io/replicatedjob-name"

    def name_problem(self, name: str) -> str | None:
        return dns1035_label_problem(name)

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        return replicated_jobs_status(obj, {"Failed": "Failed", "Completed": "Succeeded", "Suspended": "Suspended"})

    def pod_templates(
        self, obj: MutableMapping[str, Any], roles: Sequence[str] = ()
    ) -> list[tuple[str, MutableMapping[str, Any]]]:
        """Each replicatedJob's pod template (template.spec.template), named as the
        replicatedJob, in their order."""
        items = read_path(obj, ("spec", "replicatedJobs"))
        found = []
        for item in items if isinstance(items, list) else ():
            name = item.get("name") if isinstance(item, Mapping) else None
            template = template_at(item, ("template", "spec", "template"))
            if isinstance(name, str) and template is not None:
                found.append((name, template))
        return found

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        problems = Problems()
        meta = object_meta(manifest, problems)
        jobs: list[ReplicatedJob] = []
        spec = required_mapping(manifest, "spec", "", problems)
        if spec is not None:
            jobs = replicated_jobs(spec, "spec", problems)
            optional_bool(spec, "suspend", "spec", problems)
            domain_prefixed_path(spec, "managedBy", "spec", problems)
        name_ok = not any(e.path in ("metadata.name", "metadata.generateName") for e in problems.errors)
        for job, message in name_problems(meta.name_for_checks, jobs) if name_ok else ():
            problems.add(join(index("spec.replicatedJobs", job.position), "name"), message)
        problems.raise_if_any()
        return workload(self.kind, self.api_version, meta, [job.pod_set() for job in jobs])


JOBSET = register(JobSetAdapter())
