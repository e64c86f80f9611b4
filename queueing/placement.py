"""A released job's pods run exactly where the planner placed them (as Kueue's topology-aware
scheduling does it).

At release every pod template of the job gets the scheduling gate ``GATE`` (``hold``), so
each pod is created gated and no scheduler places it; the dispatcher then gives each gated
pod the nodeSelector of its planned node and removes the gate. On suspend the templates go
back to what the user wrote (``restore``), as Kueue's RunWithPodSetsInfo and
RestorePodSetsInfo do with a job's pod sets. Where a kind's templates are, and what a blank
one is, is the kind's (capabilities.JobWithPodTemplates); what is done to them is here, the
same for every kind.

``restore(hold(x)) == x`` for every ``x`` that carries nothing of jobdash's (no ``GATE``)
and no container ``hold`` fills that is there but empty: a ``schedulingGates`` that is
``[]`` or null, for a TrainJob also a ``podSpecOverrides`` that is, or an override entry
that names one job and overrides nothing. Each means what its absence means, and ``hold``
can only make of it what it makes of its absence (nothing else in the object could say
which it was without changing the Workload or the pods), so restore leaves it absent.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping
from typing import Any, cast

from . import capabilities
from .workload import JobAdapter, Workload

GATE = "jobdash.io/placement"
GATES = "schedulingGates"


def hold(adapter: JobAdapter, obj: Mapping[str, Any], workload: Workload) -> dict[str, Any]:
    """A copy of ``obj`` with ``GATE`` last in every pod template's schedulingGates (once:
    a template that has it is left alone), everything else as it was. ``workload``: what
    ``obj`` validates to; its roles are the templates a kind may have to add (a TrainJob's
    override entries). A template whose schedulingGates is not a list is left as it is
    (``held`` then says so): it could not be gated without losing what it holds."""
    held_obj = copy.deepcopy(dict(obj))
    for _, template in capabilities.pod_templates(adapter, held_obj, _roles(workload)):
        spec = capabilities.template_pod_spec(adapter, template)
        gates = None if spec is None else spec.get(GATES)
        if spec is not None and gates is None:
            spec[GATES] = [{"name": GATE}]
        elif isinstance(gates, list) and not _gated(gates):
            gates.append({"name": GATE})
    return held_obj


def restore(adapter: JobAdapter, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` without what ``hold`` added: ``GATE`` out of every template, a
    schedulingGates it leaves empty and a template it leaves blank removed (those hold
    made). A template without ``GATE`` is not touched."""
    restored = copy.deepcopy(dict(obj))
    seen: set[int] = set()
    for _, template in capabilities.pod_templates(adapter, restored):
        spec = capabilities.template_pod_spec(adapter, template)
        gates = None if spec is None else spec.get(GATES)
        if id(template) in seen or spec is None or not isinstance(gates, list) or not _gated(gates):
            continue
        seen.add(id(template))  # a TrainJob entry naming several jobs is listed once for each
        kept = [gate for gate in gates if not _ours(gate)]
        if kept:
            spec[GATES] = kept
        else:
            del spec[GATES]
        capabilities.drop_blank(adapter, restored, template)
    return restored


def held(adapter: JobAdapter, obj: Mapping[str, Any], workload: Workload) -> bool:
    """Whether every pod of the job would be created gated: every role of ``workload`` has
    a template in ``obj`` and every template carries ``GATE``."""
    # Asked for no roles, a kind adds no template: obj is only read.
    templates = capabilities.pod_templates(adapter, cast(MutableMapping[str, Any], obj))
    covered = {role.lower() for role, _ in templates}
    if not templates or any(role.lower() not in covered for role in _roles(workload)):
        return False
    for _, template in templates:
        spec = capabilities.template_pod_spec(adapter, template)
        gates = None if spec is None else spec.get(GATES)
        if not isinstance(gates, list) or not _gated(gates):
            return False
    return True


def _roles(workload: Workload) -> list[str]:
    return [pod_set.role for pod_set in workload.pod_sets]


def _ours(gate: Any) -> bool:
    return isinstance(gate, Mapping) and gate.get("name") == GATE


def _gated(gates: list[Any]) -> bool:
    return any(_ours(gate) for gate in gates)
