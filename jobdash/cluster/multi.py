"""Many clusters behind one gateway (issue 49): the dispatcher plans over every cluster's
nodes as if they were one cluster's, and each write goes to the cluster it concerns.

- Reads are the clusters' watch caches together. Every node carries its cluster's name as
  the label ``jobdash.io/cluster`` (queueing.clusters.CLUSTER_LABEL), each quota its
  ``cluster``; a node name found in two clusters is left out of both (names must be
  unique across clusters: a pod is pinned to a node by name) and logged.
- A job's object is created in the cluster its manifest's ``jobdash.io/cluster``
  annotation names (the release sets it from the plan's admission); afterwards every
  write about it goes where the cache sees it, or where it was created.
- A gated pod is let go in the cluster of the node it is sent to; a pod is deleted where
  the cache sees it.
- What belongs to no one job — the waiting jobs' QueuedJob mirror, the priority classes,
  runtimes, access reviews and role bindings — is the first cluster's (the primary).
- Health: a thread asks each API server for /version every ``probe_every`` seconds;
  ``answered_at(name)`` is its last answer (wall clock). The dispatcher marks a cluster lost
  from it (jobdash/dispatch/phases/clusters.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from queueing.clusters import CLUSTER_LABEL

from .gateway import (
    Access,
    ClusterEvent,
    ElsewhereHeld,
    JobObject,
    NodeInfo,
    NotFound,
    ObjectKey,
    PodInfo,
    QueuedEntry,
    QueuedObject,
    Quota,
    Transient,
    WatchEvent,
)
from .kube import KubeGateway

log = logging.getLogger(__name__)


class MultiGateway:
    """The ClusterGateway protocol over several clusters' KubeGateways, by name (the first is
    the primary)."""

    def __init__(self, gateways: Mapping[str, KubeGateway], labels: Mapping[str, Mapping[str, str]] | None = None):
        if not gateways:
            raise ValueError("MultiGateway needs at least one cluster")
        self.gateways = dict(gateways)
        self.names = tuple(self.gateways)
        self.primary = self.gateways[self.names[0]]
        self.labels = {name: dict((labels or {}).get(name, {})) for name in self.names}
        self._created: dict[ObjectKey, str] = {}  # objects created, until a cache sees them
        self._answered: dict[str, float] = {}
        self._health_changes = 0  # in revision(): a cluster lost or back is a change
        self._stop = threading.Event()
        self._prober: threading.Thread | None = None
        self._node_clusters: dict[str, str] = {}
        self._labelled_nodes: dict[str, tuple[NodeInfo, NodeInfo]] = {}  # name -> (the cache's, labelled)
        # Lost or returning (the dispatcher's ClusterWatch says): their objects are not live,
        # so no pass adopts or re-sends what a silent cluster's stale cache shows.
        self.frozen: frozenset[str] = frozenset()
        self._warned: set[str] = set()

    # --- health ---

    def answered_at(self, name: str) -> float | None:
        """When the cluster's API server last answered (epoch seconds); None: never."""
        return self._answered.get(name)

    def probe(self) -> None:
        """Ask every API server once (the thread does it every `probe_every` seconds)."""
        for name, gateway in self.gateways.items():
            if gateway.answers():
                self._answered[name] = time.time()

    def health_changed(self) -> None:
        self._health_changes += 1

    def _probe_loop(self, every: float) -> None:
        while not self._stop.wait(every):
            self.probe()

    # --- routing ---

    def gateway(self, name: str) -> KubeGateway:
        return self.gateways[name]

    def cluster_of(self, key: ObjectKey) -> str | None:
        """The cluster whose cache holds the object (an answering one before a frozen one:
        the copy left in a lost cluster is not the job's), else the one it was created in."""
        for name in sorted(self.names, key=lambda name: name in self.frozen):
            found = self.gateways[name].job_object(key)
            if found is not None and not (found.deleting and name in self.frozen):
                self._created.pop(key, None)  # (the cache knows it now)
                return name
        return self._created.get(key)

    def _for(self, key: ObjectKey) -> KubeGateway:
        name = self.cluster_of(key)
        return self._writable(name if name is not None else self.names[0])

    def _writable(self, name: str) -> KubeGateway:
        """The gateway to write to `name` through; Transient at once while it is lost (a silent
        API server would hold each write for its timeouts and retries: the cycle with it)."""
        if name in self.frozen:
            raise Transient(f"cluster {name} is lost: nothing is written there until it answers")
        return self.gateways[name]

    # --- reads (the watch caches together) ---

    def quotas(self) -> list[Quota]:
        return [replace(q, cluster=name) for name, gateway in self.gateways.items() for q in gateway.quotas()]

    def nodes(self) -> list[NodeInfo]:
        found: dict[str, list[tuple[str, NodeInfo]]] = {}
        for name, gateway in self.gateways.items():
            for node in gateway.nodes():
                found.setdefault(node.name, []).append((name, node))
        nodes, clusters = [], {}
        for node_name, copies in found.items():
            if len(copies) > 1:
                if node_name not in self._warned:
                    self._warned.add(node_name)
                    where = ", ".join(name for name, _ in copies)
                    log.error(
                        "node %s is in clusters %s: left out of every plan (names must be unique)", node_name, where
                    )
                continue
            name, node = copies[0]
            clusters[node_name] = name
            nodes.append(self._labelled(name, node))
        self._node_clusters = clusters
        return nodes

    def _labelled(self, cluster: str, node: NodeInfo) -> NodeInfo:
        """The node with its cluster's label; the same object while the cache's node is (the
        snapshot keeps what it built of a node while its NodeInfo is unchanged)."""
        kept = self._labelled_nodes.get(node.name)
        if kept is not None and kept[0] is node:
            return kept[1]
        made = replace(node, labels={**node.labels, CLUSTER_LABEL: cluster})
        self._labelled_nodes[node.name] = (node, made)
        return made

    def pods(self) -> list[PodInfo]:
        return [pod for gateway in self.gateways.values() for pod in gateway.pods()]

    def live_pods(self) -> list[PodInfo]:
        return [pod for gateway in self.gateways.values() for pod in gateway.live_pods()]

    def job_objects(self) -> list[JobObject]:
        return [item for gateway in self.gateways.values() for item in gateway.job_objects()]

    def job_object(self, key: ObjectKey) -> JobObject | None:
        name = self.cluster_of(key)
        return None if name is None else self.gateways[name].job_object(key)

    def _answering(self) -> list[KubeGateway]:
        return [self.gateways[name] for name in self._answering_names()]

    def _answering_names(self) -> list[str]:
        return [name for name in self.names if name not in self.frozen]

    def live_job_ids(self) -> set[int]:
        return set().union(*(gateway.live_job_ids() for gateway in self._answering()))

    def changed_job_ids(self) -> set[int] | None:
        changed: set[int] = set()
        every = False
        for gateway in self.gateways.values():  # (each drained: one consumer)
            found = gateway.changed_job_ids()
            if found is None:
                every = True
            else:
                changed |= found
        return None if every else changed

    def job_objects_of(self, job_ids: Iterable[int]) -> dict[int, JobObject]:
        wanted = list(job_ids)
        found: dict[int, JobObject] = {}
        for gateway in self._answering():
            found.update(gateway.job_objects_of(wanted))
        return found

    def pods_of_jobs(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, list[PodInfo]]:
        """Each job's pods in the cluster its object is in (a copy left in a lost cluster has
        pods of the same names: they are not this job's); a job with no object of its own
        (plain Pods), in the answering clusters."""
        by_cluster: dict[str | None, list[ObjectKey]] = {}
        for key in keys:
            by_cluster.setdefault(self.cluster_of(key), []).append(key)
        found: dict[ObjectKey, list[PodInfo]] = {}
        for name, wanted in by_cluster.items():
            gateways = [self.gateways[name]] if name is not None else self._answering()
            for gateway in gateways:
                for key, pods in gateway.pods_of_jobs(wanted).items():
                    found.setdefault(key, []).extend(pods)
        return found

    def revision(self, *, mirror: bool = False) -> int:
        if mirror:
            return self.primary.revision(mirror=True)
        return sum(gateway.revision() for gateway in self.gateways.values()) + self._health_changes

    # --- straight from an API server ---

    def read_job_object(self, key: ObjectKey) -> JobObject:
        name = self.cluster_of(key)
        if name is not None:
            return self.gateways[name].read_job_object(key)
        for gateway in self.gateways.values():
            try:
                return gateway.read_job_object(key)
            except (NotFound, Transient):
                continue
        raise NotFound(f"{key[0]} {key[1]}/{key[2]} in no cluster")

    def read_object(self, api_version: str, plural: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.primary.read_object(api_version, plural, namespace, name)

    def list_objects(self, api_version: str, plural: str) -> list[Mapping[str, Any]]:
        return self.primary.list_objects(api_version, plural)

    # --- writes ---

    def create_job_object(self, *, job_id: int, manifest: Mapping[str, Any], term: int | None = None) -> JobObject:
        annotations = (manifest.get("metadata") or {}).get("annotations") or {}
        name = annotations.get(CLUSTER_LABEL) or self.names[0]
        if name not in self.gateways:
            raise NotFound(f"no cluster {name!r}")
        created = self._writable(name).create_job_object(job_id=job_id, manifest=manifest, term=term)
        self._created[created.key] = name
        return created

    def label_job_object(self, key: ObjectKey, job_id: int, term: int | None = None) -> None:
        self._for(key).label_job_object(key, job_id, term)

    def announce(self, key: ObjectKey, uid: str, reason: str, message: str) -> None:
        self._for(key).announce(key, uid, reason, message)

    def check_held_in(self, key: ObjectKey, cluster: str) -> None:
        """Before a held object is let run in `cluster`: ElsewhereHeld if it is in another."""
        found = self.cluster_of(key)
        if cluster and found is not None and found != cluster:
            raise ElsewhereHeld(found)

    def set_suspended(self, key: ObjectKey, suspended: bool, term: int | None = None) -> None:
        self._for(key).set_suspended(key, suspended, term)

    def delete_job_object(self, key: ObjectKey, term: int | None = None) -> None:
        name = self.cluster_of(key)
        if name is not None:
            self._writable(name).delete_job_object(key, term)
            self._created.pop(key, None)
            return
        for gateway in self._answering():  # (seen nowhere: gone already, or not yet seen)
            try:
                gateway.delete_job_object(key, term)
            except NotFound:
                continue

    def update_job_object(
        self, key: ObjectKey, change: Callable[[dict[str, Any]], dict[str, Any]], term: int | None = None
    ) -> JobObject:
        return self._for(key).update_job_object(key, change, term)

    def ungate_pod(
        self, pod: PodInfo, gate: str, node: str | None, annotations: Mapping[str, str] | None = None
    ) -> None:
        name = self._node_clusters.get(node) if node else None
        gateway = self._writable(name) if name is not None else self._pod_gateway(pod.namespace, pod.name)
        gateway.ungate_pod(pod, gate, node, annotations)

    def delete_pod(self, namespace: str, name: str) -> None:
        self._pod_gateway(namespace, name).delete_pod(namespace, name)

    def _pod_gateway(self, namespace: str, name: str) -> KubeGateway:
        for cluster, gateway in self.gateways.items():
            if gateway.informers["pod"].get(namespace, name) is not None:
                return self._writable(cluster)
        return self._writable(self.names[0])

    # --- the primary's: the waiting jobs' mirror, access, bindings ---

    def queued_objects(self) -> list[QueuedObject] | None:
        return self.primary.queued_objects()

    def create_queued(self, entry: QueuedEntry, term: int | None = None) -> QueuedObject:
        return self._writable(self.names[0]).create_queued(entry, term)

    def update_queued(self, namespace: str, name: str, status: Mapping[str, Any], term: int | None = None) -> None:
        self._writable(self.names[0]).update_queued(namespace, name, status, term)

    def delete_queued(self, namespace: str, name: str, resource_version: str, term: int | None = None) -> None:
        self._writable(self.names[0]).delete_queued(namespace, name, resource_version, term)

    def queued_gone(self, namespace: str, name: str) -> bool:
        return self.primary.queued_gone(namespace, name)

    def record_event(self, event: ClusterEvent) -> None:
        """With the object it is about: a job's object where it is; else (a QueuedJob) the primary."""
        namespace, name = event.involved.get("namespace", ""), event.involved.get("name", "")
        for cluster in self._answering_names():
            gateway = self.gateways[cluster]
            kinds = (informer for key, informer in gateway.informers.items() if "." in key)  # (job kinds' keys)
            if any(informer.get(namespace, name) is not None for informer in kinds):
                gateway.record_event(event)
                return
        self._writable(self.names[0]).record_event(event)

    def review_access(
        self, user: str, groups: Sequence[str], verb: str, group: str, resource: str, namespace: str
    ) -> Access:
        return self.primary.review_access(user, groups, verb, group, resource, namespace)

    def watch_bindings(self, on_change: Callable[[], None]) -> None:
        self.primary.watch_bindings(on_change)

    def writes_while(self, leading: Callable[[], bool]) -> None:
        for gateway in self.gateways.values():
            gateway.writes_while(leading)

    # --- lifecycle ---

    def start(
        self, on_event: Callable[[WatchEvent], None] | None = None, timeout: float = 30.0, probe_every: float = 2.0
    ) -> None:
        """Every cluster's watch cache; one that does not sync in time is logged and left to
        sync in the background (it is not answering: the dispatcher will mark it lost). Raises
        only when none syncs."""
        synced = 0
        for name, gateway in self.gateways.items():
            try:
                gateway.start(on_event, timeout)
                synced += 1
            except Transient as error:
                log.error("cluster %s: %s; its watches keep trying", name, error)
        self.probe()
        if not synced:
            raise Transient("no cluster's watch cache synced")
        self._prober = threading.Thread(target=self._probe_loop, args=(probe_every,), name="cluster-probe", daemon=True)
        self._prober.start()

    def stop(self) -> None:
        self._stop.set()
        for gateway in self.gateways.values():
            gateway.stop()
