"""Several clusters in the replay (issue 49, ``--clusters N``, ``--dispatch``).

The split.  The trace's nodes are split into N clusters of whole racks
(``mapping.cluster_of_racks``: the racks in node order, contiguous, each to the cluster in
whose equal share of the GPUs its middle lies; on the Philly cluster 2 clusters of 22 racks,
or 3 of 15, 14 and 15).  Each node carries ``jobdash.io/cluster: c<i>``
(``queueing.clusters.CLUSTER_LABEL``).  kubesim stays one cluster with one API: the split is
the labels and what the planner is told, and since pods are pinned to their planned nodes
(the default; ``--no-pin`` is refused with clusters) a job's pods bind where it was planned.

Quota stays jobdash-wide: each namespace's ResourceQuota is the one the replay always had
(fixed: VC nodes x 8 GPUs; borrow and elastic: the whole cluster, the VC's share its
guarantee), and no cluster has quotas of its own (``Cluster.quotas`` empty), so every
cluster takes every namespace.  Nothing had to be split: kubesim counts the quota once,
over all nodes, as the dispatcher sums a namespace's quotas over its clusters.

``--dispatch plan`` (the default): one ``queueing.plan`` over every node, its Snapshot given
``clusters=(Cluster("c0"), ...)``; the planner keeps each gang inside one cluster and names
it (``Admission.cluster``).  ``--clusters 1`` labels the nodes and names the one cluster,
and plans as without it.

``--dispatch first-admits``: the yardstick of MultiKueue (AllAtOnce): a job is copied to
every cluster's own queue and the first cluster that admits it wins it, the copies
elsewhere removed.  Modelled as N independent planners, one per cluster.  Each cycle the
clusters take turns in a rotating order (cycle k starts with cluster k mod N, then the
next ones in name order, wrapping): each turn is one ``plan()`` over a snapshot of that
cluster's nodes and of the jobs running there, with the jobs queued and not admitted by an
earlier turn of this cycle, and of that one cluster alone (the planner has no cluster to
choose).  Its admissions win: they are released at once (created, in flight: the next
turns' snapshots reserve their quota, while their nodes, not in those snapshots, charge
nothing there), and leave the queue for the next turns.  The quota is the same as with
``plan``; the in-flight jobs of every cluster count against it.  Each planner preempts
only among its own cluster's running jobs, for its copy of a job: a job may so have
victims in more than one cluster; once it is admitted anywhere the others' are called off
at the end of their grace, as the replay always does (preemption.py).  The per-cluster
planners forecast no start times (the summary's ``eta`` figures are then empty), and this
mode is not combined with lent nodes or elastic jobs (nor is ``plan``).

Either way every admission's pods must lie in one cluster (its planned nodes, and each pod
as it binds): the replay raises ``AssertionError`` otherwise.  GPU-seconds run are counted
per cluster as each run ends (``stats["gpu_s_by_cluster"]``; runs still going at the end
are added by the summary: ``gpu_hours_by_cluster``).
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from queueing import Node
from queueing.clusters import CLUSTER_LABEL, Cluster
from queueing.reasons import Reason

from .records import FIRST_ADMITS, JobRecord


class MultiCluster:
    """Mixed into ``engine.Replay`` (before ``AdmissionCycles``, whose cycle it takes over in
    first-admits mode, and ``Lending``, whose end of a run it extends)."""

    def _init_clusters(self) -> None:
        count = self.config.clusters
        self.cluster_names = tuple(f"c{i}" for i in range(count))
        # What the plan is told (empty: no clusters, the replay as before issue 49).
        self.plan_clusters = tuple(Cluster(name) for name in self.cluster_names)
        self.node_cluster = {name: labels.get(CLUSTER_LABEL, "") for name, labels in self.node_labels.items()}
        self.first_admits = self.config.dispatch == FIRST_ADMITS
        self._cluster_nodes: dict[str, tuple[Node, ...]] = {}
        self._cluster_nodes_of: tuple[Node, ...] | None = None
        if count:
            self.stats["gpu_s_by_cluster"] = dict.fromkeys(self.cluster_names, 0.0)
            self.stats["admitted_by_cluster"] = dict.fromkeys(self.cluster_names, 0)
            if self.first_admits:
                self.stats["cluster_plans"] = 0
        # (lost_cluster.py: a cluster lost a while, which reads the names above)
        self._init_lost_cluster()  # type: ignore[attr-defined]

    # -- one cluster per gang ------------------------------------------------------------------

    def _in_one_cluster(self, rec: JobRecord, admission: Any) -> None:
        """The admission's pods all in one cluster, the one the plan names (if it names one):
        that cluster is the job's until its next release.  Raises otherwise."""
        if not self.cluster_names:
            return
        clusters = {self.node_cluster.get(node, "") for _, _, node in admission.placement or ()}
        if len(clusters) != 1 or "" in clusters:
            raise AssertionError(f"job {rec.job.id}'s pods span clusters {sorted(clusters)}: {admission.placement}")
        (cluster,) = clusters
        if admission.cluster and admission.cluster != cluster:
            raise AssertionError(f"job {rec.job.id} admitted to {admission.cluster} with its pods in {cluster}")
        rec.cluster = cluster
        self.stats["admitted_by_cluster"][cluster] += 1

    def _bound_in_cluster(self, rec: JobRecord, node: str) -> None:
        """A pod of the job bound to ``node``: in the job's cluster, or the replay raises."""
        if self.node_cluster.get(node, "") != rec.cluster:
            raise AssertionError(
                f"job {rec.job.id} (cluster {rec.cluster}) has a pod bound to {node} "
                f"in cluster {self.node_cluster.get(node)!r}"
            )

    def _ran(self, rec: JobRecord, now: float) -> None:
        """A run of the job ends: its GPU-seconds to its cluster (then the run's other counts)."""
        if self.cluster_names and rec.run_started_at is not None:
            self.stats["gpu_s_by_cluster"][rec.cluster] += rec.gpus * (now - rec.run_started_at)
        super()._ran(rec, now)  # type: ignore[misc]

    # -- first-admits: a planner per cluster ---------------------------------------------------

    def _cycle(self, now: float) -> None:
        if not self.first_admits:
            super()._cycle(now)  # type: ignore[misc]
            return
        stats = self.stats
        if self._cycle_begins(now):  # (no forecasts: the next forecasting hour, as if made)
            every = self.config.eta_every_s
            self.next_eta = self.start + ((now - self.start) // every + 1) * every
        running = tuple(self.running.values()) if self.needs_running else ()
        lost = self._lost()
        names = self.cluster_names
        number_of = {name: number for number, name in enumerate(names)}
        turn = (stats["cycles"] - 1) % len(names)
        queued = dict(self.pending)  # not admitted by an earlier turn of this cycle
        statuses: dict[int, Any] = {}
        admitted = False
        later_queued = 0  # (the mean queue at a cycle counts the first turn's alone)
        for number, name in enumerate(names[turn:] + names[:turn]):
            began = time.perf_counter()
            records = self.records
            its_lost = tuple(replacement for replacement in lost if records[replacement.job_id].cluster == name)
            snapshot = self._snapshot(
                now,
                tuple(queued.values()),
                self._nodes_of(name),
                tuple(job for job in running if records[job.id].cluster == name),
                its_lost,
                False,
                self.plan_clusters[number_of[name] :][:1],  # (its own cluster alone: no choice of cluster)
            )
            result = self._plan(snapshot, False, began)
            stats["cluster_plans"] += 1
            later_queued += len(snapshot.pending) if number else 0
            for admission in result.admissions:
                del queued[admission.job_id]
                self._release(admission, now)
                admitted = True
            if self.preempts and result.preemptions:
                self._mark_victims(result.preemptions, now)
            if result.replacements or result.evictions:
                self._replace(result, its_lost, now)
            for job_id, status in result.pending.items():  # (a copy waiting for victims anywhere: Preempting)
                if statuses.get(job_id) is None or status.reason is Reason.PREEMPTING:
                    statuses[job_id] = status
        stats["queue_len_sum"] -= later_queued
        if admitted:
            began = time.perf_counter()
            self.cluster.settle()
            stats["cluster_s"] += time.perf_counter() - began
        waiting = SimpleNamespace(pending={job_id: statuses[job_id] for job_id in queued if job_id in statuses})
        if self.preempts:
            self._note_preempting(waiting)
        self._track(now)
        self._pin()
        self._heads(waiting, now)

    def _nodes_of(self, name: str) -> tuple[Node, ...]:
        """The cluster's nodes, as the watch cache shows them now."""
        nodes = self._nodes()
        if nodes is not self._cluster_nodes_of:  # (a node changed: the tuples anew)
            self._cluster_nodes_of = nodes
            by_cluster: dict[str, list[Node]] = {cluster: [] for cluster in self.cluster_names}
            for node in nodes:
                by_cluster[self.node_cluster[node.name]].append(node)
            self._cluster_nodes = {cluster: tuple(found) for cluster, found in by_cluster.items()}
        return self._cluster_nodes[name]
