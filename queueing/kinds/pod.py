"""Plain Pods and pod groups (after Kueue's pod integration): a Pod no controller owns is a
job of one pod; Pods labelled ``jobdash.io/pod-group: <name>`` and annotated
``jobdash.io/pod-group-total-count: "<n>"`` are one job of n pods, named by the group,
admitted all or nothing.

Unlike every other kind, the job's object is its pods: they are made by their user, wait in
the cluster gated (jobdash's webhook adds the placement gate at creation) and are charged
by ResourceQuota from then on; release lifts the gate. Nothing can suspend them or make
them again, so a released pod job is never taken back (capabilities.JobNotTakenBack).

A group's members share one shape (requests, limits, where they may run): the Workload is
the group's count of pods of its first member's shape, and a member of another shape would
make the quota and the nodes the planner counts wrong, so it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..podspec import is_extended_resource, pod_shape
from ..validation import Problems, dns1123_subdomain_problem, join, object_meta, required_mapping
from ..workload import JobStatus, RuntimeSource, Workload, register
from .common import pod_set, workload

GROUP_LABEL = "jobdash.io/pod-group"
COUNT_ANNOTATION = "jobdash.io/pod-group-total-count"
MAX_JOB_NAME = 63
MAX_GROUP = 10_000  # more pods than any node pool holds: a typo, not a gang
ROLE = "pod"
COUNT_PATH = join("metadata.annotations", COUNT_ANNOTATION)
GROUP_PATH = join("metadata.labels", GROUP_LABEL)


@dataclass(frozen=True)
class Group:
    name: str  # the job's name: the group label's value, or a single pod's own name
    total: int
    labelled: bool  # named by the group label (else a single pod)


def group_of(manifest: Mapping[str, Any], problems: Problems) -> Group | None:
    """The group a pod belongs to, from its label and annotation; None when they are wrong
    (each problem at its path)."""
    metadata = manifest.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    labels = metadata.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    annotations = metadata.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    name, count = labels.get(GROUP_LABEL), annotations.get(COUNT_ANNOTATION)
    if name is None:
        if count is not None:
            problems.add(GROUP_PATH, f"required with the annotation {COUNT_ANNOTATION} (the group's name)")
            return None
        own = metadata.get("name")
        return Group(own if isinstance(own, str) else "", 1, labelled=False)
    if not isinstance(name, str) or not name or (problem := dns1123_subdomain_problem(name)):
        problems.add(GROUP_PATH, f"must name the group (a DNS-1123 subdomain): {problem or 'empty'}")
        return None
    if count is None:
        problems.add(COUNT_PATH, f'required in a pod group: the number of its pods, e.g. "4" (group {name!r})')
        return None
    if not isinstance(count, str) or not count.isdigit() or not 1 <= int(count) <= MAX_GROUP:
        problems.add(COUNT_PATH, f"must be a whole number from 1 to {MAX_GROUP}, got {count!r}")
        return None
    return Group(name, int(count), labelled=True)


def asks_devices(manifest: Mapping[str, Any]) -> bool:
    """Whether any container of the pod asks for an extended resource (GPUs, shared-GPU memory,
    any device) in its requests or limits. Read from the raw manifest, not a Workload: the
    webhook asks before any validation, to know whether the pod is queued at all (one it
    passes is the API server's to judge)."""
    spec = manifest.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        # (a list that is not one asks nothing: the API server refuses the pod itself)
        for container in containers if isinstance(containers, list) else ():
            resources = container.get("resources") if isinstance(container, dict) else None
            for amounts in (resources or {}).values() if isinstance(resources, dict) else ():
                if isinstance(amounts, dict) and any(isinstance(n, str) and is_extended_resource(n) for n in amounts):
                    return True
    return False


@dataclass(frozen=True)
class PodAdapter:
    api_version: str = "v1"
    kind: str = "Pod"
    plural: str = "pods"
    pod_job_label: str = GROUP_LABEL  # every queued pod carries it (the webhook labels a single pod)
    not_taken_back: str = (
        "its pods cannot be suspended, and nothing would make them again: a released Pod is never taken back"
    )

    def name_problem(self, name: str) -> str | None:
        return dns1123_subdomain_problem(name)

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        problems = Problems()
        meta = object_meta(manifest, problems, dns1123_subdomain_problem)
        spec = required_mapping(manifest, "spec", "", problems)
        shape = pod_shape(spec, "spec", problems) if spec is not None else None
        group = group_of(manifest, problems)
        if group is not None and not group.labelled and len(meta.name_for_checks) > MAX_JOB_NAME:
            # A single pod's name is its job's, and a job's name is at most a label value long.
            here = "metadata.name" if meta.name else "metadata.generateName"
            problems.add(here, f"must be at most {MAX_JOB_NAME} characters for jobdash to queue it as a job")
        problems.raise_if_any()
        assert shape is not None and group is not None
        built = workload(self.kind, self.api_version, meta, [pod_set(ROLE, group.total, shape)])
        if group.labelled:
            return Workload(
                built.kind,
                built.api_version,
                group.name,
                built.namespace,
                built.pod_sets,
                built.annotations,
                built.labels,
            )
        return built

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        """One pod's status as a job's: its phase."""
        status = obj.get("status")
        phase = status.get("phase") if isinstance(status, Mapping) else None
        return self.status_of_pods([phase if isinstance(phase, str) else "Pending"], 1)

    def status_of_pods(self, phases: Sequence[str], total: int) -> JobStatus:
        """All of the group Succeeded: Succeeded; any Failed, or some gone and the rest
        finished: Failed (a pod does not restart once Failed, and nothing makes a deleted one
        again, so the gang cannot finish); any Running: Running; else Created."""
        failed = sum(1 for phase in phases if phase == "Failed")
        if failed:
            return JobStatus("Failed", f"{failed} of {total} pod{'' if total == 1 else 's'} failed")
        if phases and len(phases) < total and all(phase == "Succeeded" for phase in phases):
            gone = total - len(phases)
            return JobStatus("Failed", f"{gone} of {total} pods were deleted before they finished")
        succeeded = sum(1 for phase in phases if phase == "Succeeded")
        if total and succeeded >= total:
            return JobStatus("Succeeded", "its pod succeeded" if total == 1 else f"all {total} pods succeeded")
        if any(phase == "Running" for phase in phases):
            return JobStatus("Running")
        return JobStatus("Created")


POD = register(PodAdapter())
