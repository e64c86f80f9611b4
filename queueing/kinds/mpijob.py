"""MPIJob (kubeflow.org/v2beta1, mpi-operator v2), validated as the operator does.

The operator validates in its controller after defaulting (pkg/apis/kubeflow/validation):
a Launcher of exactly one replica is required; Workers are optional, but their replicas
default to 0 and 0 is refused, so a Worker must say how many. Unlike the training-operator
it does not rename replica types, so "launcher" is not the Launcher.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..validation import (
    Problems,
    dns1035_label_problem,
    join,
    object_meta,
    optional_mapping,
    required_mapping,
)
from ..workload import JobStatus, PodSet, RuntimeSource, Workload, read_path, register
from .common import (
    MAX_INT32,
    TemplatesInObject,
    count,
    latest_condition_status,
    non_negative,
    one_of,
    pod_set,
    pod_template_shape,
    template_at,
    workload,
)
from .kubeflow import MAX_REPLICAS, run_policy

REPLICA_TYPES = ("Launcher", "Worker")
MANAGED_BY = ("kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue")
CLEAN_POD_POLICIES = ("None", "Running", "All")
MPI_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
RESTART_POLICIES = ("Never", "OnFailure")
SPECS = "spec.mpiReplicaSpecs"


@dataclass(frozen=True)
class MPIJobAdapter(TemplatesInObject):
    api_version: str = "kubeflow.org/v2beta1"
    kind: str = "MPIJob"
    plural: str = "mpijobs"
    suspend_path: tuple[str, ...] = ("spec", "runPolicy", "suspend")
    pod_job_label: str = "training.kubeflow.org/job-name"
    pod_role_label: str = "training.kubeflow.org/job-role"  # "launcher" or "worker"

    def name_problem(self, name: str) -> str | None:
        return dns1035_label_problem(name)

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        """The training-operator's conditions: Created, Running, Restarting, Suspended, Succeeded, Failed."""
        return latest_condition_status(obj)

    def pod_templates(
        self, obj: MutableMapping[str, Any], roles: Sequence[str] = ()
    ) -> list[tuple[str, MutableMapping[str, Any]]]:
        """The Launcher's and the Worker's template (the operator's own spelling only)."""
        specs = read_path(obj, ("spec", "mpiReplicaSpecs"))
        found = [(role, template_at(specs, (role, "template"))) for role in REPLICA_TYPES]
        return [(role, template) for role, template in found if template is not None]

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        problems = Problems()
        meta = object_meta(manifest, problems)
        pod_sets: list[PodSet] = []
        spec = required_mapping(manifest, "spec", "", problems)
        if spec is not None:
            pod_sets = _pod_sets(spec, problems)
            _spec_fields(spec, problems)
        workers = next((p.count for p in pod_sets if p.role == "Worker"), 0)
        # Worker pods and their Service are named "<job>-worker-<i>": DNS labels.
        hostname = f"{meta.name_for_checks}-worker-{max(workers - 1, 0)}"
        name_path = "metadata.name" if meta.name else "metadata.generateName"
        if dns1035_label_problem(hostname) and not any(e.path == name_path for e in problems.errors):
            problems.add(name_path, f"too long: the worker pods' hostname {hostname!r} would not be a DNS label")
        problems.raise_if_any()
        return workload(self.kind, self.api_version, meta, pod_sets)


def _pod_sets(spec: Mapping[Any, Any], problems: Problems) -> list[PodSet]:
    replica_specs = required_mapping(spec, "mpiReplicaSpecs", "spec", problems)
    if replica_specs is None:
        return []
    for key in replica_specs:
        if key not in REPLICA_TYPES:
            problems.add(
                join(SPECS, key), f"unknown replica type {str(key)!r}; expected Launcher or Worker (case-sensitive)"
            )
    if replica_specs.get("Launcher") is None:
        problems.add(join(SPECS, "Launcher"), "required: an MPIJob needs a Launcher")
    pod_sets = []
    for role in REPLICA_TYPES:
        replica_spec = replica_specs.get(role)
        if replica_spec is None:
            continue
        path = join(SPECS, role)
        if not isinstance(replica_spec, Mapping):
            problems.add(path, "must be a mapping with replicas and template")
            continue
        if role == "Launcher":
            replicas = count(replica_spec, "replicas", path, problems, default=1, bounds=(1, 1), what=role)
        elif replica_spec.get("replicas") is None:
            problems.add(join(path, "replicas"), "required: at least 1 (the operator's default, 0, is refused)")
            replicas = 0
        else:
            replicas = count(replica_spec, "replicas", path, problems, default=0, bounds=(1, MAX_REPLICAS), what=role)
        one_of(replica_spec, "restartPolicy", path, problems, RESTART_POLICIES)
        shape = pod_template_shape(replica_spec, path, problems)
        if shape is not None:
            pod_sets.append(pod_set(role, replicas, shape))
    return pod_sets


def _spec_fields(spec: Mapping[Any, Any], problems: Problems) -> None:
    count(spec, "slotsPerWorker", "spec", problems, default=1, bounds=(0, MAX_INT32))
    one_of(spec, "mpiImplementation", "spec", problems, MPI_IMPLEMENTATIONS)
    mount = spec.get("sshAuthMountPath")
    if mount is not None and not isinstance(mount, str):
        problems.add("spec.sshAuthMountPath", "must be a string (a path)")
    policy = run_policy(spec, problems, MANAGED_BY)
    if policy is not None:
        one_of(policy, "cleanPodPolicy", "spec.runPolicy", problems, CLEAN_POD_POLICIES)
        non_negative(
            policy, ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"), "spec.runPolicy", problems
        )
        optional_mapping(policy, "schedulingPolicy", "spec.runPolicy", problems)


MPIJOB = register(MPIJobAdapter())
