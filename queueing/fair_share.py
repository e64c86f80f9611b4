"""Dominant-resource fair share (DRF) across namespaces, the ``fair`` policy's phase 3:
when the cluster, not the quota, is the limit, the namespace with the lowest weighted
dominant share admits next, its share grows, and the turn passes on."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping

from .cycle_state import CycleState, NamespaceState
from .reasons import Outcome
from .snapshot import InFlightJob, PendingJob, RunningJob


class FairShare:
    def __init__(self, state: CycleState):
        self.state = state
        self._usage_counted = False

    def admit(
        self,
        ordered: list[PendingJob],
        ranks: dict[int, int] | None,
        consider: Callable[[PendingJob], Outcome | None],
        record: Callable[[int, PendingJob, Outcome], None],
    ) -> None:
        """Take turns by share: each namespace's queue in `ordered`'s order, `consider`
        admitting a job (None) or saying why not (recorded).  ``ranks``: each job's rank in
        the whole order, when ``ordered`` is one pass of several."""
        state = self.state
        capacity = {name: amount for name, amount in self._cluster_capacity().items() if amount > 0}
        if not self._usage_counted:
            self._usage_counted = True
            holding: list[RunningJob | InFlightJob] = [*state.snapshot.running, *state.snapshot.in_flight]
            for held in holding:
                if held.namespace in state.namespaces:  # namespaces with nothing queued do not take turns
                    _add_usage(state.namespaces[held.namespace], held.totals)
        queues: dict[str, list[tuple[int, PendingJob]]] = {}
        for rank, job in enumerate(ordered):
            if ranks is not None:
                rank = ranks[id(job)]
            queue = queues.get(job.namespace)
            if queue is None:
                queues[job.namespace] = [(rank, job)]
            else:
                queue.append((rank, job))
        # (share, namespace, where its queue resumes): ties go to the namespace name.
        heap = [(_share(state.namespaces[name], capacity), name, 0) for name in queues]
        heapq.heapify(heap)
        while heap:
            _, name, resume = heapq.heappop(heap)
            queue = queues[name]
            for index in range(resume, len(queue)):
                rank, job = queue[index]
                outcome = consider(job)
                if outcome is not None:
                    record(rank, job, outcome)
                    continue
                # Admitted: its share grew, so it queues again for the next turn.
                namespace = state.namespaces[name]
                _add_usage(namespace, job.totals)
                heapq.heappush(heap, (_share(namespace, capacity), name, index + 1))
                break

    def _cluster_capacity(self) -> dict[str, int]:
        capacity: dict[str, int] = {}
        nodes = self.state.snapshot.nodes
        for number in self.state.pool.schedulable:
            for name, amount in nodes[number].allocatable.items():
                capacity[name] = capacity.get(name, 0) + amount
        capacity.pop("pods", None)  # a pod slot is not a resource anyone is short of fairly
        return capacity


def _share(namespace: NamespaceState, capacity: Mapping[str, int]) -> float:
    usage = namespace.usage
    return max((usage.get(name, 0) / amount for name, amount in capacity.items()), default=0.0) / namespace.weight


def _add_usage(namespace: NamespaceState, totals: Mapping[str, int]) -> None:
    usage = namespace.usage
    for name, amount in totals.items():
        usage[name] = usage.get(name, 0) + amount
