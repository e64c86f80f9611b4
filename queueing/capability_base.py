"""The part of capabilities.py that workload.py needs, below both: whether a kind's adapter
declares a capability (``declares``), and the one capability a Workload asks about itself,
JobOfPods (a job whose object is its pods has no object of its own for quota to count).
capabilities.py re-exports all three."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # (annotations only: workload.py imports this module)
    from .workload import JobAdapter, JobStatus


@runtime_checkable
class JobOfPods(Protocol):
    """Its object is its pods, made by their user: a plain Pod, or a group of them (Kueue's
    pod integration). There is no parent object: the pods exist while the job waits, gated
    at creation by jobdash's webhook, and charged by ResourceQuota from then on (so what the
    job waits for is its members, nodes and its turn, never quota: ``waiting_demand``).
    Release lifts their gate; their phases are the job's status (``status_of_pods``, the
    phases of its pods, None for a pod deleted)."""

    def status_of_pods(self, phases: Sequence[str], total: int) -> JobStatus: ...


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


def objects_are_pods(adapter: JobAdapter) -> bool:
    return declares(adapter, JobOfPods)
