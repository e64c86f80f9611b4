"""Phase 1 of a cycle, the snapshot: the database and the cluster's watch cache -> an
Observation (the queueing.Snapshot the planner decides from, and what later phases need).

Reads only. Pending jobs come through the CycleCache (cycle_cache.pending_rows: only the
rows that changed are read in full); quotas, nodes and pods from the gateway's cache, never
from the API server, so building a snapshot costs no round trips.
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
from jobdash.jobs import elastic
from jobdash.jobs.models import Namespace, State
from jobdash.jobs.presenters import overrun_words
from queueing import POLICY_NAMES, PodSet
from queueing.cards import SharedCards
from queueing.devices import derived_totals
from queueing.namespace_quota import NamespaceQuota
from queueing.snapshot import InFlightJob, Node, RunningJob, Snapshot, Taint

from . import card_usage, lending, lost, pod_groups, workflow_holds
from .active import ActiveJob, read_active
from .cycle_cache import CycleCache, PendingRow, pending_rows
from .team_usage import TeamUsage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observation:
    """What phase 1 hands to the rest of the cycle."""

    snapshot: Snapshot  # what plan() decides from
    pending: list[PendingRow]  # the queued jobs with their last written status (phase 4 writes changes only)
    # The Released and Running jobs, read once a cycle: the tracker follows them, preemption
    # and publish name them.
    active: list[ActiveJob]
    # The pods of the active jobs by their object key, as the snapshot saw them: the tracker
    # and publish count their phases without asking the watch cache again.
    active_pods: dict[ObjectKey, list[PodInfo]]
    # Per namespace, its running jobs that have run past their 90 % bound, in words: why a
    # job waiting there is late (statuses).
    overruns: dict[str, list[str]]
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


def _kept(job: ActiveJob) -> ActiveJob:
    """The job as it will be once it has given back its extra pods (resize.py), if it is."""
    if not job.shrink_to:
        return job
    keep = job.shrink_to
    placement = tuple(slot for slot in job.placement if slot[1] < keep.get(slot[0], slot[1] + 1))
    return dataclasses.replace(job, placement=placement, workload=job.workload.with_counts(keep))


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


def _quotas(
    gateway: ClusterGateway, managed: Mapping[str, Mapping[str, Any]], pods: Iterable[PodInfo] = ()
) -> dict[str, NamespaceQuota]:
    """`managed`: per namespace its weight and elastic quota (Namespace rows); `pods`: the live pods."""
    by_namespace = defaultdict(list)
    derived = _derived_used(pods)
    for quota in gateway.quotas():
        namespace = managed.get(quota.namespace)
        if namespace is not None:
            extra = {key: amount for key, amount in derived.get(quota.namespace, {}).items() if key in quota.hard}
            by_namespace[quota.namespace].append(
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
    return {name: NamespaceQuota.combine(quotas) for name, quotas in by_namespace.items()}


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


def build(
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
    """`now`: the cycle's time, in seconds since the epoch (default: the current time);
    `pin`: pods run where the plan put them (their lost places are then replaced)."""
    now = timezone.now().timestamp() if now is None else now
    namespaces = list(
        Namespace.objects.values(
            "name", "weight", "policy", "guaranteed", "cohort", "borrowing_limit", "gpu_hour_budget", "over_budget"
        )
    )
    managed = {row["name"]: row for row in namespaces}
    rows = pending_rows(cache, release_mode=release_mode)
    # The cache keeps finished pods and objects until they are deleted: read only the live
    # pods (node usage) and the pods and objects of released jobs, not all of them.
    live_pods = gateway.live_pods()

    learning = cache.learning
    learning.refresh(cache.workloads)  # before the workloads of jobs no longer active are dropped
    active = read_active(cache.workloads)
    cache.workloads = {job.id: job.workload for job in active}
    by_job = gateway.pods_of_jobs(job.key for job in active)  # the released jobs' for the snapshot, all for publish

    node_infos = gateway.nodes()
    # Pods go where the plan says only when pinned: otherwise no planned node is theirs to lose.
    # (A job that cannot be taken back has nobody to make its pods again elsewhere: not replaced.)
    # (an elastic job giving back pods loses nothing with them: only the pods it keeps count)
    replaceable = [_kept(job) for job in active if kinds.can_take_back(job.kind_key)]
    found = (
        lost.lost(replaceable, by_job, node_infos, live_pods) if pin else lost.Lost((), lost.failed_nodes(node_infos))
    )
    lost_slots = {slot for replacement in found.replacements for slot in replacement.lost}
    in_flight, running = [], []
    overruns: dict[str, list[str]] = defaultdict(list)
    for job in active:
        predicted = job.predicted_duration_s
        if not job.prediction_source:  # (released before predictions were made)
            predicted = learning.predict(job.workload, job.namespace, job.submitted_by_name).median_s
        if job.state == State.RELEASED:
            created = [p for p in by_job.get(job.key, ()) if not p.deleting]
            in_flight.append(
                InFlightJob(
                    id=job.id,
                    namespace=job.namespace,
                    workload=job.workload,
                    # (what it lost is placed anew by the plan: not charged where it was)
                    placements=tuple(p for p in _unbound_placements(job, created) if p not in lost_slots),
                    outstanding=_outstanding(job, created, gateway.job_object(job.key) is not None),
                    released_at=job.released_at or now,
                    expected_duration=predicted,
                )
            )
        else:
            started_at = job.started_at or now
            likely = learning.likely_total(job, now - started_at)
            bound = job.predicted_p90_s
            if bound is not None and now - started_at > bound:
                overruns[job.namespace].append(overrun_words(job.id, job.name, now - started_at, bound))
            running.append(
                RunningJob(
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
                )
            )

    learning.retain(job.id for job in running)
    held = pod_groups.waiting_for_pods(gateway, (row.job for row in rows))
    holds = workflow_holds.read(row.job for row in rows)
    over_budget, budgets = team_usage.budgets(namespaces, now) if team_usage is not None else ({}, {})
    for job_id, dependent in holds.held.items():
        held[job_id] = dataclasses.replace(held[job_id], after=dependent.after) if job_id in held else dependent
    snapshot = Snapshot(
        now=now,
        pending=tuple(held.get(row.job.id, row.job) for row in rows if row.job.id not in holds.never),
        in_flight=tuple(in_flight),
        running=tuple(running),
        quotas=_quotas(gateway, managed, live_pods),
        nodes=_nodes(
            node_infos,
            live_pods,
            card_usage.shared_cards(node_infos, live_pods, active, by_job, lost_slots),
            cache.nodes,
        ),
        node_fit=node_fit,
        policies=namespace_policies((row["name"], row["policy"]) for row in namespaces),
        preemption_limit=preemption_limit,
        topology_levels=topology_levels,
        replacements=found.replacements,
        lent=lending.lent_pools(node_infos, lending.declared_pools(), now),
        groups=holds.groups,
        usage=team_usage.past(now) if team_usage is not None else {},
        budgets=over_budget,
    )
    never = pod_groups.never_created(held, now)
    return Observation(
        snapshot,
        [row for row in rows if row.job.id not in holds.never],
        active,
        by_job,
        dict(overruns),
        found.failed_nodes,
        never,
        node_infos,
        live_pods,
        holds.never,
        budgets,
    )
