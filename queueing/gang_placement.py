"""Phase 3c of a plan (planner.py): a job's whole gang on the nodes, by its topology request,
inside one cluster when there are several (clusters.py), and kept off the lent nodes it may
not use now (tide.py)."""

from __future__ import annotations

from collections.abc import Sequence

from .clusters import ClusterPlan, ClusterShortage
from .fit import NodeFailure, NodePool
from .reasons import Outcome, Reason, node_failure_outcome
from .snapshot import PendingJob
from .tide import Bar
from .topology import Topology

Placed = list[tuple[int, int]]  # (pod group number, node number) per pod


class GangPlacement:
    """Places gangs on one cycle's pool (which charges them), or says why not."""

    def __init__(self, pool: NodePool, topology: Topology, now: float, clusters: ClusterPlan | None = None):
        self.pool = pool
        self.topology = topology
        self.now = now
        self.clusters = clusters
        self.outcomes: dict[int, tuple[NodeFailure, Outcome]] = {}

    def place(self, job: PendingJob, bar: Bar | None) -> Placed | Outcome:
        """The gang placed, or why not; a job kept off lent nodes that it would fit with
        them waits with OutlastsLentPool."""
        allowed = None if bar is None else bar.allowed
        if self.clusters is not None:
            return self._in_a_cluster(job, bar, allowed)
        placed = self._place(job, allowed)
        if isinstance(placed, NodeFailure) and bar is not None:
            # Would it fit with the lent nodes?  A trial, taken back at once.
            trial = self._place(job, None)
            if not isinstance(trial, NodeFailure):
                self.pool.unplace(job.gang, trial)
                return Reason.OUTLASTS_LENT_POOL, bar.detail(job, self.now)
            placed = trial  # the usual reason: it does not fit even with them
        return self._outcome(placed)

    def clusters_for(self, job: PendingJob) -> list[tuple[str, frozenset[int]]] | Outcome:
        """The clusters `job` may go to now, in the order to try them, or why none."""
        assert self.clusters is not None
        found = self.clusters.candidates(job.namespace, job.demand, job.totals, job.clusters)
        if isinstance(found, list):
            return found
        return shortage_outcome(found, job, self.clusters)

    def quota_only_cluster(self, job: PendingJob) -> str | Outcome:
        """Without node fit: the first cluster that admits the job, or why none does."""
        found = self.clusters_for(job)
        return found[0][0] if isinstance(found, list) else found

    def _in_a_cluster(self, job: PendingJob, bar: Bar | None, allowed: frozenset[int] | None) -> Placed | Outcome:
        """The gang in the first of its clusters that holds it; failing all, why the one that
        came closest did not (or, kept off lent nodes, why so)."""
        found = self.clusters_for(job)
        if not isinstance(found, list):
            return found
        closest: NodeFailure | None = None
        closest_in = ""
        for name, nodes in found:
            placed = self._place(job, nodes if allowed is None else nodes & allowed)
            if not isinstance(placed, NodeFailure):
                return placed
            if closest is None or _nearer(placed, closest):
                closest, closest_in = placed, name
        if bar is not None:
            for _, nodes in found:
                trial = self._place(job, nodes)
                if not isinstance(trial, NodeFailure):
                    self.pool.unplace(job.gang, trial)
                    return Reason.OUTLASTS_LENT_POOL, bar.detail(job, self.now)
        assert closest is not None  # (found is never empty)
        reason, detail = self._failure_outcome(closest)
        # The cluster it came closest in: where it is likely to start (its start range says when).
        return reason, {**detail, "cluster": closest_in}

    def _outcome(self, placed: Placed | NodeFailure) -> Placed | Outcome:
        return self._failure_outcome(placed) if isinstance(placed, NodeFailure) else placed

    def _failure_outcome(self, failure: NodeFailure) -> Outcome:
        # Memoised failures repeat for many jobs: build each outcome once.
        built = self.outcomes.get(id(failure))
        if built is None or built[0] is not failure:
            built = self.outcomes[id(failure)] = (failure, node_failure_outcome(failure))
        return built[1]

    def _place(self, job: PendingJob, allowed: frozenset[int] | None) -> Placed | NodeFailure:
        if job.topology is None:
            return self.pool.place(job.gang, job.totals, allowed)
        return self.topology.place(job.gang, job.totals, job.topology, allowed)


def _nearer(failure: NodeFailure, than: NodeFailure) -> bool:
    """Whether `failure` came closer than `than`: "not now" before "never" (a gang too big
    for one cluster's nodes may fit another's), then more pods placed."""
    return (failure.kind != "never", failure.placed) > (than.kind != "never", than.placed)


def shortage_outcome(shortage: ClusterShortage, job: PendingJob, clusters: ClusterPlan) -> Outcome:
    """Why no cluster may take `job` now."""
    if shortage.kind == "never":  # the quota of every cluster it may use is too small for it
        return Reason.NEVER_FITS_QUOTA, {
            "resource": shortage.resource,
            "needed": shortage.needed,
            "hard": shortage.hard,
            "cluster": shortage.cluster,
        }
    if shortage.kind == "quota":
        return Reason.QUOTA_EXCEEDED, {
            "resource": shortage.resource,
            "needed": shortage.needed,
            "free": shortage.free,
            "hard": shortage.hard,
            "cluster": shortage.cluster,
        }
    request = job.clusters
    if request is None:
        asked = "any cluster"
    elif request.required:
        asked = f"it requires cluster {request.required}"
    else:
        asked = "it asks for clusters labelled " + ",".join(f"{k}={v}" for k, v in request.selector)
    mine = [c for c in clusters.clusters.values() if request is None or request.allows(c)]
    lost = sorted(c.name for c in mine if c.lost)
    cordoned = sorted(c.name for c in mine if c.cordoned and not c.lost)
    return Reason.NO_CLUSTER, {"asked": asked, "lost": lost, "cordoned": cordoned}


def pod_names(job: PendingJob, placed: Placed, names: Sequence[str]) -> tuple[tuple[str, int, str], ...]:
    """A placement as (role, pod index, node name) per pod, sorted."""
    counters: dict[int, int] = {}
    pods = []
    for group_number, node in placed:
        index = counters.get(group_number, 0)
        counters[group_number] = index + 1
        pods.append((job.gang[group_number].role, index, names[node]))
    return tuple(sorted(pods))
