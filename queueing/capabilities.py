"""What a job kind can do beyond the JobAdapter core, each declared by one small protocol
(as Kueue's jobframework declares ``JobWithSkip``, ``JobWithPriorityClass`` and friends).

A caller asks ``isinstance(adapter, JobWithX)``, never ``getattr``: what a kind does not
declare gets the default written beside the protocol. So a kind that does not fit the
Kubeflow mould has a named place for what differs: its own name rule, no suspend flag
(preempted by deleting its object, held only by refusing it), no role label on its pods
(one group), a start that is not "every pod of the gang Running", or pod templates that are
not all in its object.  JobOfPods, and ``declares`` that each question here asks, are in
capability_base.py (workload.py needs them, and this module builds on workload.py).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from .capability_base import JobOfPods as JobOfPods
from .capability_base import declares as declares
from .capability_base import objects_are_pods as objects_are_pods
from .validation import NameRule, dns1035_label_problem
from .workload import JobAdapter, JobStatus, Workload


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


@runtime_checkable
class JobWithPodTemplates(Protocol):
    """Where its pods' templates are in its object, for a caller to change them in place on a
    copy (queueing.placement's gate, as Kueue's RunWithPodSetsInfo and RestorePodSetsInfo
    change a job's pod sets). Without it nothing is known of its templates, and its pods go
    wherever the scheduler puts them.

    ``pod_templates(obj, roles)``: ``(role, template)`` for every template in ``obj``, the
    role a Workload pod set's (compared without case), the template the mapping inside
    ``obj``. A kind whose object need not hold a template for each role (a TrainJob's come
    from its runtime) adds a blank one to ``obj`` for each of ``roles`` it lacks; other
    kinds ignore ``roles``. ``pod_spec_path``: where in a template the pod's spec fields
    (schedulingGates, nodeSelector, ...) are. ``drop_blank(obj, template)``: removes
    ``template`` from ``obj`` if it is blank, as ``pod_templates`` adds them, with the
    container that leaves empty; the job's own templates stay."""

    @property
    def pod_spec_path(self) -> tuple[str, ...]: ...

    def pod_templates(
        self, obj: MutableMapping[str, Any], roles: Sequence[str] = ()
    ) -> list[tuple[str, MutableMapping[str, Any]]]: ...

    def drop_blank(self, obj: MutableMapping[str, Any], template: MutableMapping[str, Any]) -> None: ...


@runtime_checkable
class JobNotTakenBack(Protocol):
    """Once released it cannot be taken back and released again: nothing can suspend it and
    nothing could make its objects again (a plain Pod's creator does not retry). It is never
    a preemption victim, and a take-back (start timeout, requeue) ends it as Failed, its
    objects deleted. ``not_taken_back``: why, for people."""

    @property
    def not_taken_back(self) -> str: ...


@runtime_checkable
class JobWithElasticRange(Protocol):
    """Some of its roles run between a minimum and a maximum of pods (an elastic PyTorchJob's
    Worker): its pod set asks the replicas as written, with the range as PodSet.minimum and
    maximum; the planner may admit it at fewer (down to the minimum) and grow it back.
    ``elastic_range(obj)``: role -> (minimum, maximum, replicas), with the kind's defaults,
    for the roles that are elastic in ``obj``; none without it."""

    def elastic_range(self, obj: Mapping[str, Any]) -> Mapping[str, tuple[int, int, int]]: ...

    def scale_patch(self, counts: Mapping[str, int]) -> dict[str, Any]:
        """The merge patch that runs ``counts`` (role -> pods) of its elastic roles: its
        operator's own scaling path (it makes or removes the pods)."""
        ...


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


def pod_templates(
    adapter: JobAdapter, obj: MutableMapping[str, Any], roles: Sequence[str] = ()
) -> list[tuple[str, MutableMapping[str, Any]]]:
    """Its pod templates in ``obj``; none for a kind that does not say where they are."""
    if declares(adapter, JobWithPodTemplates):
        return cast(JobWithPodTemplates, adapter).pod_templates(obj, roles)
    return []


def template_pod_spec(adapter: JobAdapter, template: Mapping[str, Any]) -> MutableMapping[str, Any] | None:
    """The mapping of a template's pod spec fields, None where the template has none."""
    if not declares(adapter, JobWithPodTemplates):
        return None
    found: Any = template
    for step in cast(JobWithPodTemplates, adapter).pod_spec_path:
        found = found.get(step) if isinstance(found, Mapping) else None
    return found if isinstance(found, MutableMapping) else None


def elastic_range(adapter: JobAdapter, obj: Mapping[str, Any]) -> Mapping[str, tuple[int, int, int]]:
    if declares(adapter, JobWithElasticRange):
        return cast(JobWithElasticRange, adapter).elastic_range(obj)
    return {}


def scaled(adapter: JobAdapter, obj: Mapping[str, Any], counts: Mapping[str, int]) -> dict[str, Any]:
    """``obj`` with ``counts`` of its elastic roles (a partly admitted job's object as sent)."""
    if not counts or not declares(adapter, JobWithElasticRange):
        return dict(obj)
    return cast(dict[str, Any], merge_patch(obj, cast(JobWithElasticRange, adapter).scale_patch(counts)))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``patch`` over ``target`` (neither changed)."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def drop_blank(adapter: JobAdapter, obj: MutableMapping[str, Any], template: MutableMapping[str, Any]) -> None:
    if declares(adapter, JobWithPodTemplates):
        cast(JobWithPodTemplates, adapter).drop_blank(obj, template)


def status_of_pods(adapter: JobAdapter, phases: Sequence[str], total: int) -> JobStatus:
    return cast(JobOfPods, adapter).status_of_pods(phases, total)


def can_take_back(adapter: JobAdapter) -> bool:
    """Whether a released job of this kind can be taken back (suspended or deleted) and
    released again later: every kind but those declaring JobNotTakenBack."""
    return not declares(adapter, JobNotTakenBack)


def not_taken_back(adapter: JobAdapter) -> str:
    return cast(JobNotTakenBack, adapter).not_taken_back if declares(adapter, JobNotTakenBack) else ""


def waiting_demand(adapter: JobAdapter | None, workload: Workload, *, count_object: bool) -> dict[str, int]:
    """What admitting a waiting job adds to its namespace's quota. A job of pods holds its
    quota already (ResourceQuota charged each pod at its creation, gated or not, and refused
    the ones beyond it), so admitting it adds nothing: every key zero, none left out."""
    demand = workload.quota_demand(count_object=count_object)
    if adapter is not None and declares(adapter, JobOfPods):
        return dict.fromkeys(demand, 0)
    return demand
