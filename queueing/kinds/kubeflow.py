"""The Kubeflow training-operator kinds (kubeflow.org/v1), as one table.

TFJob, PyTorchJob, XGBoostJob, PaddleJob and JAXJob differ only in the name of their
replica map, the replica types they accept, how many replicas a type may have and the
container the operator runs. The rules are training-operator release-1.9's validating
webhooks (pkg/webhooks/<kind>) and its defaulting (pkg/apis/kubeflow.org/v1/*_defaults.go:
replica types renamed to their canonical spelling whatever their case, replicas defaulted
to 1), which the controller applies after admission. So the case of a replica type is
free only where the webhook does not list the valid types: TFJob's (its own e2e
manifests write "Ps"); PyTorch's, XGBoost's, Paddle's and JAX's webhooks refuse "worker"
(utils.ValidateReplicaSpecs compares exactly).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..validation import (
    Problems,
    dns1035_label_problem,
    join,
    object_meta,
    optional_bool,
    optional_int,
    optional_mapping,
    required_mapping,
)
from ..workload import JobStatus, PodSet, RuntimeSource, Workload, read_path, register
from .common import (
    TemplatesInObject,
    count,
    latest_condition_status,
    one_of,
    pod_set,
    pod_template_shape,
    template_at,
    workload,
)

MAX_REPLICAS = 10_000  # jobdash's own bound: beyond it a job is a mistake, not a gang
MANAGED_BY = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")


@dataclass(frozen=True)
class ReplicatedJobAdapter(TemplatesInObject):
    api_version: str
    kind: str
    plural: str
    replica_specs_field: str  # e.g. "tfReplicaSpecs"
    replica_types: tuple[str, ...]  # canonical spellings, in the order pod sets are reported
    container_name: str  # the container the operator looks for, e.g. "tensorflow"
    replica_bounds: tuple[tuple[str, int, int], ...] = ()  # (type, min, max) where not (0, MAX_REPLICAS)
    required_types: tuple[str, ...] = ()
    exclusive_types: tuple[frozenset[str], ...] = ()  # at most one type of each group
    success_policies: tuple[str, ...] | None = None  # None: the kind has no successPolicy
    elastic: bool = False  # spec.elasticPolicy scales the Worker replicas (PyTorchJob)
    any_case: bool = False  # replica types in any case (the webhook does not check them)
    suspend_path: tuple[str, ...] = ("spec", "runPolicy", "suspend")
    pod_job_label: str = "training.kubeflow.org/job-name"
    pod_role_label: str = "training.kubeflow.org/replica-type"  # valued the type in lower case

    def name_problem(self, name: str) -> str | None:
        return dns1035_label_problem(name)

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        """The operator's conditions: Created, Running, Restarting, Suspended, Succeeded, Failed."""
        return latest_condition_status(obj)

    def pod_templates(
        self, obj: MutableMapping[str, Any], roles: Sequence[str] = ()
    ) -> list[tuple[str, MutableMapping[str, Any]]]:
        """Each replica spec's template (an elastic PyTorchJob's Worker too), named by its
        canonical replica type as its pod set is, in the pod sets' order."""
        specs = read_path(obj, ("spec", self.replica_specs_field))
        if not isinstance(specs, Mapping):
            return []
        by_lower = {t.lower(): t for t in self.replica_types}
        found = []
        for key, replica_spec in specs.items():
            canonical = by_lower.get(key.lower()) if isinstance(key, str) else None
            template = template_at(replica_spec, ("template",))
            # A spelling the webhook refuses is no replica of the job, whatever it holds.
            if canonical is not None and (self.any_case or canonical == key) and template is not None:
                found.append((canonical, template))
        return sorted(found, key=lambda pair: self.replica_types.index(pair[0]))

    def elastic_range(self, obj: Mapping[str, Any]) -> Mapping[str, tuple[int, int, int]]:
        """The Worker's (minReplicas, maxReplicas, replicas) of an elastic job, defaulted as
        _elastic does; {} for a kind without elasticPolicy or a job without one (or whose
        numbers are not whole: validate_and_build says so)."""
        policy = read_path(obj, ("spec", "elasticPolicy"))
        specs = read_path(obj, ("spec", self.replica_specs_field))
        if not self.elastic or not isinstance(policy, Mapping) or not isinstance(specs, Mapping):
            return {}
        worker = specs.get("Worker")
        replicas = worker.get("replicas", 1) if isinstance(worker, Mapping) else None
        minimum, maximum = policy.get("minReplicas"), policy.get("maxReplicas")
        if not all(value is None or type(value) is int for value in (replicas, minimum, maximum)):
            return {}
        replicas = 1 if replicas is None else replicas
        return {"Worker": (*_elastic_bounds(minimum, maximum, replicas), replicas)}

    def scale_patch(self, counts: Mapping[str, int]) -> dict[str, Any]:
        """Its replica specs' replicas: the operator makes or removes the pods (an elastic
        job's workers join or leave its rendezvous)."""
        return {"spec": {self.replica_specs_field: {role: {"replicas": count} for role, count in counts.items()}}}

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        problems = Problems()
        meta = object_meta(manifest, problems)
        pod_sets: list[PodSet] = []
        spec = required_mapping(manifest, "spec", "", problems)
        if spec is not None:
            pod_sets = self._pod_sets(spec, problems)
            run_policy(spec, problems, MANAGED_BY)
            self._success_policy(spec, problems)
        problems.raise_if_any()
        return workload(self.kind, self.api_version, meta, pod_sets)

    def _pod_sets(self, spec: Mapping[Any, Any], problems: Problems) -> list[PodSet]:
        path = join("spec", self.replica_specs_field)
        replica_specs = required_mapping(spec, self.replica_specs_field, "spec", problems)
        if replica_specs is None:
            return []
        if not replica_specs:
            problems.add(path, f"must define at least one of {', '.join(self.replica_types)}")
            return []
        written = self._canonical_keys(replica_specs, path, problems)
        for required in self.required_types:
            if required not in written:
                problems.add(join(path, required), f"required: {self.kind} needs a {required}")
        for group in self.exclusive_types:
            present = [t for t in self.replica_types if t in group and t in written]
            if len(present) > 1:
                problems.add(path, f"{' and '.join(present)} cannot both be set")

        pod_sets = []
        for replica_type in self.replica_types:
            if replica_type in written:
                here = join(path, written[replica_type])
                made = self._pod_set(replica_type, replica_specs[written[replica_type]], here, problems)
                if made is not None:
                    pod_sets.append(made)
        if self.elastic:
            pod_sets = self._elastic(spec, written, pod_sets, problems)
        return pod_sets

    def _canonical_keys(self, replica_specs: Mapping[Any, Any], path: str, problems: Problems) -> dict[str, Any]:
        """canonical type -> the key as written: where any case is accepted the operator renames
        "worker" or "WORKER" to "Worker", and only one spelling may be used."""
        by_lower = {t.lower(): t for t in self.replica_types}
        written: dict[str, Any] = {}
        for key in replica_specs:
            canonical = by_lower.get(key.lower()) if isinstance(key, str) else None
            if canonical is not None and not self.any_case and canonical != key:
                problems.add(
                    join(path, key),
                    f"unknown replica type {key!r}; {self.kind}'s replica types are case-sensitive: "
                    f"did you mean {canonical!r}?",
                )
            elif canonical is None:
                expected = ", ".join(self.replica_types)
                problems.add(join(path, key), f"unknown replica type {str(key)!r}; expected one of {expected}")
            elif canonical in written:
                problems.add(
                    path, f"{written[canonical]!r} and {key!r} are both the {canonical} replica type; keep one"
                )
            else:
                written[canonical] = key
        return written

    def _pod_set(self, replica_type: str, replica_spec: Any, path: str, problems: Problems) -> PodSet | None:
        if not isinstance(replica_spec, Mapping):
            problems.add(path, "must be a mapping with replicas and template")
            return None
        bounds = next(((low, high) for t, low, high in self.replica_bounds if t == replica_type), (0, MAX_REPLICAS))
        what = replica_type if bounds != (0, MAX_REPLICAS) else ""
        replicas = count(replica_spec, "replicas", path, problems, default=1, bounds=bounds, what=what)
        shape = pod_template_shape(replica_spec, path, problems, required_container=self.container_name)
        return None if shape is None else pod_set(replica_type, replicas, shape)

    def _elastic(
        self, spec: Mapping[Any, Any], written: Mapping[str, Any], pod_sets: list[PodSet], problems: Problems
    ) -> list[PodSet]:
        """Elastic training starts once minReplicas workers run and takes up to maxReplicas:
        the Worker's pod set asks its replicas within that range (PodSet.minimum/maximum).
        The bounds default to each other, then to the Worker replicas, as the operator's
        defaulting does."""
        policy = optional_mapping(spec, "elasticPolicy", "spec", problems)
        if policy is None:
            return pod_sets
        here = "spec.elasticPolicy"
        if policy.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            problems.add(join(here, "nProcPerNode"), "must not be used with spec.nprocPerNode (deprecated; use that)")
        worker = next((p for p in pod_sets if p.role == "Worker"), None)
        if "Worker" not in written:
            problems.add(join(join("spec", self.replica_specs_field), "Worker"), "required when elasticPolicy is set")
        if worker is None:
            return pod_sets
        minimum = optional_int(policy, "minReplicas", here, problems)
        maximum = optional_int(policy, "maxReplicas", here, problems)
        low, high = _elastic_bounds(minimum, maximum, worker.count)
        replicas_path = join(join(join("spec", self.replica_specs_field), written["Worker"]), "replicas")
        if low < 1:
            problems.add(join(here, "minReplicas"), f"must be at least 1, got {low}")
        elif high < low:
            problems.add(join(here, "maxReplicas"), f"must be at least minReplicas ({low}), got {high}")
        elif not low <= worker.count <= high:
            problems.add(replicas_path, f"must be between minReplicas {low} and maxReplicas {high}, got {worker.count}")
        else:
            ranged = replace(worker, minimum=low, maximum=high)
            return [ranged if p is worker else p for p in pod_sets]
        return pod_sets

    def _success_policy(self, spec: Mapping[Any, Any], problems: Problems) -> None:
        if self.success_policies is None or spec.get("successPolicy") is None:
            return
        policy = spec["successPolicy"]
        if policy not in self.success_policies:
            allowed = " or ".join(repr(p) for p in self.success_policies)
            problems.add("spec.successPolicy", f"must be {allowed}, got {policy!r}")


def _elastic_bounds(minimum: int | None, maximum: int | None, replicas: int) -> tuple[int, int]:
    """The operator's defaulting: each bound defaults to the other, then to the replicas."""
    low = minimum if minimum is not None else maximum if maximum is not None else replicas
    return low, maximum if maximum is not None else low


def run_policy(spec: Mapping[Any, Any], problems: Problems, managed_by: tuple[str, ...]) -> Mapping[Any, Any] | None:
    """spec.runPolicy's suspend flag and managedBy: a job managed by another controller
    would never be run by the operator jobdash releases it to."""
    policy = optional_mapping(spec, "runPolicy", "spec", problems)
    if policy is not None:
        optional_bool(policy, "suspend", "spec.runPolicy", problems)
        one_of(policy, "managedBy", "spec.runPolicy", problems, managed_by)
    return policy


def _family(kind: str, field: str, types: tuple[str, ...], container: str, **rules: Any) -> ReplicatedJobAdapter:
    return ReplicatedJobAdapter(
        api_version="kubeflow.org/v1",
        kind=kind,
        plural=kind.lower() + "s",
        replica_specs_field=field,
        replica_types=types,
        container_name=container,
        **rules,
    )


# Chief and Master are two names for the coordinator: one of them, one pod.
TFJOB = _family(
    "TFJob",
    "tfReplicaSpecs",
    ("Chief", "Master", "PS", "Worker", "Evaluator"),
    "tensorflow",
    replica_bounds=(("Chief", 0, 1), ("Master", 0, 1), ("Evaluator", 0, 1)),
    exclusive_types=(frozenset({"Chief", "Master"}),),
    success_policies=("", "AllWorkers"),
    any_case=True,
)
# The webhook wants exactly one Master, and Workers at least 1 when set.
PYTORCHJOB = _family(
    "PyTorchJob",
    "pytorchReplicaSpecs",
    ("Master", "Worker"),
    "pytorch",
    replica_bounds=(("Master", 1, 1), ("Worker", 1, MAX_REPLICAS)),
    elastic=True,
)
XGBOOSTJOB = _family(
    "XGBoostJob",
    "xgbReplicaSpecs",
    ("Master", "Worker"),
    "xgboost",
    replica_bounds=(("Master", 1, 1),),
    required_types=("Master",),
)
PADDLEJOB = _family(
    "PaddleJob", "paddleReplicaSpecs", ("Master", "Worker"), "paddle", replica_bounds=(("Master", 0, 1),)
)
JAXJOB = _family("JAXJob", "jaxReplicaSpecs", ("Worker",), "jax")

FAMILY = (TFJOB, PYTORCHJOB, XGBOOSTJOB, PADDLEJOB, JAXJOB)
for _adapter in FAMILY:
    register(_adapter)
