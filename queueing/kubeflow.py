"""Rules common to the Kubeflow training-operator job kinds (kubeflow.org/v1).

TFJob, PyTorchJob, XGBoostJob, ... differ only in the name of their replica
map, the replica types they accept and the container the operator runs, so
each kind's adapter is a ``ReplicatedJobAdapter`` configured with those.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .podspec import pod_shape
from .validation import (
    Problems,
    describe,
    join,
    object_meta,
    optional_bool,
    optional_int,
    optional_mapping,
    required_mapping,
)
from .workload import JobStatus, PodSet, RuntimeSource, Workload, latest_true_condition

MAX_REPLICAS = 10_000


@dataclass(frozen=True)
class ReplicatedJobAdapter:
    api_version: str
    kind: str
    plural: str
    replica_specs_field: str  # e.g. "tfReplicaSpecs"
    replica_types: tuple[str, ...]  # in the order pod sets are reported
    singleton_types: frozenset[str]  # at most one replica each
    exclusive_types: tuple[frozenset[str], ...]  # at most one type of each group
    container_name: str  # the container the operator looks for, e.g. "tensorflow"
    success_policies: tuple[str, ...] | None = None  # None: the kind has no successPolicy
    suspend_path: tuple[str, ...] = ("spec", "runPolicy", "suspend")
    pod_job_label: str = "training.kubeflow.org/job-name"
    pod_role_label: str = "training.kubeflow.org/replica-type"

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        """The operator's conditions: Created, Running, Restarting, Suspended, Succeeded, Failed."""
        latest = latest_true_condition(obj)
        return JobStatus(phase=str(latest.get("type") or ""), message=str(latest.get("message") or ""))

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        problems = Problems()
        meta = object_meta(manifest, problems)
        pod_sets: list[PodSet] = []
        spec = required_mapping(manifest, "spec", "", problems)
        if spec is not None:
            pod_sets = self._pod_sets(spec, problems)
            _run_policy(spec, problems)
            self._success_policy(spec, problems)
        problems.raise_if_any()
        return Workload(
            kind=self.kind,
            api_version=self.api_version,
            name=meta.name,
            namespace=meta.namespace,
            pod_sets=tuple(pod_sets),
            annotations=meta.annotations,
            labels=meta.labels,
        )

    def _pod_sets(self, spec: Mapping[Any, Any], problems: Problems) -> list[PodSet]:
        path = join("spec", self.replica_specs_field)
        replica_specs = required_mapping(spec, self.replica_specs_field, "spec", problems)
        if replica_specs is None:
            return []
        if not replica_specs:
            problems.add(path, f"must define at least one of {', '.join(self.replica_types)}")
            return []
        for replica_type in replica_specs:
            if replica_type not in self.replica_types:
                problems.add(join(path, replica_type), self._unknown_type_message(replica_type))
        for group in self.exclusive_types:
            present = [t for t in self.replica_types if t in group and t in replica_specs]
            if len(present) > 1:
                problems.add(path, f"{' and '.join(present)} cannot both be set")

        pod_sets = []
        for replica_type in self.replica_types:
            if replica_type in replica_specs:
                pod_set = self._pod_set(replica_type, replica_specs[replica_type], join(path, replica_type), problems)
                if pod_set is not None:
                    pod_sets.append(pod_set)
        return pod_sets

    def _pod_set(self, replica_type: str, replica_spec: Any, path: str, problems: Problems) -> PodSet | None:
        if not isinstance(replica_spec, Mapping):
            problems.add(path, f"must be a mapping, got {describe(replica_spec)}")
            return None
        replicas = self._replicas(replica_type, replica_spec, path, problems)
        template = required_mapping(replica_spec, "template", path, problems)
        if template is None:
            return None
        pod_spec = required_mapping(template, "spec", join(path, "template"), problems)
        if pod_spec is None:
            return None
        shape = pod_shape(pod_spec, join(path, "template.spec"), problems, required_container=self.container_name)
        return PodSet(
            role=replica_type,
            count=replicas,
            requests=shape.requests,
            limits=shape.limits,
            node_selector=shape.node_selector,
            tolerations=shape.tolerations,
        )

    def _replicas(self, replica_type: str, replica_spec: Mapping[Any, Any], path: str, problems: Problems) -> int:
        here = join(path, "replicas")
        replicas = optional_int(replica_spec, "replicas", path, problems)
        if replicas is None:
            return 1 if replica_spec.get("replicas") is None else 0  # the operator defaults to 1
        if replicas < 0:
            problems.add(here, f"must not be negative, got {replicas}")
        elif replica_type in self.singleton_types and replicas > 1:
            problems.add(here, f"must be at most 1 for {replica_type}, got {replicas}")
        elif replicas > MAX_REPLICAS:
            problems.add(here, f"must be at most {MAX_REPLICAS}, got {replicas}")
        else:
            return replicas
        return 0

    def _unknown_type_message(self, replica_type: Any) -> str:
        message = f"unknown replica type {str(replica_type)!r}; expected one of {', '.join(self.replica_types)}"
        if isinstance(replica_type, str):
            for known in self.replica_types:
                if known.lower() == replica_type.lower():
                    return f"{message} (replica types are case-sensitive: did you mean {known!r}?)"
        return message

    def _success_policy(self, spec: Mapping[Any, Any], problems: Problems) -> None:
        if self.success_policies is None or spec.get("successPolicy") is None:
            return
        policy = spec["successPolicy"]
        if policy not in self.success_policies:
            allowed = " or ".join(repr(p) for p in self.success_policies)
            problems.add("spec.successPolicy", f"must be {allowed}, got {policy!r}")


def _run_policy(spec: Mapping[Any, Any], problems: Problems) -> None:
    run_policy = optional_mapping(spec, "runPolicy", "spec", problems)
    if run_policy is not None:
        optional_bool(run_policy, "suspend", "spec.runPolicy", problems)
