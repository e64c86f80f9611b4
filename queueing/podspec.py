"""Validate a pod spec and work out what one such pod asks the scheduler for.

Shared by every adapter: whatever the job kind, its pods are ordinary pods,
and Kubernetes charges them to quota by the same rules.  The checks here are
the subset of the API server's pod validation that decides whether the
job's pods could ever be created, so a job we admit does not fail later.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .node_affinity import NodeAffinity, required_node_affinity
from .quantity import canonical, is_whole, parse_quantity
from .validation import (
    Problems,
    describe,
    dns1123_label_problem,
    dns1123_subdomain_problem,
    index,
    join,
    label_map,
    optional_list,
    optional_mapping,
)

_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_QUALIFIED_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_TOLERATION_FIELDS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_TOLERATION_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPERATORS = ("Equal", "Exists")


@dataclass(frozen=True)
class PodShape:
    """Per-pod resources (canonical integers) and placement constraints."""

    requests: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    node_affinity: NodeAffinity = ()  # required terms only: preferred ones constrain nothing


@dataclass
class ContainerResources:
    """One container's canonical amounts; requests already include limits-as-requests."""

    requests: dict[str, int]
    limits: dict[str, int]
    sidecar: bool = False


def is_native_resource(name: str) -> bool:
    """Kubernetes' own resources: unprefixed, or in the kubernetes.io namespace."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """Device-plugin style resources such as nvidia.com/gpu."""
    return not is_native_resource(name) and not name.startswith("requests.")


def overcommit_allowed(name: str) -> bool:
    """Whether request may be below limit; not for devices or hugepages."""
    return is_native_resource(name) and not name.startswith("hugepages-")


def pod_shape(
    pod_spec: Mapping[Any, Any], path: str, problems: Problems, *, required_container: str | None = None
) -> PodShape:
    """Validate ``pod_spec`` (found at ``path``) and compute one pod's effective resources.

    ``required_container`` names the container an operator looks for (e.g.
    "tensorflow"); it must be present exactly once.
    """
    names: dict[str, str] = {}
    containers = _containers(pod_spec, "containers", path, problems, names, required=True)
    init_containers = _containers(pod_spec, "initContainers", path, problems, names, required=False)
    app_containers = pod_spec.get("containers")
    if required_container is not None and isinstance(app_containers, (list, tuple)) and app_containers:
        # Unique names (checked above) make "present" mean "exactly once".
        if not any(isinstance(c, Mapping) and c.get("name") == required_container for c in app_containers):
            problems.add(
                join(path, "containers"),
                f"must include a container named {required_container!r} (the operator runs that one)",
            )
    overhead = _quantities(pod_spec, "overhead", path, problems)
    requests, limits = effective_pod_resources(containers, init_containers, overhead)
    return PodShape(
        requests=requests,
        limits=limits,
        node_selector=label_map(pod_spec, "nodeSelector", path, problems),
        tolerations=pod_tolerations(pod_spec, path, problems),
        node_affinity=required_node_affinity(pod_spec, path, problems),
    )


def effective_pod_resources(
    containers: list[ContainerResources],
    init_containers: list[ContainerResources],
    overhead: dict[str, int],
) -> tuple[dict[str, int], dict[str, int]]:
    """Kubernetes' PodRequests/PodLimits: what the scheduler and ResourceQuota charge.

    App containers run together, so they add up; classic init containers run
    one at a time before them, so only the largest matters; sidecar init
    containers (restartPolicy: Always) keep running, so they add to both.
    Overhead is added to every request, but only to limits that are set.
    Limits are the sum of the limits that containers do set; quota rejects
    pods lacking a limit it tracks, and that rule belongs to admission.
    Each container is rounded up to canonical units before summing.
    """
    requests = _combine([c.requests for c in containers], [(c.requests, c.sidecar) for c in init_containers])
    limits = _combine([c.limits for c in containers], [(c.limits, c.sidecar) for c in init_containers])
    for name, amount in overhead.items():
        requests[name] = requests.get(name, 0) + amount
        if name in limits:
            limits[name] += amount
    return requests, limits


def _combine(app: list[dict[str, int]], init: list[tuple[dict[str, int], bool]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for amounts in app:
        _add(total, amounts)
    running_sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for amounts, sidecar in init:
        if sidecar:
            _add(total, amounts)
            _add(running_sidecars, amounts)
            during = dict(running_sidecars)
        else:
            # A classic init container runs alongside the sidecars started before it.
            during = dict(amounts)
            _add(during, running_sidecars)
        _max(init_peak, during)
    _max(total, init_peak)
    return total


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + amount


def _max(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        into[name] = max(into.get(name, 0), amount)


def _containers(
    pod_spec: Mapping[Any, Any],
    key: str,
    path: str,
    problems: Problems,
    names: dict[str, str],
    *,
    required: bool,
) -> list[ContainerResources]:
    here = join(path, key)
    items = optional_list(pod_spec, key, path, problems)
    if items is None:
        if required and pod_spec.get(key) is None:
            problems.add(here, "required: at least one container")
        return []
    if required and not items:
        problems.add(here, "must contain at least one container")
    result = []
    for position, container in enumerate(items):
        container_path = index(here, position)
        if not isinstance(container, Mapping):
            problems.add(container_path, f"must be a mapping, got {describe(container)}")
            continue
        _container_identity(container, container_path, problems, names)
        resources = _container_resources(container, container_path, problems)
        if key == "initContainers":
            resources.sidecar = _restart_policy_is_always(container, container_path, problems)
        result.append(resources)
    return result


def _container_identity(container: Mapping[Any, Any], path: str, problems: Problems, names: dict[str, str]) -> None:
    name = container.get("name")
    if name is None or name == "":
        problems.add(join(path, "name"), "required")
    elif not isinstance(name, str):
        problems.add(join(path, "name"), f"must be a string, got {describe(name)}")
    else:
        problem = dns1123_label_problem(name)
        if problem:
            problems.add(join(path, "name"), problem)
        elif name in names:
            # Names must be unique across containers and initContainers.
            problems.add(join(path, "name"), f"duplicate container name {name!r} (also at {names[name]})")
        else:
            names[name] = path

    image = container.get("image")
    if image is None or (isinstance(image, str) and not image.strip()):
        problems.add(join(path, "image"), "required")
    elif not isinstance(image, str):
        problems.add(join(path, "image"), f"must be a string, got {describe(image)}")


def _restart_policy_is_always(container: Mapping[Any, Any], path: str, problems: Problems) -> bool:
    policy = container.get("restartPolicy")
    if policy is None:
        return False
    if policy != "Always":
        problems.add(join(path, "restartPolicy"), "only 'Always' (a sidecar) is allowed for init containers")
        return False
    return True


def _container_resources(container: Mapping[Any, Any], path: str, problems: Problems) -> ContainerResources:
    resources = optional_mapping(container, "resources", path, problems)
    if resources is None:
        return ContainerResources({}, {})
    return resource_requirements(resources, join(path, "resources"), problems)


def resource_requirements(
    resources: Mapping[Any, Any], here: str, problems: Problems, *, pairs: bool = True
) -> ContainerResources:
    """One ResourceRequirements ({requests, limits}, found at ``here``) in canonical amounts,
    checked as the API server checks a container's; ``pairs=False`` checks each quantity
    but not requests against limits (for a part merged into a container later)."""
    requests = _parsed_quantities(resources, "requests", here, problems)
    limits = _parsed_quantities(resources, "limits", here, problems)

    for name, request in requests.items() if pairs else ():
        request_path = join(join(here, "requests"), name)
        if name in limits:
            limit = limits[name]
            if not overcommit_allowed(name) and request != limit:
                problems.add(
                    request_path,
                    f"request {_shown(resources, 'requests', name)} must equal limit "
                    f"{_shown(resources, 'limits', name)} for {name}",
                )
            elif request > limit:
                problems.add(
                    request_path,
                    f"request {_shown(resources, 'requests', name)} exceeds limit {_shown(resources, 'limits', name)}",
                )
        elif not overcommit_allowed(name):
            problems.add(join(join(here, "limits"), name), f"required: {name} needs a limit equal to its request")

    # A limit without a request requests the limit (API server defaulting).
    effective_requests = {**limits, **requests}
    return ContainerResources(
        requests={name: canonical(name, amount) for name, amount in effective_requests.items()},
        limits={name: canonical(name, amount) for name, amount in limits.items()},
    )


def _quantities(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> dict[str, int]:
    return {name: canonical(name, amount) for name, amount in _parsed_quantities(parent, key, path, problems).items()}


def _parsed_quantities(parent: Mapping[Any, Any], key: str, path: str, problems: Problems) -> dict[str, Fraction]:
    """Valid, non-negative quantities of ``parent[key]`` by resource name; bad entries are reported and skipped."""
    entries = optional_mapping(parent, key, path, problems)
    if entries is None:
        return {}
    here = join(path, key)
    result: dict[str, Fraction] = {}
    for name, raw in entries.items():
        entry_path = join(here, name)
        name_problem = resource_name_problem(name)
        if name_problem:
            problems.add(entry_path, name_problem)
            continue
        try:
            amount = parse_quantity(raw)
            canonical(name, amount)  # range check in the units we will store
        except ValueError as error:
            problems.add(entry_path, _quantity_message(raw, error))
            continue
        if amount < 0:
            problems.add(entry_path, f"must not be negative, got {_show(raw)}")
            continue
        if is_extended_resource(name) and not is_whole(amount):
            problems.add(entry_path, f"must be a whole number for {name}, got {_show(raw)}")
            continue
        result[name] = amount
    return result


def resource_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a container resource, or None if it can."""
    if not isinstance(name, str) or not name:
        return f"resource names must be non-empty strings, got {describe(name)}"
    if "/" not in name:
        if name in _STANDARD_CONTAINER_RESOURCES or name.startswith("hugepages-"):
            return None
        return (
            f"unknown resource {name!r}: use cpu, memory, ephemeral-storage, hugepages-<size>, "
            "or a domain-prefixed extended resource such as nvidia.com/gpu"
        )
    prefix, _, local = name.partition("/")
    if (
        not prefix
        or dns1123_subdomain_problem(prefix)
        or len(local) > 63
        or not _QUALIFIED_NAME_PART.fullmatch(local)
        or (not is_native_resource(name) and not is_extended_resource(name))
    ):
        return f"invalid resource name {name!r}: expected <domain>/<name>, e.g. nvidia.com/gpu"
    return None


def pod_tolerations(pod_spec: Mapping[Any, Any], path: str, problems: Problems) -> tuple[dict[str, Any], ...]:
    """``pod_spec.tolerations`` (found at ``path``), the valid ones cleaned of nulls."""
    items = optional_list(pod_spec, "tolerations", path, problems)
    if items is None:
        return ()
    here = join(path, "tolerations")
    result = []
    for position, toleration in enumerate(items):
        item_path = index(here, position)
        if not isinstance(toleration, Mapping):
            problems.add(item_path, f"must be a mapping, got {describe(toleration)}")
            continue
        before = len(problems.errors)
        cleaned = _toleration(toleration, item_path, problems)
        if len(problems.errors) == before:
            result.append(cleaned)
    return tuple(result)


def _toleration(toleration: Mapping[Any, Any], path: str, problems: Problems) -> dict[str, Any]:
    cleaned: dict[str, Any] = {}
    for key, value in toleration.items():
        if key not in _TOLERATION_FIELDS:
            problems.add(join(path, key), f"unknown field; expected one of {', '.join(sorted(_TOLERATION_FIELDS))}")
        elif value is not None:
            cleaned[key] = value
    for key in ("key", "operator", "value", "effect"):
        if key in cleaned and not isinstance(cleaned[key], str):
            problems.add(join(path, key), f"must be a string, got {describe(cleaned[key])}")
            cleaned.pop(key)
    operator = cleaned.get("operator", "Equal")
    if operator not in _TOLERATION_OPERATORS:
        problems.add(join(path, "operator"), f"must be one of {', '.join(_TOLERATION_OPERATORS)}")
    elif operator == "Exists" and cleaned.get("value"):
        problems.add(join(path, "value"), "must be empty when operator is Exists")
    elif operator == "Equal" and not cleaned.get("key"):
        problems.add(join(path, "operator"), "must be Exists when key is empty (a toleration for every taint)")
    if cleaned.get("effect", "") not in _TOLERATION_EFFECTS:
        problems.add(join(path, "effect"), f"must be one of {', '.join(repr(e) for e in _TOLERATION_EFFECTS)}")
    if "tolerationSeconds" in cleaned:
        seconds = cleaned["tolerationSeconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            problems.add(join(path, "tolerationSeconds"), f"must be an integer, got {describe(seconds)}")
        elif cleaned.get("effect") != "NoExecute":
            problems.add(join(path, "effect"), "must be NoExecute when tolerationSeconds is set")
    return cleaned


def _quantity_message(raw: Any, error: ValueError) -> str:
    if isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
        detail = str(error).partition(": ")[2]
        return f"invalid quantity {_show(raw)}" + (f": {detail}" if detail else "")
    return f"invalid quantity: expected a string or number, got {describe(raw)}"


def _show(raw: Any) -> str:
    return repr(raw) if isinstance(raw, str) else str(raw)


def _shown(resources: Mapping[Any, Any], key: str, name: str) -> str:
    # Quote the user's own spelling ("8", "500m") rather than our canonical form.
    return str(resources[key][name])
