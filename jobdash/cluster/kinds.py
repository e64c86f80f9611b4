"""The job kinds jobdash manages, as the cluster side sees them: queueing's adapters
(one per kind) give the API resource, where suspend lives, how pods are labelled and how
status reads; everything here is generic over them. The official client's
CustomObjectsApi serves any resource by group, version and plural (batch/v1 Jobs too), so
one generic client does for every kind: adding a kind is its adapter in queueing/kinds/."""

from collections.abc import Iterable, Mapping
from typing import Any

import queueing  # noqa: F401  (registers every kind's adapter)
from queueing import capabilities
from queueing.workload import BY_KEY, JobAdapter, Workload, adapter_for, read_path, resource_key

from .gateway import JOB_ID_LABEL, ObjectKey, PodInfo


def adapters() -> list[JobAdapter]:
    return list(BY_KEY.values())


def keys() -> list[str]:
    return list(BY_KEY)


def object_keys() -> list[str]:
    """The kinds whose jobs are objects of their own (every kind but those of pods)."""
    return [key for key, found in BY_KEY.items() if not capabilities.objects_are_pods(found)]


def objects_are_pods(kind_key: str) -> bool:
    """Whether a job of this kind is its pods, with no parent object (a plain Pod, a pod group)."""
    return capabilities.objects_are_pods(BY_KEY[kind_key])


def can_take_back(kind_key: str) -> bool:
    return capabilities.can_take_back(BY_KEY[kind_key])


def adapter(kind_key: str) -> JobAdapter:
    return BY_KEY[kind_key]


def key_of(api_version: str, kind: str) -> str:
    """The kind key of a job stored with this apiVersion and kind ("tfjobs.kubeflow.org")."""
    found = adapter_for(api_version, kind)
    if found is None:
        raise KeyError(f"jobdash does not manage {kind} ({api_version})")
    return resource_key(found)


def group_version_plural(kind_key: str) -> tuple[str, str, str]:
    found = BY_KEY[kind_key]
    group, _, version = found.api_version.rpartition("/")
    return group, version, found.plural


def display_name(kind_key: str) -> str:
    return BY_KEY[kind_key].kind


def pod_labels() -> frozenset[str]:
    """The labels the watch cache keeps of a pod: those naming its job and its role."""
    labels = {a.pod_job_label for a in adapters()}
    labels.update(label for a in adapters() if (label := capabilities.role_label(a)))
    if any(capabilities.objects_are_pods(a) for a in adapters()):
        labels.add(JOB_ID_LABEL)  # a job of pods is bound to its pods by it
    return frozenset(labels)


def job_label_keys() -> frozenset[str]:
    return frozenset(a.pod_job_label for a in adapters())


def pods_key(key: ObjectKey) -> tuple[str, str, str]:
    """Where the watch cache files a job's pods: (the kind's job label, namespace, name)."""
    kind_key, namespace, name = key
    return (BY_KEY[kind_key].pod_job_label, namespace, name)


def pod_role(kind_key: str, pod: PodInfo, roles: Iterable[str] = ()) -> str:
    """The pod's group (a Workload pod set's role, compared without case). A kind whose
    pods carry no role label has one group: its only role."""
    label = capabilities.role_label(BY_KEY[kind_key])
    if label:
        return pod.labels.get(label, "")
    only = list(roles)
    return only[0] if len(only) == 1 else ""


def started(kind_key: str, workload: Workload, pods: Iterable[PodInfo]) -> bool:
    """Whether a released job counts as started, from its pods (the kind's start rule;
    by default every pod of its gang Running)."""
    adapter = BY_KEY[kind_key]
    if not capabilities.has_start_rule(adapter):  # the default needs no roles: count them all
        running_pods = sum(1 for pod in pods if pod.phase == "Running" and not pod.deleting)
        return workload.pods > 0 and running_pods >= workload.pods
    roles = [ps.role for ps in workload.pod_sets]
    running: dict[str, int] = {}
    for pod in pods:
        if pod.phase == "Running" and not pod.deleting:
            role = pod_role(kind_key, pod, roles).lower()
            running[role] = running.get(role, 0) + 1
    return capabilities.started(adapter, workload, running)


def can_suspend(kind_key: str) -> bool:
    """Whether the kind has a suspend flag (preemption suspends it, else deletes it)."""
    return capabilities.suspend_path(BY_KEY[kind_key]) is not None


def suspend_patch(kind_key: str, suspended: bool) -> dict[str, Any]:
    """A merge patch setting the kind's suspend flag."""
    path = capabilities.suspend_path(BY_KEY[kind_key])
    if path is None:
        raise ValueError(f"{kind_key} has no suspend flag")
    patch: dict[str, Any] = suspended  # type: ignore[assignment]
    for step in reversed(path):
        patch = {step: patch}
    return patch


def is_suspended(kind_key: str, obj: Mapping[str, Any]) -> bool:
    path = capabilities.suspend_path(BY_KEY[kind_key])
    return path is not None and read_path(obj, path) is True


def not_taken_back(kind_key: str) -> str:
    return capabilities.not_taken_back(BY_KEY[kind_key])
