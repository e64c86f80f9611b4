"""Phase 3c of a plan (planner.py): a job's whole gang on the nodes, by its topology request,
and kept off the lent nodes it may not use now (tide.py)."""

from __future__ import annotations

from collections.abc import Sequence

from .fit import NodeFailure, NodePool
from .reasons import Outcome, Reason, node_failure_outcome
from .snapshot import PendingJob
from .tide import Bar
from .topology import Topology

Placed = list[tuple[int, int]]  # (pod group number, node number) per pod


class GangPlacement:
    """Places gangs on one cycle's pool (which charges them), or says why not."""

    def __init__(self, pool: NodePool, topology: Topology, now: float):
        self.pool = pool
        self.topology = topology
        self.now = now
        self.outcomes: dict[int, tuple[NodeFailure, Outcome]] = {}

    def place(self, job: PendingJob, bar: Bar | None) -> Placed | Outcome:
        """The gang placed, or why not; a job kept off lent nodes that it would fit with
        them waits with OutlastsLentPool."""
        placed = self._place(job, None if bar is None else bar.allowed)
        if isinstance(placed, NodeFailure) and bar is not None:
            # Would it fit with the lent nodes?  A trial, taken back at once.
            trial = self._place(job, None)
            if not isinstance(trial, NodeFailure):
                self.pool.unplace(job.gang, trial)
                return Reason.OUTLASTS_LENT_POOL, bar.detail(job, self.now)
            placed = trial  # the usual reason: it does not fit even with them
        if not isinstance(placed, NodeFailure):
            return placed
        # Memoised failures repeat for many jobs: build each outcome once.
        built = self.outcomes.get(id(placed))
        if built is None or built[0] is not placed:
            built = self.outcomes[id(placed)] = (placed, node_failure_outcome(placed))
        return built[1]

    def _place(self, job: PendingJob, allowed: frozenset[int] | None) -> Placed | NodeFailure:
        if job.topology is None:
            return self.pool.place(job.gang, job.totals, allowed)
        return self.topology.place(job.gang, job.totals, job.topology, allowed)


def pod_names(job: PendingJob, placed: Placed, names: Sequence[str]) -> tuple[tuple[str, int, str], ...]:
    """A placement as (role, pod index, node name) per pod, sorted."""
    counters: dict[int, int] = {}
    pods = []
    for group_number, node in placed:
        index = counters.get(group_number, 0)
        counters[group_number] = index + 1
        pods.append((job.gang[group_number].role, index, names[node]))
    return tuple(sorted(pods))
