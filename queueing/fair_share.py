"""Dominant-resource fair share (DRF) across namespaces, the ``fair`` policy's phase 3:
when the cluster, not the quota, is the limit, the namespace with the lowest weighted
dominant share admits next, its share grows, and the turn passes on.

With memory (``Policy.usage_half_life_days``, Slurm's fair-share): a namespace's turn also
counts what it used before, ``Snapshot.usage`` (GPU-hours decayed with the half-life) as its
part of everyone's; so a team that used much last week waits behind one that did not, and
the reason of its waiting jobs says so ("team-b used 1,200 GPU-h lately, twice its share")."""

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
        self.over: dict[str, tuple[float, float]] = {}  # namespace -> (GPU-hours, times its share)

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
        past = self._past(queues)
        # (share, namespace, where its queue resumes): ties go to the namespace name.
        heap = [(_share(state.namespaces[name], capacity) + past.get(name, 0.0), name, 0) for name in queues]
        heapq.heapify(heap)
        while heap:
            _, name, resume = heapq.heappop(heap)
            queue = queues[name]
            for index in range(resume, len(queue)):
                rank, job = queue[index]
                outcome = consider(job)
                if outcome is not None:
                    record(rank, job, self.said(name, outcome))
                    continue
                # Admitted: its share grew, so it queues again for the next turn.
                namespace = state.namespaces[name]
                _add_usage(namespace, job.totals)
                heapq.heappush(heap, (_share(namespace, capacity) + past.get(name, 0.0), name, index + 1))
                break

    def _past(self, queues: Mapping[str, object]) -> dict[str, float]:
        """Each waiting namespace's past use as its part of everyone's, over its weight."""
        self.over = {}
        usage, policy = self.state.snapshot.usage, self.state.policy
        total = sum(usage.values())
        if policy.usage_half_life_days is None or not total > 0:
            return {}
        namespaces = self.state.namespaces
        weights = sum(ns.weight for ns in namespaces.values()) or 1
        past = {}
        for name in queues:
            part = usage.get(name, 0.0) / total
            past[name] = part / namespaces[name].weight
            times = part / (namespaces[name].weight / weights)
            if times > 1.0:
                self.over[name] = (usage.get(name, 0.0), times)
        return past

    def said(self, name: str, outcome: Outcome) -> Outcome:
        """A waiting job's reason, with its namespace's past use when that is over its share."""
        over = self.over.get(name)
        if over is None or not outcome[0].for_room:
            return outcome
        hours, times = over
        return outcome[0], {**outcome[1], "history": {"namespace": name, "gpu_hours": hours, "times_share": times}}

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
