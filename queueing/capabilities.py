"""What a job kind can do beyond the JobAdapter core, each declared by one small protocol
(as Kueue's jobframework declares ``JobWithSkip``, ``JobWithPriorityClass`` and friends).

A caller asks ``isinstance(adapter, JobWithX)``, never ``getattr``: what a kind does not
declare gets the default written beside the protocol. So a kind that does not fit the
Kubeflow mould has a named place for what differs: its own name rule, no suspend flag
(preempted by deleting its object, held only by refusing it), no role label on its pods
(one group), or a start that is not "every pod of the gang Running".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast, runtime_checkable

from .validation import NameRule, dns1035_label_problem
from .workload import JobAdapter, Workload


@runtime_checkable
class JobWithNameRule(Protocol):
    """Names checked as the kind's own API validation checks them (default: a DNS-1035 label)."""

    def name_problem(self, name: str) -> str | None: ...


@runtime_checkable
class JobWithSuspendFlag(Protocol):
    """Suspended by one boolean field (``spec.runPolicy.suspend``, ``spec.suspend``): its
    object can wait in the cluster (the webhook's suspend mode, unsuspend releases) and a
    preempted job is suspended. Without it, a preempted job's object is deleted."""

    @property
    def suspend_path(self) -> tuple[str, ...]: ...


@runtime_checkable
class JobWithPodRoles(Protocol):
    """Its pods carry a label naming their group (a Workload pod set's role). Without it the
    kind has one group, and every pod is of it."""

    @property
    def pod_role_label(self) -> str: ...


@runtime_checkable
class JobWithStartRule(Protocol):
    """When a released job counts as started, if not when every pod of its gang is Running
    (``running``: its Running pods per role, roles in lower case)."""

    def started(self, workload: Workload, running: Mapping[str, int]) -> bool: ...


_DECLARED: dict[tuple[type, type], bool] = {}


def declares(adapter: object, capability: type) -> bool:
    """isinstance(adapter, capability), remembered per adapter class: a capability is a
    kind's class's, and a runtime-checkable protocol's isinstance looks up every member
    each time (the tracker asks for every pod it follows)."""
    key = (type(adapter), capability)
    found = _DECLARED.get(key)
    if found is None:
        found = _DECLARED[key] = isinstance(adapter, capability)
    return found


def name_rule(adapter: JobAdapter | None) -> NameRule:
    return cast(JobWithNameRule, adapter).name_problem if declares(adapter, JobWithNameRule) else dns1035_label_problem


def suspend_path(adapter: JobAdapter) -> tuple[str, ...] | None:
    """Where its suspend flag lives, None when it has none."""
    return cast(JobWithSuspendFlag, adapter).suspend_path if declares(adapter, JobWithSuspendFlag) else None


def role_label(adapter: JobAdapter) -> str | None:
    return cast(JobWithPodRoles, adapter).pod_role_label if declares(adapter, JobWithPodRoles) else None


def has_start_rule(adapter: JobAdapter) -> bool:
    return declares(adapter, JobWithStartRule)


def started(adapter: JobAdapter, workload: Workload, running: Mapping[str, int]) -> bool:
    if declares(adapter, JobWithStartRule):
        return cast(JobWithStartRule, adapter).started(workload, running)
    return workload.pods > 0 and sum(running.values()) >= workload.pods
