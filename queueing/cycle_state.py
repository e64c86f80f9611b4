"""What one ``plan()`` call knows and changes, in one place: the admission loop
(planner.py) and the Preemptor (preemptor.py) read and charge the same namespaces,
nodes and records, so both take this object rather than sharing attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .clusters import ClusterPlan
from .elastic import ElasticQuotas
from .fit import NodePool
from .policy import Policy
from .preemption import Preemption
from .reasons import Outcome
from .snapshot import PendingJob, RunningJob, Snapshot
from .tide import Tide


@dataclass(slots=True, eq=False)
class NamespaceState:
    """One namespace's state during the cycle."""

    name: str
    hard: dict[str, int] | None  # None: no ResourceQuota, nothing constrained
    free: dict[str, int] | None  # per constrained key: hard - used - reserved - admitted - held
    weight: int
    policy: Policy  # its queue's rules: the global policy or the namespace's override
    held: dict[str, int] = field(default_factory=dict)  # quota held for reserved_for, a head that waited too long
    reserved_for: int | None = None
    in_flight: int | None = None  # the first in-flight job, for one-at-a-time policies
    admitted: list[PendingJob] = field(default_factory=list)  # admitted this cycle, in order
    head_seen: bool = False  # the first job that could not start has been met
    blocked_by: int | None = None  # strict order: the head that blocks the rest (0: all held, its budget)
    held_back: Outcome | None = None  # the outcome of a policy hold
    usage: dict[str, int] = field(default_factory=dict)  # node resources of its running, in-flight and admitted jobs
    failed: dict[tuple[object, ...], Outcome] = field(default_factory=dict)  # capacity outcome by job shape


def namespace_states(snapshot: Snapshot, policy: Policy, overrides: Mapping[str, Policy]) -> dict[str, NamespaceState]:
    """Every namespace with a pending or in-flight job: its free quota after what in-flight
    jobs have still to charge (their pods not created yet)."""
    names = {job.namespace: None for job in snapshot.pending}
    names.update({job.namespace: None for job in snapshot.in_flight})
    namespaces = {}
    for name in names:
        quota = snapshot.quotas.get(name)
        own = overrides.get(name, policy)
        if quota is None:
            namespaces[name] = NamespaceState(name, None, None, 1, own)
        else:
            hard = dict(quota.hard)
            free = {key: limit - quota.used.get(key, 0) for key, limit in hard.items()}
            namespaces[name] = NamespaceState(name, hard, free, quota.weight, own)
    for job in snapshot.in_flight:
        namespace = namespaces[job.namespace]
        if namespace.in_flight is None:
            namespace.in_flight = job.id
        if namespace.free is not None:
            for key, amount in job.outstanding.items():
                if key in namespace.free:
                    namespace.free[key] -= amount
    return namespaces


@dataclass(eq=False)
class CycleState:
    """The cycle's world as its phases leave it."""

    snapshot: Snapshot
    policy: Policy
    node_fit: bool  # the snapshot's and the policy's: place gangs on nodes
    strategy: str  # node packing: best, first, worst
    namespaces: dict[str, NamespaceState]
    pool: NodePool  # the nodes' free capacity now, less what this cycle placed or holds
    elastic: ElasticQuotas
    # The nodes once every job waiting for victims in their grace period has them gone and
    # holds its room there (preemptor.py); None while nothing is leaving and nothing preempts.
    future: NodePool | None = None
    tide: Tide | None = None  # the lent pools, when there are any and gangs are placed on nodes
    clusters: ClusterPlan | None = None  # with two clusters or more: each gang inside one (clusters.py)
    waiting: list[tuple[int, PendingJob, Outcome]] = field(default_factory=list)  # not admitted: rank, job, why
    leaving: dict[int, list[RunningJob]] = field(default_factory=dict)  # preemptor -> its victims in their grace
    preempting: dict[int, Outcome] = field(default_factory=dict)  # waiting job -> its Preempting outcome
    preemptions: list[Preemption] = field(default_factory=list)
    # Objects whose id() keys a memo of this cycle: kept alive, so their ids stay theirs.
    keep_alive: list[object] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def now(self) -> float:
        return self.snapshot.now

    def left_free(self, admitted: Sequence[PendingJob]) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
        """Per namespace its free quota (constrained keys), and the cluster's free
        resources, as this cycle leaves them: its admissions (`admitted`) are charged,
        reservations and holds are not (they are not usage)."""
        pool = self.pool
        cluster_free = dict(pool.totals)
        # Undo the reservations node by node: a reservation may charge a node below zero
        # (it holds capacity that running pods still use), and totals count only what is free.
        undone: dict[int, dict[str, int]] = {}
        for _, number, requests in pool.reservations:
            node_free = undone.get(number)
            if node_free is None:
                node_free = undone[number] = dict(pool.free[number])
            for name, amount in requests:
                old = node_free.get(name, 0)
                node_free[name] = old + amount
                cluster_free[name] = cluster_free.get(name, 0) + max(old + amount, 0) - max(old, 0)
        if not self.node_fit:  # the pool did not see this cycle's admissions
            for job in admitted:
                for name, amount in job.totals.items():
                    cluster_free[name] = cluster_free.get(name, 0) - amount
        quota_free = {
            name: {key: amount + ns.held.get(key, 0) for key, amount in ns.free.items()}
            for name, ns in self.namespaces.items()
            if ns.free is not None
        }
        return quota_free, cluster_free
