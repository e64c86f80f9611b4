"""Many clusters, one plan (issue 49): "cluster" is the topology level above every other.

Every node carries its cluster's name as the label ``jobdash.io/cluster`` (the gateway sets
it), and a gang is always placed inside one cluster. A job may ask for clusters with
annotations:

- ``jobdash.io/cluster: <name>``: that cluster only;
- ``jobdash.io/preferred-cluster: <name>``: there if it fits there now, else elsewhere;
- ``jobdash.io/cluster-selector: key=value[,key=value]``: only clusters with those labels
  (the admin's labels on clusters: GPU model, region).

Quota: a namespace's quota in the plan is the sum of its ResourceQuotas in every cluster
(the dispatcher sums them), and a gang goes only to a cluster whose own ResourceQuota for
its namespace has room for it, after what this cycle has admitted there. A namespace with a
ResourceQuota in some cluster uses only the clusters where it has one; a namespace with none
anywhere may use every cluster. A lost cluster (its API server silent) takes nothing new.

Among the clusters a job may use, its preferred one is tried first, then the others
tightest first (the least free of the gang's scarcest resource that still has enough): as
with racks, roomy clusters stay roomy for big gangs. With one cluster none of this runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .cluster_request import (
    CLUSTER_LABEL,
    PREFERRED_ANNOTATION,
    SELECTOR_ANNOTATION,
    Cluster,
    ClusterRequest,
    problems,
    request_of,
)
from .fit import NodePool, primary_resource
from .quota_fit import quota_check

__all__ = [
    "CLUSTER_LABEL",
    "PREFERRED_ANNOTATION",
    "SELECTOR_ANNOTATION",
    "Cluster",
    "ClusterPlan",
    "ClusterRequest",
    "ClusterShortage",
    "problems",
    "request_of",
]


@dataclass(frozen=True)
class ClusterShortage:
    """No cluster the job may use admits it: why (``"quota"`` short in every one, or
    ``"none"``: none it may use at all, or all of those lost)."""

    kind: str
    resource: str = ""
    needed: int = 0
    free: int = 0
    hard: int = 0
    cluster: str = ""


class ClusterPlan:
    """One cycle's clusters over its node pool: which nodes each holds, each namespace's
    free quota in each, charged as the cycle admits."""

    def __init__(
        self, clusters: Sequence[Cluster], pool: NodePool, in_flight: Sequence[tuple[str, str, Mapping[str, int]]]
    ):
        """`in_flight`: (cluster, namespace, outstanding quota demand) of released jobs whose
        pods are not all created (what their cluster's quota has not counted yet)."""
        self.clusters = {cluster.name: cluster for cluster in clusters}
        self.active = len(self.clusters) > 1
        self.pool = pool
        groups: dict[str, set[int]] = {name: set() for name in self.clusters}
        for number in pool.schedulable:
            name = pool.nodes[number].labels.get(CLUSTER_LABEL)
            if name in groups:
                groups[name].add(number)
        self.nodes = {name: frozenset(numbers) for name, numbers in groups.items()}
        # (every node, schedulable or not: a failed node's pods are replaced in its cluster)
        self.cluster_of_node = {node.name: node.labels.get(CLUSTER_LABEL, "") for node in pool.nodes}
        self.quoted = {namespace for cluster in clusters for namespace in cluster.quotas}
        self.free: dict[tuple[str, str], dict[str, int]] = {}
        for cluster in clusters:
            for namespace, quota in cluster.quotas.items():
                self.free[cluster.name, namespace] = {
                    key: limit - quota.used.get(key, 0) for key, limit in quota.hard.items()
                }
        for name, namespace, outstanding in in_flight:
            free = self.free.get((name, namespace))
            if free is not None:
                for key, amount in outstanding.items():
                    if key in free:
                        free[key] -= amount

    def candidates(
        self, namespace: str, demand: Mapping[str, int], totals: Mapping[str, int], request: ClusterRequest | None
    ) -> list[tuple[str, frozenset[int]]] | ClusterShortage:
        """The clusters the job may go to now, in the order to try them, each with its nodes."""
        allowed = []
        short: ClusterShortage | None = None  # the roomiest cluster open to it, short of quota now
        never: ClusterShortage | None = None  # the largest quota it can never fit
        never_everywhere = True  # every cluster it may use has a quota too small for it
        for name, cluster in self.clusters.items():
            if request is not None and not request.allows(cluster):
                continue
            closed = cluster.lost or cluster.cordoned
            if namespace not in self.quoted:
                never_everywhere = False
            else:
                quota = cluster.quotas.get(namespace)
                if quota is None:
                    continue
                free = self.free[name, namespace]
                too_big, now_short = quota_check(demand, quota.hard, free)
                if too_big is None:
                    never_everywhere = False
                elif never is None or quota.hard[too_big] > never.hard:
                    never = ClusterShortage("never", too_big, demand[too_big], free[too_big], quota.hard[too_big], name)
                key = too_big or now_short
                if key is not None:
                    if not closed and (short is None or free[key] > short.free):
                        short = ClusterShortage("quota", key, demand[key], free[key], quota.hard[key], name)
                    continue
            if not closed:
                allowed.append(name)
        if not allowed:
            if never_everywhere and never is not None:
                return never
            return short or ClusterShortage("none")
        resource = primary_resource(tuple(totals.items()))
        needed = totals.get(resource, 0)
        free_nodes = self.pool.free
        preferred = request.preferred if request is not None else ""

        def order(name: str) -> tuple[bool, bool, int, str]:
            room = sum(max(free_nodes[number].get(resource, 0), 0) for number in self.nodes[name])
            return (name != preferred, room < needed, room, name)

        return [(name, self.nodes[name]) for name in sorted(allowed, key=order)]

    def charge(self, cluster: str, namespace: str, demand: Mapping[str, int]) -> None:
        free = self.free.get((cluster, namespace))
        if free is not None:
            for key in free:
                free[key] -= demand.get(key, 0)

    def cluster_of(self, placement: Sequence[tuple[str, int, str]] | None) -> str:
        """The cluster of a placement's nodes ("" when it has none)."""
        if not placement:
            return ""
        return self.cluster_of_node.get(placement[0][2], "")

    def nodes_of(self, placement: Sequence[tuple[str, int, str]] | None) -> frozenset[int]:
        """The nodes of a placement's cluster (none when it is not known)."""
        return self.nodes.get(self.cluster_of(placement), frozenset())
