"""TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2).

A TrainJob names a runtime (a ClusterTrainingRuntime, or a TrainingRuntime in its own
namespace) whose spec.template is a JobSet template; the trainer creates a JobSet named as
the TrainJob from it, so the pods are the runtime's replicated Jobs with the TrainJob's
trainer settings applied, as Trainer's runtime framework does:

- the trainer's replicatedJob is the one labelled trainer.kubeflow.org/trainjob-ancestor-step:
  trainer (else the one named "node", else the one with a container named "node"); it runs
  trainer.numNodes pods, else the runtime's mlPolicy.numNodes, else its own count;
- with an MPI policy, the replicatedJob named "node" runs trainer.numNodes pods, one fewer
  when mlPolicy.mpi.runLauncherAsNode (the launcher is a node too);
- trainer.resourcesPerNode is merged key by key into the "node" container of those
  replicatedJobs (Trainer >= 2.2; earlier versions replaced the whole resources), and
  trainer.image replaces its image;
- every other replicatedJob (initializers, an MPI launcher) runs as in the runtime.

Its pod templates are in the runtime, not in the TrainJob, so what one TrainJob changes of
them is in its spec.podTemplateOverrides (Trainer v2.1: entries of targetJobs, each a
replicatedJob's name, with pod template metadata and a spec of nodeSelector, affinity,
tolerations, schedulingGates, ...; trainjob_overrides.py). The Workload's pod sets have the
nodeSelector, tolerations and required node affinity the overrides give them. A "pod
template" of a TrainJob is an override entry naming a replicatedJob, its spec the pod
spec's fields, and a role without one gets a blank entry of its own (pod_templates).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import FieldError, ManifestError
from ..podspec import resource_requirements
from ..validation import (
    ObjectMeta,
    Problems,
    describe,
    dns1035_label_problem,
    join,
    object_meta,
    optional_bool,
    optional_mapping,
    required_mapping,
)
from ..workload import (
    JobStatus,
    PodSet,
    Referenced,
    RuntimeSource,
    Workload,
    read_path,
    register,
    register_referenced,
)
from .common import condition_status, count, one_of, workload
from .jobset import name_problems, replicated_jobs
from .trainjob_overrides import OVERRIDES, Override, applied, check_targets, read_overrides, targets

RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
# So that jobdash's RuntimeSource can read them by kind.
register_referenced(
    Referenced("ClusterTrainingRuntime", "trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", namespaced=False)
)
register_referenced(Referenced("TrainingRuntime", "trainer.kubeflow.org/v1alpha1", "trainingruntimes", namespaced=True))
API_GROUP = "trainer.kubeflow.org"
MANAGED_BY = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
NODE = "node"
JOBSET_SPEC = "spec.template.spec"  # where a runtime keeps its JobSet spec
PHASES = {"Failed": "Failed", "Complete": "Succeeded", "Suspended": "Suspended", "Created": "Created"}


@dataclass(frozen=True)
class RuntimeRef:
    kind: str
    name: str


@dataclass(frozen=True)
class Trainer:
    num_nodes: int | None = None
    resources: Mapping[Any, Any] | None = None  # resourcesPerNode as written
    image: str | None = None


@dataclass(frozen=True)
class TrainJobAdapter:
    api_version: str = "trainer.kubeflow.org/v1alpha1"
    kind: str = "TrainJob"
    plural: str = "trainjobs"
    suspend_path: tuple[str, ...] = ("spec", "suspend")
    pod_job_label: str = "jobset.sigs.k8s.io/jobset-name"  # its JobSet is named as the TrainJob
    pod_role_label: str = "jobset.sigs.k8s.io/replicatedjob-name"

    def name_problem(self, name: str) -> str | None:
        return dns1035_label_problem(name)

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        """Trainer's conditions; while none is true the TrainJob has no phase of its own."""
        return condition_status(obj, PHASES) or JobStatus("")

    @property
    def pod_spec_path(self) -> tuple[str, ...]:
        return ("spec",)  # an override entry's spec holds the pod spec's fields

    def pod_templates(
        self, obj: MutableMapping[str, Any], roles: Sequence[str] = ()
    ) -> list[tuple[str, MutableMapping[str, Any]]]:
        """(replicatedJob, entry) for each job each spec.podTemplateOverrides entry with a
        spec names, and a blank entry {targetJobs: [{name: role}], spec: {}} appended for
        each of ``roles`` (the Workload's: every replicatedJob of the runtime) that none
        names. An entry without a spec changes no pod spec field, so it is no template:
        what would be added to it could not be told from the user's own on the way back.
        A job a user's entry names gets no entry of its own (one gated entry is enough:
        the trainer merges every entry's schedulingGates by name)."""
        spec = obj.get("spec")
        if not isinstance(spec, MutableMapping):
            return []
        entries = spec.get(OVERRIDES)
        found = [
            (name, entry)
            for entry in (entries if isinstance(entries, list) else ())
            if isinstance(entry, MutableMapping) and isinstance(entry.get("spec"), MutableMapping)
            for name in targets(entry)
        ]
        missing = [role for role in dict.fromkeys(roles) if role not in {name for name, _ in found}]
        if missing and entries is None:
            entries = spec[OVERRIDES] = []
        if not isinstance(entries, list):  # not a list: nothing can be added without losing it
            return found
        for role in missing:
            blank: MutableMapping[str, Any] = {"targetJobs": [{"name": role}], "spec": {}}
            entries.append(blank)
            found.append((role, blank))
        return found

    def drop_blank(self, obj: MutableMapping[str, Any], template: MutableMapping[str, Any]) -> None:
        """Removes an entry naming one job and nothing else (its spec empty or absent), and
        the list if it empties."""
        named = targets(template)
        blank = {"targetJobs": [{"name": named[0]}]} if len(named) == 1 else None
        if blank is None or template not in (blank, {**blank, "spec": {}}):
            return
        spec = obj.get("spec")
        entries = spec.get(OVERRIDES) if isinstance(spec, MutableMapping) else None
        if isinstance(spec, MutableMapping) and isinstance(entries, list):
            at = next((i for i, entry in enumerate(entries) if entry is template), None)
            if at is not None:
                del entries[at]
                if not entries:
                    del spec[OVERRIDES]

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        problems = Problems()
        meta = object_meta(manifest, problems)
        spec = required_mapping(manifest, "spec", "", problems)
        ref, trainer = None, Trainer()
        overrides: tuple[Override, ...] = ()
        if spec is not None:
            ref = _runtime_ref(spec, problems)
            trainer = _trainer(spec, problems)
            overrides = read_overrides(spec, problems)
            optional_bool(spec, "suspend", "spec", problems)
            one_of(spec, "managedBy", "spec", problems, MANAGED_BY)
        # The runtime is read only for a TrainJob valid on its own: its errors come first.
        problems.raise_if_any()
        if ref is None:  # a missing or bad runtimeRef is one of the problems above
            raise ManifestError([FieldError("spec.runtimeRef", "required")])
        runtime = _read_runtime(ref, meta, runtimes)
        pod_sets = _pod_sets(runtime, ref, trainer, overrides, meta, problems)
        problems.raise_if_any()
        return workload(self.kind, self.api_version, meta, pod_sets)


def _runtime_ref(spec: Mapping[Any, Any], problems: Problems) -> RuntimeRef | None:
    ref = required_mapping(spec, "runtimeRef", "spec", problems)
    if ref is None:
        return None
    kind = one_of(ref, "kind", "spec.runtimeRef", problems, RUNTIME_KINDS) or RUNTIME_KINDS[0]
    one_of(ref, "apiGroup", "spec.runtimeRef", problems, (API_GROUP,))
    name = ref.get("name")
    if name is None or name == "":
        problems.add("spec.runtimeRef.name", f"required: the {kind} to run")
    elif not isinstance(name, str):
        problems.add("spec.runtimeRef.name", f"must be a string, got {describe(name)}")
    elif len(name) > 253:
        problems.add("spec.runtimeRef.name", "must be at most 253 characters")
    else:
        return RuntimeRef(kind, name)
    return None


def _trainer(spec: Mapping[Any, Any], problems: Problems) -> Trainer:
    trainer = optional_mapping(spec, "trainer", "spec", problems)
    if trainer is None:
        return Trainer()
    here = "spec.trainer"
    nodes = None if trainer.get("numNodes") is None else count(trainer, "numNodes", here, problems, default=0)
    resources = optional_mapping(trainer, "resourcesPerNode", here, problems)
    if resources is not None:
        resource_requirements(resources, join(here, "resourcesPerNode"), problems, pairs=False)
    image = trainer.get("image")
    if image is not None and not isinstance(image, str):
        problems.add(join(here, "image"), f"must be a string, got {describe(image)}")
    return Trainer(nodes, resources, image if isinstance(image, str) and image else None)


def _read_runtime(ref: RuntimeRef, meta: ObjectMeta, runtimes: RuntimeSource | None) -> Mapping[str, Any]:
    # A ClusterTrainingRuntime is cluster-scoped; a TrainingRuntime is the TrainJob's neighbour.
    namespace = "" if ref.kind == "ClusterTrainingRuntime" else meta.namespace or ""
    where = f" in namespace {namespace!r}" if namespace else ""
    if runtimes is None:
        message = f"{ref.kind} {ref.name!r} cannot be read here, and the TrainJob's pods come from it"
    else:
        runtime = runtimes.runtime(ref.kind, namespace, ref.name)
        if isinstance(runtime, Mapping):
            return runtime
        message = f"{ref.kind} {ref.name!r} not found{where}: create it before the TrainJob"
    raise ManifestError([FieldError("spec.runtimeRef.name", message)])


def _pod_sets(
    runtime: Mapping[str, Any],
    ref: RuntimeRef,
    trainer: Trainer,
    overrides: Sequence[Override],
    meta: ObjectMeta,
    problems: Problems,
) -> list[PodSet]:
    jobset_spec = read_path(runtime, ("spec", "template", "spec"))
    policy = read_path(runtime, ("spec", "mlPolicy"))
    policy = policy if isinstance(policy, Mapping) else {}
    if not isinstance(jobset_spec, Mapping) or not isinstance(jobset_spec.get("replicatedJobs"), list):
        problems.add("spec.runtimeRef.name", f"{ref.kind} {ref.name!r} has no {JOBSET_SPEC}.replicatedJobs")
        return []
    items = jobset_spec["replicatedJobs"]
    trainer_at = _trainer_position(items)
    mpi = isinstance(policy.get("mpi"), Mapping)
    node_at = next((i for i, it in enumerate(items) if _name_of(it) == NODE), trainer_at) if mpi else trainer_at
    patched = {i for i in (trainer_at, node_at) if i is not None}
    if node_at is None:
        for key, value in (("numNodes", trainer.num_nodes), ("resourcesPerNode", trainer.resources)):
            if value is not None:
                problems.add(join("spec.trainer", key), f"{ref.kind} {ref.name!r} has no trainer replicatedJob")

    check_targets(overrides, items, f"{ref.kind} {ref.name!r}", problems)

    runtime_problems = Problems()
    trained = [_applied(item, trainer, i == trainer_at) if i in patched else item for i, item in enumerate(items)]
    jobs = replicated_jobs(
        {**jobset_spec, "replicatedJobs": applied(overrides, trained)}, JOBSET_SPEC, runtime_problems
    )
    for error in runtime_problems.errors:
        problems.errors.append(_blame(error, ref, trainer, items, patched))
    for _, message in name_problems(meta.name_for_checks, jobs):
        problems.add("metadata.name", f"too long for its JobSet: {message}")

    nodes = trainer.num_nodes
    if nodes is not None and mpi and policy["mpi"].get("runLauncherAsNode") is True:
        nodes = max(nodes - 1, 1)
    elif nodes is None and not mpi and type(policy.get("numNodes")) is int:
        nodes = policy["numNodes"]
    return [job.pod_set(nodes if job.position == node_at and nodes is not None else None) for job in jobs]


def _name_of(item: Any) -> Any:
    return item.get("name") if isinstance(item, Mapping) else None


def _trainer_position(items: list[Any]) -> int | None:
    def node_container(item: Any) -> bool:
        containers = read_path(item, ("template", "spec", "template", "spec", "containers"))
        return isinstance(containers, list) and any(_name_of(c) == NODE for c in containers)

    def labelled(item: Any) -> bool:
        labels = read_path(item, ("template", "metadata", "labels"))
        return isinstance(labels, Mapping) and labels.get(ANCESTOR_LABEL) == "trainer"

    for test in (labelled, lambda item: _name_of(item) == NODE, node_container):
        found = next((i for i, item in enumerate(items) if isinstance(item, Mapping) and test(item)), None)
        if found is not None:
            return found
    return None


def _applied(item: Any, trainer: Trainer, is_trainer: bool) -> Any:
    """The replicatedJob with the TrainJob's trainer settings in its "node" container."""
    containers = read_path(item, ("template", "spec", "template", "spec", "containers"))
    if not isinstance(containers, list) or (trainer.resources is None and trainer.image is None):
        return item
    item = copy.deepcopy(item)
    for container in item["template"]["spec"]["template"]["spec"]["containers"]:
        if _name_of(container) != NODE:
            continue
        if trainer.image is not None and is_trainer:
            container["image"] = trainer.image
        if trainer.resources is not None:
            base = container.get("resources") if isinstance(container.get("resources"), Mapping) else {}
            merged = dict(base)
            for section in ("requests", "limits"):
                mine, theirs = trainer.resources.get(section), base.get(section)
                if isinstance(mine, Mapping):
                    merged[section] = {**(theirs if isinstance(theirs, Mapping) else {}), **mine}
            container["resources"] = merged
    return item


def _blame(error: FieldError, ref: RuntimeRef, trainer: Trainer, items: list[Any], patched: set[int]) -> FieldError:
    """A problem of the runtime as the TrainJob uses it: at the TrainJob's resourcesPerNode
    when it is about a resource the TrainJob sets, else at the runtime reference."""
    for position in patched:
        containers = read_path(items[position], ("template", "spec", "template", "spec", "containers")) or []
        for k, container in enumerate(containers):
            prefix = f"{JOBSET_SPEC}.replicatedJobs[{position}].template.spec.template.spec.containers[{k}].resources."
            if trainer.resources is None or _name_of(container) != NODE or not error.path.startswith(prefix):
                continue
            section, _, resource = error.path[len(prefix) :].partition(".")
            for mine in (section, "limits" if section == "requests" else "requests"):
                entries = trainer.resources.get(mine)
                if isinstance(entries, Mapping) and resource in entries:
                    return FieldError(f"spec.trainer.resourcesPerNode.{mine}.{resource}", error.message)
    return FieldError("spec.runtimeRef.name", f"{ref.kind} {ref.name!r} is not usable: {error}")


TRAINJOB = register(TrainJobAdapter())
