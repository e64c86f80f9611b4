"""Phases 1 to 4 of a cycle: the database and the cluster's watch cache -> an Observation
(the queueing.Snapshot the planner decides from, and what later phases need).

1 snapshot (read): the world cloned, the database as the leader's cache keeps it
(state/world.py: only what changed since the last cycle is read) and the watch cache, as a
World; 2 expect: the active jobs' run times expected (predictions.Learning.expected); 3
lost: the planned pods lost to failed or full nodes (lost.account); 4 build: the snapshot
built of them (build). observe runs the four in order (for callers outside a cycle).

Reads only. Quotas, nodes and pods come from the gateway's cache, never from the API
server, so building a snapshot costs no round trips.
"""

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from jobdash.cluster import kinds
from jobdash.cluster.gateway import ClusterGateway, NodeInfo, ObjectKey, PodInfo
from jobdash.dispatch.phases import card_usage, lending, lost, pod_groups, workflow_holds
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.phases.clusters import ClusterWatch
from jobdash.dispatch.phases.team_usage import TeamUsage
from jobdash.dispatch.state import world as world_cache
from jobdash.dispatch.state.cycle_cache import CycleCache, PendingRow
from jobdash.dispatch.state.predictions import Expected
from jobdash.jobs import elastic
from jobdash.jobs.models import State
from queueing import POLICY_NAMES, PodSet, Workload
from queueing.cards import SharedCards
from queueing.defrag import DefragRules
from queueing.devices import derived_totals
from queueing.namespace_quota import NamespaceQuota
from queueing.snapshot import InFlightJob, Node, RunningJob, Snapshot, Taint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observation:
    """What the snapshot's phases (1 to 4) hand to the rest of the cycle."""

    snapshot: Snapshot  # what plan() decides from
    pending: list[PendingRow]  # the queued jobs with their last written status (phase 8 writes changes only)
    # The Released and Running jobs, kept between cycles (world.refresh): the tracker follows
    # them, preemption and publish name them.
    active: list[ActiveJob]
    # The pods of the active jobs by their object key, as the snapshot saw them: the tracker
    # and publish count their phases without asking the watch cache again.
    active_pods: dict[ObjectKey, list[PodInfo]]
    # Nodes that failed (not ready, unreachable, gone): our pods there are made again elsewhere.
    failed_nodes: frozenset[str] = frozenset()
    # Queued jobs of pods none of whose pods was ever created (pod_groups.never_created).
    never_created: tuple[int, ...] = ()
    # The nodes and live pods the snapshot was built from (publish draws shared cards from them).
    node_infos: Sequence[NodeInfo] = ()
    live_pods: Sequence[PodInfo] = ()
    # Queued jobs a dependency of which will never be met, and why (workflow_holds.end cancels them).
    never_met: Mapping[int, str] = dataclasses.field(default_factory=dict)
    # Every namespace budget's use this month (team_usage.py), for the pages (publish).
    budgets: Mapping[str, dict] = dataclasses.field(default_factory=dict)


def _outstanding(job: ActiveJob, created: list[PodInfo], exists: bool) -> dict[str, int]:
    """Quota still to be charged for a released job: the pods not created yet (created pods
    are in ResourceQuota used already), and the object itself until it exists."""
    workload = job.workload
    roles = [ps.role for ps in workload.pod_sets]
    made: dict[str, int] = defaultdict(int)
    for pod in created:
        made[kinds.pod_role(job.kind_key, pod, roles).lower()] += 1
    remaining = tuple(
        PodSet(ps.role, max(0, ps.count - made[ps.role.lower()]), ps.requests, ps.limits) for ps in workload.pod_sets
    )
    demand = dataclasses.replace(workload, pod_sets=remaining).quota_demand(count_object=not exists)
    return {key: amount for key, amount in demand.items() if amount}


def _unbound_placements(job: ActiveJob, created: list[PodInfo]) -> tuple:
    """Planned pods that no node has charged yet: as many of each role's planned pods as
    its pods are not bound (bound pods are in allocated). By count, not by pod index: not
    every kind numbers its pods the way the planner does."""
    if not job.placement:
        return ()
    roles = [ps.role for ps in job.workload.pod_sets]
    bound: dict[str, int] = defaultdict(int)
    for pod in created:
        if pod.node_name and not pod.terminated:
            bound[kinds.pod_role(job.kind_key, pod, roles).lower()] += 1
    unbound = []
    for role, index, node in job.placement:
        if bound[role.lower()] > 0:
            bound[role.lower()] -= 1
        else:
            unbound.append((role, index, node))
    return tuple(unbound)


def _nodes(
    node_infos: list[NodeInfo],
    pods: list[PodInfo],
    cards: Mapping[str, SharedCards],
    kept: dict[str, tuple[tuple, Node]],
) -> tuple[Node, ...]:
    """`pods`: at least every pod not terminated (terminated pods charge no node); `cards`:
    what is on the shared cards of the nodes that share them (card_usage); `kept`: the last
    cycle's Node of each node, with what it was made of, used again where nothing changed
    (what the planner derives from a node is computed once per object: queueing.node_views)."""
    allocated: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        if pod.node_name and not pod.terminated:
            charged = allocated[pod.node_name]
            for name, amount in pod.requests.items():
                charged[name] += amount
            charged["pods"] += 1
    made = []
    for node in sorted(node_infos, key=lambda n: n.name):
        charged = dict(allocated.get(node.name, {}))
        made_of = (node, charged, cards.get(node.name))
        last = kept.get(node.name)
        if last is None or last[0][0] is not node or last[0][1:] != made_of[1:]:
            taints = tuple(
                Taint(t.get("key", ""), t.get("value", "") or "", t.get("effect", "NoSchedule")) for t in node.taints
            )
            last = kept[node.name] = (
                made_of,
                Node(
                    name=node.name,
                    allocatable=node.allocatable,
                    allocated=charged,
                    labels=node.labels,
                    taints=taints,
                    unschedulable=node.unschedulable,
                    cards=made_of[2],
                ),
            )
        made.append(last[1])
    for name in kept.keys() - {node.name for node in node_infos}:
        del kept[name]
    return tuple(made)


def _derived_used(pods: Iterable[PodInfo]) -> dict[str, dict[str, int]]:
    """Per namespace, what its live pods take of the derived device totals (devices.py), in
    quota keys: the API server counts no such key, so its quotas' used says 0."""
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        if not pod.terminated:
            for name, amount in derived_totals(pod.requests).items():
                used[pod.namespace][f"requests.{name}"] += amount
    return used


def _namespace_quotas(by_cluster: Mapping[str, dict[str, NamespaceQuota]]) -> dict[str, NamespaceQuota]:
    """Each namespace's quota in the plan: its one cluster's, or with several, summed over them."""
    return next(iter(by_cluster.values())) if len(by_cluster) == 1 else _summed(by_cluster)


def _summed(by_cluster: Mapping[str, Mapping[str, NamespaceQuota]]) -> dict[str, NamespaceQuota]:
    """Each namespace's quota over every cluster: hard and used summed."""
    summed: dict[str, NamespaceQuota] = {}
    for quotas in by_cluster.values():
        for name, quota in quotas.items():
            before = summed.get(name)
            if before is None:
                summed[name] = quota
                continue
            hard, used = dict(before.hard), dict(before.used)
            for key, amount in quota.hard.items():
                hard[key] = hard.get(key, 0) + amount
            for key, amount in quota.used.items():
                used[key] = used.get(key, 0) + amount
            summed[name] = dataclasses.replace(before, hard=hard, used=used)
    return summed


def _quotas_by_cluster(
    gateway: ClusterGateway, managed: Mapping[str, Mapping[str, Any]], pods: Iterable[PodInfo] = ()
) -> dict[str, dict[str, NamespaceQuota]]:
    """Per cluster ("" for the one cluster), each namespace's quotas there, combined."""
    by_namespace = defaultdict(list)
    derived = _derived_used(pods)
    for quota in gateway.quotas():
        namespace = managed.get(quota.namespace)
        if namespace is not None:
            extra = {key: amount for key, amount in derived.get(quota.namespace, {}).items() if key in quota.hard}
            by_namespace[quota.cluster, quota.namespace].append(
                NamespaceQuota(
                    quota.namespace,
                    quota.hard,
                    {**quota.used, **extra},
                    weight=namespace["weight"],
                    guaranteed=elastic.amounts(namespace["guaranteed"]),
                    cohort=namespace["cohort"],
                    borrowing_limit=elastic.amounts(namespace["borrowing_limit"]),
                )
            )
    by_cluster: dict[str, dict[str, NamespaceQuota]] = defaultdict(dict)
    for (cluster, name), quotas in by_namespace.items():
        by_cluster[cluster][name] = NamespaceQuota.combine(quotas)
    return dict(by_cluster) or {"": {}}


def namespace_policies(rows: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Namespace.policy overrides for Snapshot.policies. The model validates the name on
    save; a name that is no longer a policy (after an upgrade) falls back to the global
    policy with a warning rather than stopping every cycle."""
    policies = {}
    for name, policy in rows:
        if not policy:
            continue
        if policy in POLICY_NAMES:
            policies[name] = policy
        else:
            log.warning("namespace %s: unknown policy %r, using the global policy", name, policy)
    return policies


@dataclass(frozen=True)
class World:
    """What phase 1 (snapshot) clones before anything is made of it."""

    namespaces: Sequence[Mapping[str, Any]]  # the Namespace rows: weight, policy, elastic quota, budget
    rows: list[PendingRow]  # the queued jobs (cycle_cache.pending_rows)
    live_pods: list[PodInfo]  # every pod not finished (node usage)
    active: list[ActiveJob]  # the Released and Running jobs
    pods: dict[ObjectKey, list[PodInfo]]  # the active jobs' pods, by their object key
    nodes: list[NodeInfo]
    # The parsed workloads of the jobs active in the last cycle, those that finished among
    # them: what the leader learns run times from (predictions.Learning.expected).
    workloads_before: dict[int, Workload]


def read(
    gateway: ClusterGateway,
    cache: CycleCache,
    *,
    release_mode: str,
    tables: str | None = None,
    frozen: frozenset[str] = frozenset(),
) -> World:
    """The world cloned: the database as the cache keeps it (world.refresh: what changed
    read, the rest the cache's own objects) and the watch cache. `tables`: phase 0's digest
    of the namespace and lent pool rows (None: the namespaces are read again). `frozen`: lost
    clusters, whose active jobs are left as they are (phases/clusters.py): not in the world."""
    kept = world_cache.refresh(cache, release_mode=release_mode, tables=tables)
    if frozen:
        kept = dataclasses.replace(kept, active=[job for job in kept.active if job.cluster not in frozen])
    # The watch cache keeps finished pods and objects until they are deleted: read only the
    # live pods (node usage) and the pods and objects of released jobs, not all of them.
    live_pods = gateway.live_pods()
    by_job = gateway.pods_of_jobs(
        job.key for job in kept.active
    )  # the released jobs' for the snapshot, all for publish
    return World(kept.namespaces, kept.rows, live_pods, kept.active, by_job, gateway.nodes(), kept.workloads_before)


def _in_flight(
    gateway: ClusterGateway,
    job: ActiveJob,
    pods: list[PodInfo],
    lost_slots: frozenset,
    predicted: float | None,
    now: float,
) -> InFlightJob:
    created = [p for p in pods if not p.deleting]
    return InFlightJob(
        id=job.id,
        namespace=job.namespace,
        workload=job.workload,
        # (what it lost is placed anew by the plan: not charged where it was)
        placements=tuple(p for p in _unbound_placements(job, created) if p not in lost_slots),
        outstanding=_outstanding(job, created, gateway.job_object(job.key) is not None),
        released_at=job.released_at or now,
        expected_duration=predicted,
        cluster=job.cluster,
    )


def _running(job: ActiveJob, predicted: float | None, likely: float | None, now: float) -> RunningJob:
    started_at = job.started_at or now
    return RunningJob(
        job.id,
        job.namespace,
        job.workload,
        started_at=started_at,
        expected_end=None if predicted is None else started_at + predicted,
        likely_end=None if likely is None else started_at + likely,
        priority=job.priority,
        borrowing=job.borrowing,
        placements=job.placement,
        preemptions=job.preemptions,
        # (an elastic job giving back pods: it keeps shrink_to, the others leave for its preemptor)
        preempted_for=None if job.shrink_to else job.preempted_for,
        counts=job.shrink_to or {},
        shrinking_for=job.preempted_for if job.shrink_to else None,
        preemptible=kinds.can_take_back(job.kind_key),
        checkpoint_every_s=job.checkpoint_every_s,
        checkpoint_on_notice_s=job.checkpoint_on_notice_s,
        checkpointed_at=job.last_checkpoint_at,
        min_runtime_s=job.min_runtime_s or 0.0,
        moved_at=job.moved_at,
    )


def build(
    gateway: ClusterGateway,
    world: World,
    expected: Expected,
    found: lost.Lost,
    *,
    node_fit: bool,
    preemption_limit: int | None,
    topology_levels: tuple[str, ...],
    nodes_kept: dict[str, tuple[tuple, Node]],
    now: float,
    team_usage: TeamUsage | None,
    defrag: DefragRules | None = None,
    clusters: ClusterWatch | None = None,
) -> Observation:
    """The snapshot of `world`, with the run times `expected` of its active jobs and the
    planned pods `found` lost. `nodes_kept`: CycleCache.nodes (_nodes)."""
    slots = found.slots
    in_flight, running = [], []
    for job in world.active:
        predicted = expected.durations.get(job.id)
        if job.state == State.RELEASED:
            in_flight.append(_in_flight(gateway, job, world.pods.get(job.key, []), slots, predicted, now))
        else:
            running.append(_running(job, predicted, expected.likely.get(job.id), now))
    rows = world.rows
    held = pod_groups.waiting_for_pods(gateway, (row.job for row in rows))
    holds = workflow_holds.read(row.job for row in rows)
    over_budget, budgets = team_usage.budgets(world.namespaces, now) if team_usage is not None else ({}, {})
    for job_id, dependent in holds.held.items():
        held[job_id] = dataclasses.replace(held[job_id], after=dependent.after) if job_id in held else dependent
    cards = card_usage.shared_cards(world.nodes, world.live_pods, world.active, world.pods, slots)
    kept = [row for row in rows if row.job.id not in holds.never] if holds.never else list(rows)
    managed = {row["name"]: row for row in world.namespaces}
    by_cluster = _quotas_by_cluster(gateway, managed, world.live_pods)
    snapshot = Snapshot(
        now=now,
        pending=tuple(held.get(row.job.id, row.job) for row in kept),
        in_flight=tuple(in_flight),
        running=tuple(running),
        quotas=_namespace_quotas(by_cluster),
        nodes=_nodes(world.nodes, world.live_pods, cards, nodes_kept),
        node_fit=node_fit,
        policies=namespace_policies((row["name"], row["policy"]) for row in world.namespaces),
        preemption_limit=preemption_limit,
        topology_levels=topology_levels,
        replacements=found.replacements,
        lent=lending.lent_pools(world.nodes, lending.declared_pools(), now),
        groups=holds.groups,
        usage=team_usage.past(now) if team_usage is not None else {},
        budgets=over_budget,
        defrag=defrag,
        clusters=clusters.plan_clusters(by_cluster) if clusters is not None else (),
    )
    return Observation(
        snapshot=snapshot,
        pending=kept,
        active=world.active,
        active_pods=world.pods,
        failed_nodes=found.failed_nodes,
        never_created=pod_groups.never_created(held, now),
        node_infos=world.nodes,
        live_pods=world.live_pods,
        never_met=holds.never,
        budgets=budgets,
    )


def observe(
    gateway: ClusterGateway,
    cache: CycleCache,
    *,
    release_mode: str,
    node_fit: bool,
    preemption_limit: int | None,
    topology_levels: tuple[str, ...] = (),
    pin: bool = False,
    now: float | None = None,
    team_usage: TeamUsage | None = None,
) -> Observation:
    """Phases 1 to 4 in order, as a cycle runs them: clone the world, predict the active
    jobs' run times, account the planned pods lost, build the snapshot. `now`: the cycle's
    time, in seconds since the epoch (default: the current time); `pin`: pods run where the
    plan put them (their lost places are then replaced)."""
    now = timezone.now().timestamp() if now is None else now
    world = read(gateway, cache, release_mode=release_mode)
    expected = cache.learning.expected(world.active, world.workloads_before, now)
    found = lost.account(world.active, world.pods, world.nodes, world.live_pods, pin=pin)
    return build(
        gateway,
        world,
        expected,
        found,
        node_fit=node_fit,
        preemption_limit=preemption_limit,
        topology_levels=topology_levels,
        nodes_kept=cache.nodes,
        now=now,
        team_usage=team_usage,
    )
