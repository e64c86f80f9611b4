"""A released job's pods run exactly where the planner placed them (as Kueue's topology-aware
scheduling does it).

At release every pod template of the job gets the scheduling gate ``GATE`` (``hold``), so
each pod is created gated and no scheduler places it; the dispatcher then gives each gated
pod the nodeSelector of its planned node and removes the gate (``assign`` says which pod
gets which node). A role whose pods the plan puts all on one node needs neither: its
template names that node (``one_node_roles``; the job object's ``PLACED_ON`` annotation
says which roles hold named), and its pods go there as they are made, one write per job
instead of one per pod. On suspend the templates go back to what the user wrote
(``restore``), as Kueue's RunWithPodSetsInfo and RestorePodSetsInfo do with a job's pod
sets. Where a kind's templates are, and what a blank one is, is the kind's
(capabilities.JobWithPodTemplates); what is done to them is here, the same for every kind.

``restore(hold(x)) == x`` for every ``x`` that carries nothing of jobdash's (no ``GATE``, no
``PLACED_ON``) and no container ``hold`` fills that is there but empty: a
``schedulingGates`` that is ``[]`` or null, a ``nodeSelector`` or the object's annotations
that are ``{}`` or null; for a TrainJob also a ``podTemplateOverrides`` that is, or an
override entry that names one job and holds nothing else but a ``spec`` that is empty (or
holds only such a ``schedulingGates``). Each means what its absence means, and ``hold`` can
only make of it what it makes of its absence (only a marker of jobdash's could say which it
was, and any place for one reaches the Workload or what the job's controller makes), so
restore leaves it absent. (A TrainJob's entry without a ``spec`` is not a template: ``hold``
leaves it alone, and gives the jobs only such entries name an entry of their own.)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, cast

from . import capabilities
from .topology_request import HOSTNAME
from .workload import JobAdapter, Workload

GATE = "jobdash.io/placement"
GATES = "schedulingGates"
SELECTOR = "nodeSelector"
# On the job's object: {lower-case role: node} of the templates hold named a node in (JSON)
PLACED_ON = "jobdash.io/placed-on"


def one_node_roles(
    workload: Workload, placement: Iterable[Slot], cards: Iterable[tuple[str, int, Any]] = ()
) -> dict[str, str]:
    """The roles (lower-case) whose planned pods all share one node, each with that node:
    their template can name it. Not an elastic role (pods beyond the plan must wait for an
    admission), nor one with pods on shared cards (each pod is pinned to its own card)."""
    elastic = {ps.role.lower() for ps in workload.pod_sets if ps.minimum is not None or ps.maximum is not None}
    carded = {role.lower() for role, _, _ in cards}
    nodes: dict[str, set[str]] = {}
    for role, _, node in placement:
        nodes.setdefault(role.lower(), set()).add(node)
    return {
        role: next(iter(found))
        for role, found in nodes.items()
        if len(found) == 1 and role not in elastic and role not in carded
    }


def hold(
    adapter: JobAdapter, obj: Mapping[str, Any], workload: Workload, nodes: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A copy of ``obj`` whose pods wait for their planned nodes: the template of a role
    ``nodes`` names (lower-case role -> node, ``one_node_roles``) names that node in its
    nodeSelector, every other template has ``GATE`` last in its schedulingGates (once: a
    template that has it is left alone); a node an earlier hold named is taken away first,
    everything of the user's is as it was. ``workload``: what ``obj`` validates to; its
    roles are the templates a kind may have to add (a TrainJob's override entries). A
    template whose schedulingGates is not a list is left as it is (``held`` then says so):
    it could not be gated without losing what it holds."""
    held_obj = copy.deepcopy(dict(obj))
    before = _placed(held_obj)
    templates = capabilities.pod_templates(adapter, held_obj, _roles(workload))
    for role, template in templates:
        spec = capabilities.template_pod_spec(adapter, template)
        if spec is not None:
            _unnamed(spec, before.get(role.lower()))
    named = _named(templates, nodes or {})
    placed: dict[str, str] = {}
    ours: set[int] = set()  # the templates named here
    for role, template in templates:
        spec = capabilities.template_pod_spec(adapter, template)
        node = named.get(id(template))
        now = None if spec is None or node is None else _named_by_selector(spec, node)
        if spec is not None and node is not None and now is not None:
            if now or id(template) in ours:
                ours.add(id(template))
                placed[role.lower()] = node
            _ungated(spec)
            continue
        gates = None if spec is None else spec.get(GATES)
        if spec is not None and gates is None:
            spec[GATES] = [{"name": GATE}]
        elif isinstance(gates, list) and not _gated(gates):
            gates.append({"name": GATE})
    if placed:
        metadata = held_obj.setdefault("metadata", {})
        annotations = metadata.get("annotations") or {}
        metadata["annotations"] = {**annotations, PLACED_ON: json.dumps(placed, sort_keys=True)}
    return held_obj


def _named_by_selector(spec: MutableMapping[str, Any], node: str) -> bool | None:
    """Whether the template's pods go to ``node`` by its nodeSelector: True where it names
    it now, False where it did already (the user's own, or a TrainJob entry's named on an
    earlier role's visit), None where it cannot: the user's names another node, or is not
    a mapping (then the gate it is)."""
    selector = spec.get(SELECTOR)
    if isinstance(selector, Mapping) and selector.get(HOSTNAME) == node:
        return False
    if selector is None or isinstance(selector, MutableMapping) and HOSTNAME not in selector:
        spec[SELECTOR] = {**(selector or {}), HOSTNAME: node}
        return True
    return None


def _named(templates: list[tuple[str, MutableMapping[str, Any]]], nodes: Mapping[str, str]) -> dict[int, str]:
    """Per template (by identity), the node its pods go to: only where every role it is the
    template of (a TrainJob's entry may serve several) has the same one node."""
    seen: dict[int, set[str | None]] = {}
    for role, template in templates:
        seen.setdefault(id(template), set()).add(nodes.get(role.lower()))
    return {key: node for key, found in seen.items() if len(found) == 1 for node in found if node is not None}


def restore(adapter: JobAdapter, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` without what ``hold`` added: ``GATE`` out of every template, the
    node out of the nodeSelector of every template ``PLACED_ON`` names, a schedulingGates or
    nodeSelector it leaves empty and a template it leaves blank removed (those hold made),
    and ``PLACED_ON``. A template without either is not touched."""
    restored = copy.deepcopy(dict(obj))
    placed = _placed(restored)
    # A TrainJob entry naming several jobs comes once for each: the first visit restores it.
    for role, template in capabilities.pod_templates(adapter, restored):
        spec = capabilities.template_pod_spec(adapter, template)
        if spec is not None and (_unnamed(spec, placed.get(role.lower())) | _ungated(spec)):
            capabilities.drop_blank(adapter, restored, template)
    return restored


def _placed(obj: MutableMapping[str, Any]) -> dict[str, str]:
    """The roles ``PLACED_ON`` names (taken out of ``obj``, with annotations it leaves empty)."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, MutableMapping):
        return {}
    annotations = metadata.get("annotations")
    if not isinstance(annotations, MutableMapping) or PLACED_ON not in annotations:
        return {}
    try:
        placed = json.loads(annotations.pop(PLACED_ON))
    except (TypeError, ValueError):
        placed = {}
    if not annotations:
        del metadata["annotations"]
    return {str(k): str(v) for k, v in placed.items()} if isinstance(placed, dict) else {}


def _unnamed(spec: MutableMapping[str, Any], node: str | None) -> bool:
    selector = spec.get(SELECTOR)
    if node is None or not isinstance(selector, MutableMapping) or selector.get(HOSTNAME) != node:
        return False
    del selector[HOSTNAME]
    if not selector:
        del spec[SELECTOR]
    return True


def _ungated(spec: MutableMapping[str, Any]) -> bool:
    gates = spec.get(GATES)
    if not isinstance(gates, list) or not _gated(gates):
        return False
    kept = [gate for gate in gates if not _ours(gate)]
    if kept:
        spec[GATES] = kept
    else:
        del spec[GATES]
    return True


def held(adapter: JobAdapter, obj: Mapping[str, Any], workload: Workload) -> bool:
    """Whether every pod of the job would wait for its planned node: every role of
    ``workload`` has a template in ``obj`` and every template carries ``GATE`` or names the
    node ``PLACED_ON`` says for its role."""
    # Asked for no roles, a kind adds no template: obj is only read.
    templates = capabilities.pod_templates(adapter, cast(MutableMapping[str, Any], obj))
    covered = {role.lower() for role, _ in templates}
    if not templates or any(role.lower() not in covered for role in _roles(workload)):
        return False
    placed = _placed(copy.deepcopy(dict(obj)))
    for role, template in templates:
        spec = capabilities.template_pod_spec(adapter, template)
        gates = None if spec is None else spec.get(GATES)
        selector = None if spec is None else spec.get(SELECTOR)
        named = (
            isinstance(selector, Mapping) and role.lower() in placed and selector.get(HOSTNAME) == placed[role.lower()]
        )
        if not named and (not isinstance(gates, list) or not _gated(gates)):
            return False
    return True


def _roles(workload: Workload) -> list[str]:
    return [pod_set.role for pod_set in workload.pod_sets]


def _ours(gate: Any) -> bool:
    return isinstance(gate, Mapping) and gate.get("name") == GATE


def _gated(gates: list[Any]) -> bool:
    return any(_ours(gate) for gate in gates)


# --- which gated pod goes to which planned node --------------------------------------------

Slot = tuple[str, int, str]  # (role, index, node): one pod of the planner's placement


@dataclass(frozen=True)
class JobPod:
    """One of a released job's pods, as the dispatcher sees it."""

    name: str
    role: str  # its pod set's, in any case
    index: int | None = None  # its number within its role, where its labels say one
    gated: bool = False  # still held by GATE
    node: str = ""  # the node it is bound to or selected for; "" for neither
    cards: tuple[str, ...] = ()  # the shared GPU cards it names (its slot's, once pinned)
    terminating: bool = False
    ended: bool = False  # Succeeded or Failed: its slot is free for the pod that comes next


@dataclass(frozen=True)
class Assignment:
    nodes: Mapping[str, str] = field(default_factory=dict)  # gated pod's name -> its node
    unassigned: tuple[str, ...] = ()  # gated pods beyond the plan: no slot of their role left
    # gated pod's name -> its slot's index (what it is pinned by; not compared: the nodes say the decision)
    indexes: Mapping[str, int] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", MappingProxyType(dict(self.nodes)))
        object.__setattr__(self, "indexes", MappingProxyType(dict(self.indexes)))


def assign(
    placement: Iterable[Slot], pods: Iterable[JobPod], cards: Mapping[tuple[str, int], tuple[str, ...]] | None = None
) -> Assignment:
    """Which gated pod runs on which node of ``placement`` (the planner's: one slot per
    pod). Live pods past the gate hold slots already: each uses up one of its role, on its
    own node where one is free (of its own index first), else any of its role (by count:
    not every kind numbers its pods as the planner does, and a pod may run where no slot
    is). Then each gated pod gets a free slot of its role: on the node it is already
    selected for if one is free there, else the one of its own index, else the lowest free
    one, pods in index order. Terminating and ended pods hold nothing and get nothing (a
    batch Job's next wave, a restarted pod, takes the slot an ended one leaves). The answer
    does not depend on the order of either input. ``cards``: the shared GPU cards of slots
    (by lower-case role and index, named as pods name them); a pod that names cards holds
    only a slot of those cards on its node, so a card is never handed out twice."""
    free: dict[str, list[tuple[int, str, tuple[str, ...]]]] = {}
    for role, index, node in placement:
        free.setdefault(role.lower(), []).append((index, node, (cards or {}).get((role.lower(), index), ())))
    for slots in free.values():
        slots.sort()
    live = sorted(
        (pod for pod in pods if not pod.terminating and not pod.ended),
        key=lambda p: (p.name, p.role, p.index is None, p.index or 0, p.gated, p.node),
    )
    gated = [pod for pod in live if pod.gated]
    # A pod past the gate takes a slot a gated pod's index names last, so that a pod made
    # again for a slot (same index) goes back to that slot's node.
    wanted: dict[str, set[int]] = {}
    for pod in gated:
        if pod.index is not None:
            wanted.setdefault(pod.role.lower(), set()).add(pod.index)

    holding = [pod for pod in live if not pod.gated]
    holding = _sweep(holding, free, by_index=True, by_node=True)
    holding = _sweep(holding, free, by_node=True, avoid=wanted)
    _sweep(holding, free, avoid=wanted)  # one that still finds none runs beyond the plan: it holds nothing

    nodes: dict[str, tuple[int, str]] = {}
    waiting = _sweep(gated, free, by_index=True, by_node=True, into=nodes)
    waiting = _sweep(waiting, free, by_node=True, into=nodes)
    waiting = _sweep(waiting, free, by_index=True, into=nodes)
    waiting.sort(key=lambda p: (p.index is None, p.index or 0, p.name))  # the kind's numbering, where it has one
    unassigned = _sweep(waiting, free, into=nodes)
    return Assignment(
        {name: node for name, (_, node) in nodes.items()},
        tuple(sorted(pod.name for pod in unassigned)),
        {name: index for name, (index, _) in nodes.items()},
    )


def _sweep(
    pods: Sequence[JobPod],
    free: Mapping[str, list[tuple[int, str, tuple[str, ...]]]],
    *,
    by_index: bool = False,
    by_node: bool = False,
    avoid: Mapping[str, set[int]] | None = None,
    into: dict[str, tuple[int, str]] | None = None,
) -> list[JobPod]:
    """One pass: each pod in turn takes a free slot of its role (of its own index, on its
    own node, where asked; a pod without an index or a node then takes none), the lowest
    free one, one whose index ``avoid`` names for its role last; its node goes ``into``.
    The pods that took none."""
    missed = []
    for pod in pods:
        slots = free.get(pod.role.lower(), [])
        fits = [
            i
            for i, (index, node, cards) in enumerate(slots)
            if (not by_index or index == pod.index)
            and (not by_node or node == pod.node)
            and (not pod.cards or cards == pod.cards or not cards)
        ]
        if (by_index and pod.index is None) or (by_node and not pod.node) or not fits:
            missed.append(pod)
            continue
        kept_for_others = (avoid or {}).get(pod.role.lower(), set())
        chosen = next((i for i in fits if slots[i][0] not in kept_for_others), fits[0])
        index, node, _ = slots.pop(chosen)
        if into is not None:
            into[pod.name] = (index, node)
    return missed
