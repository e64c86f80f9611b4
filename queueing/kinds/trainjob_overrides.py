"""A TrainJob's spec.podTemplateOverrides (Kubeflow Trainer v2.1): what an entry may hold,
what the trainer's webhook asks of it, and what it changes of the pods the planner places.

Each entry names replicatedJobs of the runtime (targetJobs) and holds pod template metadata
(labels, annotations) and part of a pod spec (nodeSelector, affinity, tolerations,
schedulingGates, volumes, initContainers and containers by name, ...). The trainer applies
the entries in order, each as a strategic merge patch onto the pod template of every
replicatedJob it names: nodeSelector merges key by key, the keyed lists (schedulingGates,
containers, volumes) by name, lists without a key replace the runtime's (tolerations, and
inside affinity, which merges as a map, the node selector terms). An empty list or map is
no change: the trainer's Go types omit them before patching.

Trainer v2.0 called them spec.podSpecOverrides, with the pod spec's fields in each entry
itself; a v2.1 server drops that field, so it is refused with the new spelling.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..node_affinity import required_node_affinity
from ..podspec import pod_tolerations
from ..validation import (
    Problems,
    annotation_map,
    describe,
    index,
    join,
    label_map,
    optional_list,
    optional_mapping,
)
from ..workload import read_path

OVERRIDES = "podTemplateOverrides"
V2_0_OVERRIDES = "podSpecOverrides"
HERE = f"spec.{OVERRIDES}"
POD_SPEC = ("template", "spec", "template", "spec")  # of a replicatedJob
_ENTRY_FIELDS = ("metadata", "spec", "targetJobs")
_SPEC_FIELDS = (
    "affinity",
    "containers",
    "imagePullSecrets",
    "initContainers",
    "nodeSelector",
    "schedulingGates",
    "serviceAccountName",
    "tolerations",
    "volumes",
)
_CONTAINER_FIELDS = ("env", "name", "volumeMounts")
# Their env comes from the TrainJob's trainer and initializer settings, never from overrides.
RESERVED_CONTAINERS = ("dataset-initializer", "model-initializer", "node")


@dataclass(frozen=True)
class Container:
    """An initContainers or containers entry of an override, which must name one of the
    targeted job's containers."""

    path: str
    name: str
    sets_env: bool


@dataclass(frozen=True)
class Override:
    """One entry as written, checked on its own, with what the Workload needs of it."""

    targets: tuple[tuple[str, str], ...]  # (path, name) of each targetJobs entry
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]  # (): the runtime's stay
    affinity: Mapping[str, Any] | None
    containers: tuple[Container, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.targets)


def targets(entry: Mapping[str, Any]) -> list[str]:
    """The replicatedJobs an entry names, whatever else is wrong with it."""
    found = entry.get("targetJobs")
    names = [target.get("name") for target in (found if isinstance(found, list) else ()) if isinstance(target, Mapping)]
    return [name for name in names if isinstance(name, str)]


def read_overrides(spec: Mapping[Any, Any], problems: Problems) -> tuple[Override, ...]:
    """spec.podTemplateOverrides checked as the TrainJob's schema checks them; the runtime
    is not needed for that (check_targets then holds them against it)."""
    if spec.get(V2_0_OVERRIDES) is not None:
        problems.add(
            f"spec.{V2_0_OVERRIDES}",
            f"Trainer v2.1 drops this field (v2.0's name for it): use spec.{OVERRIDES}, "
            "each entry's pod fields under its spec",
        )
    found = []
    for position, entry in enumerate(optional_list(spec, OVERRIDES, "spec", problems) or ()):
        path = index(HERE, position)
        if not isinstance(entry, Mapping):
            problems.add(path, f"must be a mapping with targetJobs, got {describe(entry)}")
            continue
        _unknown(entry, _ENTRY_FIELDS, path, problems, " (pod spec fields such as nodeSelector go under spec)")
        metadata = optional_mapping(entry, "metadata", path, problems)
        if metadata is not None:
            label_map(metadata, "labels", join(path, "metadata"), problems)
            annotation_map(metadata, "annotations", join(path, "metadata"), problems)
        pod = optional_mapping(entry, "spec", path, problems)
        found.append(_override(_targets(entry, path, problems), pod or {}, join(path, "spec"), problems))
    return tuple(found)


def _targets(entry: Mapping[Any, Any], path: str, problems: Problems) -> tuple[tuple[str, str], ...]:
    here = join(path, "targetJobs")
    if entry.get("targetJobs") is None:
        problems.add(here, "required: the runtime's replicatedJobs this entry overrides")
        return ()
    found = []
    for position, target in enumerate(optional_list(entry, "targetJobs", path, problems) or ()):
        target_path = index(here, position)
        if not isinstance(target, Mapping):
            problems.add(target_path, f"must be a mapping with a name, got {describe(target)}")
            continue
        _unknown(target, ("name",), target_path, problems)
        name = target.get("name")
        if name is None or name == "":
            problems.add(join(target_path, "name"), "required: a replicatedJob of the runtime")
        elif not isinstance(name, str):
            problems.add(join(target_path, "name"), f"must be a string, got {describe(name)}")
        else:
            found.append((join(target_path, "name"), name))
    return tuple(found)


def _override(targets: tuple[tuple[str, str], ...], pod: Mapping[Any, Any], here: str, problems: Problems) -> Override:
    _unknown(pod, _SPEC_FIELDS, here, problems)
    node_selector = label_map(pod, "nodeSelector", here, problems)
    tolerations = pod_tolerations(pod, here, problems)
    required_node_affinity(pod, here, problems)  # what the planner reads of it must be valid
    affinity = pod.get("affinity")
    for key in ("schedulingGates", "volumes", "imagePullSecrets"):
        optional_list(pod, key, here, problems)
    account = pod.get("serviceAccountName")
    if account is not None and not isinstance(account, str):
        problems.add(join(here, "serviceAccountName"), f"must be a string, got {describe(account)}")
    containers = [c for key in ("initContainers", "containers") for c in _containers(pod, key, here, problems)]
    return Override(
        targets, node_selector, tolerations, affinity if isinstance(affinity, Mapping) else None, tuple(containers)
    )


def _containers(pod: Mapping[Any, Any], key: str, path: str, problems: Problems) -> list[Container]:
    here = join(path, key)
    found = []
    for position, container in enumerate(optional_list(pod, key, path, problems) or ()):
        container_path = index(here, position)
        if not isinstance(container, Mapping):
            problems.add(container_path, f"must be a mapping with a name, got {describe(container)}")
            continue
        _unknown(container, _CONTAINER_FIELDS, container_path, problems)
        for listed in ("env", "volumeMounts"):
            optional_list(container, listed, container_path, problems)
        name = container.get("name")
        if name is None or name == "":
            problems.add(join(container_path, "name"), "required: a container of the targeted replicatedJobs")
        elif not isinstance(name, str):
            problems.add(join(container_path, "name"), f"must be a string, got {describe(name)}")
        else:
            found.append(Container(container_path, name, bool(container.get("env"))))
    return found


def _unknown(entry: Mapping[Any, Any], known: Sequence[str], path: str, problems: Problems, hint: str = "") -> None:
    # The trainer's schema would drop them without a word, and what they meant with them.
    for key in entry:
        if key not in known:
            problems.add(join(path, key), f"unknown field; expected one of {', '.join(known)}{hint}")


def check_targets(overrides: Sequence[Override], items: Sequence[Any], runtime: str, problems: Problems) -> None:
    """The trainer's webhook: each target is a replicatedJob of the runtime (``items``, its
    replicatedJobs; ``runtime`` names it in messages), each container overridden is one of
    every targeted job's, and the reserved containers take no env."""
    jobs: dict[str, set[str]] = {}
    for item in items:
        name = item.get("name") if isinstance(item, Mapping) else None
        pod = read_path(item, POD_SPEC)
        if isinstance(name, str) and isinstance(pod, Mapping):
            listed = [
                c for key in ("containers", "initContainers") for c in pod.get(key) or () if isinstance(c, Mapping)
            ]
            jobs[name] = {str(c["name"]) for c in listed if isinstance(c.get("name"), str)}
    for override in overrides:
        for path, name in override.targets:
            have = jobs.get(name)
            if have is None:
                problems.add(path, f"must name a replicatedJob of {runtime} ({', '.join(jobs)}), got {name!r}")
                continue
            for container in override.containers:
                if container.name not in have:
                    problems.add(
                        join(container.path, "name"),
                        f"{runtime}'s replicatedJob {name!r} has no container {container.name!r}",
                    )
        for container in override.containers:
            if container.sets_env and container.name in RESERVED_CONTAINERS:
                problems.add(
                    join(container.path, "env"),
                    f"must not be set for the {container.name} container: "
                    "its env comes from spec.trainer or spec.initializer",
                )


def applied(overrides: Sequence[Override], items: Sequence[Any]) -> list[Any]:
    """The runtime's replicatedJobs (``items``, copied where changed) with the pods' placement
    as the overrides make it: nodeSelector merged key by key over the runtime's, tolerations
    and the required node affinity in place of the runtime's where an override sets them."""
    result = list(items)
    copied: set[int] = set()
    for override in overrides:
        if not (override.node_selector or override.tolerations or override.affinity):
            continue
        for position, item in enumerate(result):
            if not isinstance(item, Mapping) or item.get("name") not in override.names:
                continue
            if not isinstance(read_path(item, POD_SPEC), MutableMapping):
                continue  # the runtime's own problem, reported as such
            if position not in copied:
                result[position] = item = copy.deepcopy(item)
                copied.add(position)
            _patch(read_path(item, POD_SPEC), override)
    return result


def _patch(pod: MutableMapping[str, Any], override: Override) -> None:
    selector = pod.get("nodeSelector")
    if override.node_selector and (selector is None or isinstance(selector, Mapping)):
        pod["nodeSelector"] = {**(selector or {}), **override.node_selector}
    if override.tolerations:
        pod["tolerations"] = [dict(t) for t in override.tolerations]
    affinity = pod.get("affinity")
    if override.affinity and (affinity is None or isinstance(affinity, Mapping)):
        pod["affinity"] = _merged(affinity or {}, override.affinity)


def _merged(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A strategic merge patch of an affinity: none of its lists has a merge key, so maps
    merge and anything else replaces. A null is no value: the API server drops it from a
    custom object (the schema has no nullable field), so the trainer never sees it."""
    result = dict(base)
    for key, value in patch.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            below = result.get(key)
            result[key] = _merged(below if isinstance(below, Mapping) else {}, value)
        else:
            result[key] = copy.deepcopy(value)
    return result
