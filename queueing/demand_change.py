"""Whether an edit of a job's object changes what the job asks of the cluster, and what.

Kueue stops a job whose pod sets no longer match its Workload (jobframework's
EquivalentToWorkload); jobdash's webhook refuses such an edit of an admitted job, and
applies it to a queued one. Both ask ``demand_change(adapter, old, new)``, which reads the
two objects through the kind's adapter, as a submission is read, and compares:

- the Workload's pod sets, role by role: how many pods, each pod's requests and limits (as
  Kubernetes counts them: containers summed, init containers' largest, sidecars), and where
  they may run (nodeSelector, tolerations, required node affinity);
- what of each pod template the Workload does not keep but the scheduler reads: the whole
  affinity (preferred terms, pod affinity and anti-affinity) and the priorityClassName;
- an elastic role's range (capabilities.JobWithElasticRange): minimum, maximum, replicas;
- the annotations jobdash reads to place and plan a job (READ_ANNOTATIONS).

What jobdash itself puts on an object around a run is not the job's demand and is ignored:
the suspend flag, the placement gate (placement.restore), jobdash's labels and annotations
(everything of metadata but the name, the namespace and READ_ANNOTATIONS). So is everything
else a user may change without changing the demand: labels, other annotations, images,
commands, env, volumes.

``grew``: some ResourceQuota key of the new demand is above the old one (what decides
whether a queued job keeps its place).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, cast

from . import capabilities, placement
from .errors import ManifestError
from .eta import DURATION_ANNOTATION
from .quantity import format_quantity
from .topology_request import (
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    SLICE_REQUIRED_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
)
from .workload import JobAdapter, PodSet, RuntimeSource, Workload, read_path

# The annotations jobdash reads of a job to place and plan it.
READ_ANNOTATIONS = (
    REQUIRED_ANNOTATION,
    PREFERRED_ANNOTATION,
    SLICE_REQUIRED_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    DURATION_ANNOTATION,
)
# What of a pod template's spec the scheduler reads and the Workload does not keep.
TEMPLATE_FIELDS = ("affinity", "priorityClassName")


@dataclass(frozen=True)
class DemandChange:
    """``changes``: what changed, one phrase each, for people ("Worker: 4 -> 40 pods")."""

    changes: tuple[str, ...] = ()
    grew: bool = False

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __str__(self) -> str:
        return "; ".join(self.changes)


NO_CHANGE = DemandChange()


def demand_change(
    adapter: JobAdapter, old: Mapping[str, Any], new: Mapping[str, Any], runtimes: RuntimeSource | None = None
) -> DemandChange:
    """What ``new`` asks of the cluster beyond or other than ``old`` (both objects of
    ``adapter``'s kind). ``runtimes``: what the job refers to (a TrainJob's runtime), read
    only when the two differ. An edit that makes a valid job invalid is a change (its
    demand cannot be read any more); one of a job jobdash cannot read at all is a change
    when anything it compares differs."""
    if old.get("spec") == new.get("spec") and _read(old) == _read(new):
        return NO_CHANGE  # the usual update (metadata, a controller's): nothing copied
    before, after = comparable(adapter, old), comparable(adapter, new)
    if before == after:
        return NO_CHANGE
    try:
        was = adapter.validate_and_build(before, runtimes)
    except ManifestError as error:
        return _unreadable(adapter, before, after, error)
    try:
        now = adapter.validate_and_build(after, runtimes)
    except ManifestError as error:
        problems = "; ".join(str(e) for e in error.errors)
        return DemandChange((f"the edited {adapter.kind} is not a valid job: {problems}",), grew=True)
    changes = _pod_set_changes(was, now)
    changes += _template_changes(adapter, before, after)
    changes += _elastic_changes(adapter, before, after)
    changes += _annotation_changes(before, after)
    return DemandChange(tuple(changes), grew=grew(was, now)) if changes else NO_CHANGE


def comparable(adapter: JobAdapter, obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without what is never demand: status, the suspend flag, the placement gate,
    metadata but its name, namespace and READ_ANNOTATIONS."""
    found = placement.restore(adapter, {key: value for key, value in obj.items() if key != "status"})
    metadata = found.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    kept: dict[str, Any] = {key: metadata[key] for key in ("name", "namespace", "generateName") if key in metadata}
    annotations = metadata.get("annotations")
    if isinstance(annotations, Mapping):
        read = {key: annotations[key] for key in READ_ANNOTATIONS if key in annotations}
        if read:
            kept["annotations"] = read
    found["metadata"] = kept
    flag = capabilities.suspend_path(adapter)
    if flag is not None:
        holder = read_path(found, flag[:-1])
        if isinstance(holder, MutableMapping) and flag[-1] in holder:
            del holder[flag[-1]]  # (restore copied obj: the caller's stays as it was)
    return found


def grew(was: Workload, now: Workload) -> bool:
    """Whether any ResourceQuota key of ``now``'s demand is above ``was``'s."""
    before, after = was.quota_demand(), now.quota_demand()
    return any(amount > before.get(key, 0) for key, amount in after.items())


def _unreadable(
    adapter: JobAdapter, before: Mapping[str, Any], after: Mapping[str, Any], error: ManifestError
) -> DemandChange:
    """The old object is no job jobdash can read (a TrainJob whose runtime is gone): any
    difference in what would be compared is a change."""
    if _templates(adapter, before) == _templates(adapter, after) and before.get("spec") == after.get("spec"):
        return _annotations_only(before, after)
    problems = "; ".join(str(e) for e in error.errors)
    return DemandChange((f"its spec (jobdash cannot read the job's demand: {problems})",), grew=True)


def _annotations_only(before: Mapping[str, Any], after: Mapping[str, Any]) -> DemandChange:
    changes = _annotation_changes(before, after)
    return DemandChange(tuple(changes)) if changes else NO_CHANGE


def _pod_set_changes(was: Workload, now: Workload) -> list[str]:
    old_sets = {pod_set.role: pod_set for pod_set in was.pod_sets}
    new_sets = {pod_set.role: pod_set for pod_set in now.pod_sets}
    changes = []
    for role in [*old_sets, *(role for role in new_sets if role not in old_sets)]:
        before, after = old_sets.get(role), new_sets.get(role)
        if after is None:
            changes.append(f"{role}: removed (it had {_pods(before)})")
        elif before is None:
            changes.append(f"{role}: added ({_pods(after)})")
        else:
            changes.extend(f"{role}: {change}" for change in _pod_set_change(before, after))
    return changes


def _pods(pod_set: PodSet | None) -> str:
    count = pod_set.count if pod_set is not None else 0
    return f"{count} pod{'' if count == 1 else 's'}"


def _pod_set_change(before: PodSet, after: PodSet) -> list[str]:
    changes = []
    if before.count != after.count:
        changes.append(f"{before.count} -> {_pods(after)}")
    for which in ("requests", "limits"):
        old_amounts, new_amounts = getattr(before, which), getattr(after, which)
        for resource in sorted(set(old_amounts) | set(new_amounts)):
            if old_amounts.get(resource) != new_amounts.get(resource):
                shown = (_amount(resource, amounts.get(resource)) for amounts in (old_amounts, new_amounts))
                changes.append(f"{which} {resource} per pod {' -> '.join(shown)}")
    if before.node_selector != after.node_selector:
        changes.append(f"nodeSelector {dict(before.node_selector)} -> {dict(after.node_selector)}")
    if before.tolerations != after.tolerations:
        changes.append("tolerations")
    if before.node_affinity != after.node_affinity:
        changes.append("required node affinity")
    return changes


def _amount(resource: str, amount: int | None) -> str:
    return "none" if amount is None else format_quantity(resource, amount)


def _templates(adapter: JobAdapter, obj: Mapping[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """role -> TEMPLATE_FIELDS of each of its templates (a TrainJob's may have several)."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    # Asked for no roles, no kind adds a template: obj is only read.
    for role, template in capabilities.pod_templates(adapter, cast(MutableMapping[str, Any], obj)):
        spec = capabilities.template_pod_spec(adapter, template) or {}
        found.setdefault(role, []).append(tuple(spec.get(name) for name in TEMPLATE_FIELDS))
    return found


def _template_changes(adapter: JobAdapter, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    old_templates, new_templates = _templates(adapter, before), _templates(adapter, after)
    changes = []
    for role in dict.fromkeys([*old_templates, *new_templates]):
        old_fields = old_templates.get(role, [])
        new_fields = new_templates.get(role, [])
        for position, name in enumerate(TEMPLATE_FIELDS):
            old_values = [fields[position] for fields in old_fields if fields[position] is not None]
            new_values = [fields[position] for fields in new_fields if fields[position] is not None]
            if old_values != new_values:
                changes.append(f"{role}: {name}")
    return changes


def _elastic_changes(adapter: JobAdapter, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    old_ranges, new_ranges = capabilities.elastic_range(adapter, before), capabilities.elastic_range(adapter, after)
    changes = []
    for role in dict.fromkeys([*old_ranges, *new_ranges]):
        old_range, new_range = old_ranges.get(role), new_ranges.get(role)
        if old_range != new_range:
            changes.append(f"{role}: elastic range {_range(old_range)} -> {_range(new_range)}")
    return changes


def _range(found: tuple[int, int, int] | None) -> str:
    if found is None:
        return "none"
    low, high, replicas = found
    return f"{low}-{high} ({replicas} replicas)"


def _read(obj: Mapping[str, Any]) -> list[Any]:
    annotations = read_path(obj, ("metadata", "annotations"))
    found = annotations if isinstance(annotations, Mapping) else {}
    return [found.get(key) for key in READ_ANNOTATIONS]


def _annotation_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    old_annotations = read_path(before, ("metadata", "annotations")) or {}
    new_annotations = read_path(after, ("metadata", "annotations")) or {}
    changes = []
    for key in READ_ANNOTATIONS:
        if old_annotations.get(key) != new_annotations.get(key):
            changes.append(f"annotation {key} {old_annotations.get(key)!r} -> {new_annotations.get(key)!r}")
    return changes
