"""Pieces every kind's adapter is made of: counts, enums, managedBy, conditions, the Workload,
where pod templates are."""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from ..podspec import PodShape, pod_shape
from ..validation import ObjectMeta, Problems, describe, dns1123_subdomain_problem, join, optional_int, required_mapping
from ..workload import PHASES, JobStatus, PodSet, Workload, latest_true_condition, read_path

MAX_INT32 = 2**31 - 1
_PATH_SEGMENT = re.compile(r"[-A-Za-z0-9_.~!$&'()*+,;=:@%]+")


def count(
    parent: Mapping[Any, Any],
    key: str,
    path: str,
    problems: Problems,
    *,
    default: int,
    bounds: tuple[int, int] = (0, MAX_INT32),
    what: str = "",
) -> int:
    """An int32 count (replicas, parallelism, ...), ``default`` when unset, 0 when invalid.
    ``what`` names the role in messages ("for Chief")."""
    value = optional_int(parent, key, path, problems)
    if value is None:
        return default if parent.get(key) is None else 0
    low, high = bounds
    here, suffix = join(path, key), f" for {what}" if what else ""
    if value < 0:
        problems.add(here, f"must not be negative, got {value}")
    elif low == high and value != low:
        problems.add(here, f"must be {low}{suffix}, got {value}")
    elif value < low:
        problems.add(here, f"must be at least {low}{suffix}, got {value}")
    elif value > high:
        problems.add(here, f"must be at most {high}{suffix}, got {value}")
    else:
        return value
    return 0


def one_of(parent: Mapping[Any, Any], key: str, path: str, problems: Problems, allowed: Sequence[str]) -> str | None:
    """An enum field: None when unset, else the value if it is one of ``allowed``."""
    value = parent.get(key)
    if value is None:
        return None
    if value not in allowed:
        shown = repr(value) if isinstance(value, str) else describe(value)
        problems.add(join(path, key), f"must be one of {', '.join(repr(a) for a in allowed)}, got {shown}")
        return None
    return str(value)


def non_negative(parent: Mapping[Any, Any], keys: Sequence[str], path: str, problems: Problems) -> None:
    for key in keys:
        count(parent, key, path, problems, default=0, bounds=(0, 2**63 - 1))


def domain_prefixed_path(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> None:
    """A managedBy of the built-in kinds: "<domain>/<path>", at most 63 characters."""
    value = parent.get(key)
    if value is None:
        return
    here = join(path, key)
    if not isinstance(value, str):
        problems.add(here, f"must be a string, got {describe(value)}")
        return
    domain, slash, rest = value.partition("/")
    if len(value) > 63:
        problems.add(here, "must be at most 63 characters")
    elif not slash or not rest or dns1123_subdomain_problem(domain) or not _PATH_SEGMENT.fullmatch(rest):
        problems.add(here, f"must be a domain-prefixed path such as 'example.com/controller', got {value!r}")


def pod_template_shape(
    holder: Mapping[Any, Any], path: str, problems: Problems, *, required_container: str | None = None
) -> PodShape | None:
    """``holder.template.spec`` (a pod template) as one pod's shape; None if absent."""
    template = required_mapping(holder, "template", path, problems)
    if template is None:
        return None
    pod_spec = required_mapping(template, "spec", join(path, "template"), problems)
    if pod_spec is None:
        return None
    return pod_shape(pod_spec, join(path, "template.spec"), problems, required_container=required_container)


def pod_set(role: str, count: int, shape: PodShape) -> PodSet:
    return PodSet(
        role=role,
        count=count,
        requests=shape.requests,
        limits=shape.limits,
        node_selector=shape.node_selector,
        tolerations=shape.tolerations,
        node_affinity=shape.node_affinity,
    )


def workload(kind: str, api_version: str, meta: ObjectMeta, pod_sets: Sequence[PodSet]) -> Workload:
    return Workload(
        kind=kind,
        api_version=api_version,
        name=meta.name,
        namespace=meta.namespace,
        pod_sets=tuple(pod_sets),
        annotations=meta.annotations,
        labels=meta.labels,
    )


def latest_condition_status(obj: Mapping[str, Any]) -> JobStatus:
    """The training operators' way: conditions are appended, the last true one is the phase,
    and their types are jobdash's phases (Created, Running, Restarting, Suspended, ...)."""
    latest = latest_true_condition(obj)
    phase = str(latest.get("type") or "")
    return JobStatus(phase=phase if phase in PHASES else "", message=str(latest.get("message") or ""))


def condition_status(obj: Mapping[str, Any], phases: Mapping[str, str]) -> JobStatus | None:
    """The first of ``phases`` (condition type -> phase, by priority) whose condition is
    true: Kubernetes-style kinds set conditions by type and flip their status, so the
    order they are listed in says nothing."""
    conditions = read_path(obj, ("status", "conditions"))
    listed = conditions if isinstance(conditions, list) else []
    true = {c.get("type"): c for c in listed if isinstance(c, Mapping) and c.get("status") == "True"}
    for condition_type, phase in phases.items():
        if condition_type in true:
            return JobStatus(phase=phase, message=str(true[condition_type].get("message") or ""))
    return None


def template_at(holder: Any, path: tuple[str, ...]) -> MutableMapping[str, Any] | None:
    """The pod template at ``path`` in ``holder``, None where there is no mapping."""
    found = read_path(holder, path) if isinstance(holder, Mapping) else None
    return found if isinstance(found, MutableMapping) else None


class TemplatesInObject:
    """The part of queueing.capabilities.JobWithPodTemplates every kind shares whose object
    holds all its pod templates ({metadata, spec}): a kind adds only ``pod_templates``."""

    @property
    def pod_spec_path(self) -> tuple[str, ...]:
        return ("spec",)

    def drop_blank(self, obj: MutableMapping[str, Any], template: MutableMapping[str, Any]) -> None:
        """Never: every template is the job's own."""
