"""Phase 1 of a cycle, the snapshot: the database and the cluster's watch cache -> an
Observation (the queueing.Snapshot the planner decides from, and what later phases need).

Reads only. Pending jobs come from one query; quotas, nodes and pods from the gateway's
cache, never from the API server, so building a snapshot costs no round trips.
"""

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobdash.cluster import kinds
from jobdash.cluster.gateway import ClusterGateway, ObjectKey, PodInfo
from jobdash.jobs import elastic
from jobdash.jobs.models import Job, Namespace, State
from queueing import POLICY_NAMES, PodSet, Reason, Workload
from queueing.snapshot import InFlightJob, NamespaceQuota, Node, PendingJob, RunningJob, Snapshot, Taint

log = logging.getLogger(__name__)
HISTORY_SIZE = 20  # finished runs per (namespace, shape) kept for duration estimates


def epoch(moment) -> float | None:
    return moment.timestamp() if moment is not None else None


@dataclass
class PendingRow:
    """What the cycle needs of a queued job, plus its last written status (to skip unchanged rows)."""

    job: PendingJob
    position: int | None
    reason: str
    message: str
    eta: float | None


@dataclass(frozen=True)
class Observation:
    """What phase 1 hands to the rest of the cycle."""

    snapshot: Snapshot  # what plan() decides from
    pending: list[PendingRow]  # the queued jobs with their last written status (phase 4 writes changes only)
    # The pods of the Released/Running jobs by their object key, as the snapshot saw
    # them: publish counts their phases without asking the watch cache again.
    active_pods: dict[ObjectKey, list[PodInfo]]


class CycleCache:
    """What one snapshot keeps for the next, because it never changes once built and
    building it is most of a snapshot's per-job cost:

    - the PendingJob of each queued job (its parsed workload and pod groups), rebuilt only
      when the row's priority, attempts or backoff change;
    - the parsed workloads of the active (Released/Running) jobs;
    - the namespace, shape and run time of recently finished jobs (the duration history).
    """

    def __init__(self) -> None:
        self._jobs: dict[int, tuple[tuple, PendingJob]] = {}
        # A job's workload never changes after submission: parsed once while it is active,
        # and its duration-history shape once it has finished.
        self.workloads: dict[int, Workload] = {}
        self.finished: dict[int, tuple[str, str, float]] = {}  # id -> (namespace, shape, run seconds)

    @staticmethod
    def _version(row: Mapping[str, Any], drop_count: bool) -> tuple:
        preempting = row["reason"] == str(Reason.PREEMPTING)
        return (row["priority"], row["attempts"], row["backoff_until"], drop_count, row["preempted_by_id"], preempting)

    def fresh(self, row: Mapping[str, Any], *, drop_count: bool) -> bool:
        """Whether get(row) can answer without the row's workload."""
        cached = self._jobs.get(row["id"])
        return cached is not None and cached[0] == self._version(row, drop_count)

    def get(self, row: Mapping[str, Any], workload_json: Any, *, drop_count: bool) -> PendingJob:
        """`workload_json`: the row's stored workload; only read when the row is not fresh()."""
        version = self._version(row, drop_count)
        cached = self._jobs.get(row["id"])
        if cached is not None and cached[0] == version:
            return cached[1]
        workload = Workload.from_json(workload_json)
        demand = workload.quota_demand()
        # In unsuspend mode the suspended object already exists and counts in quota used; so
        # does the object of a job preempted by suspending it.
        if drop_count or (row["preemptions"] and kinds.can_suspend(kinds.key_of(row["api_version"], row["kind"]))):
            demand.pop(kinds.count_key(workload.api_version, workload.kind), None)
        job = PendingJob(
            id=row["id"],
            namespace=row["namespace__name"],
            priority=row["priority"],
            submitted_at=row["submitted_at"].timestamp(),
            workload=workload,
            attempts=row["attempts"],
            backoff_until=epoch(row["backoff_until"]),
            demand=demand,
            preempted_by=row["preempted_by_id"],
            preempting=row["reason"] == str(Reason.PREEMPTING),
        )
        self._jobs[row["id"]] = (version, job)
        return job

    def retain(self, ids: Iterable[int]) -> None:
        keep = set(ids)
        for job_id, (_version, job) in self._jobs.items():
            if job_id not in keep:
                # Most jobs leave the queue by release: build() wants the workload next.
                self.workloads.setdefault(job_id, job.workload)
        self._jobs = {i: entry for i, entry in self._jobs.items() if i in keep}


def pending_rows(cache: CycleCache, *, release_mode: str) -> list[PendingRow]:
    rows = list(
        Job.objects.filter(state=State.QUEUED).values(
            "id",
            "namespace__name",
            "priority",
            "submitted_at",
            "attempts",
            "backoff_until",
            "position",
            "reason",
            "message",
            "eta",
            "preemptions",
            "kind",
            "api_version",
            "preempted_by_id",
        )
    )
    drop_count = release_mode == "unsuspend"
    # The workload column (the bulk of a row) only for jobs the cache cannot answer.
    stale = [row["id"] for row in rows if not cache.fresh(row, drop_count=drop_count)]
    workloads = dict(Job.objects.filter(pk__in=stale).values_list("id", "workload")) if stale else {}
    result = [
        PendingRow(
            cache.get(row, workloads.get(row["id"]), drop_count=drop_count),
            row["position"],
            row["reason"],
            row["message"],
            epoch(row["eta"]),
        )
        for row in rows
    ]
    cache.retain(row.job.id for row in result)
    return result


def _outstanding(kind_key: str, workload: Workload, created: list[PodInfo], exists: bool) -> dict[str, int]:
    """Quota still to be charged for a released job: the pods not created yet (created pods
    are in ResourceQuota used already), and the object itself until it exists."""
    roles = [ps.role for ps in workload.pod_sets]
    made: dict[str, int] = defaultdict(int)
    for pod in created:
        made[kinds.pod_role(kind_key, pod, roles).lower()] += 1
    remaining = tuple(
        PodSet(ps.role, max(0, ps.count - made[ps.role.lower()]), ps.requests, ps.limits) for ps in workload.pod_sets
    )
    demand = Workload(workload.kind, workload.api_version, workload.name, workload.namespace, remaining).quota_demand()
    if exists:
        demand.pop(kinds.count_key(workload.api_version, workload.kind), None)
    return {key: amount for key, amount in demand.items() if amount}


def _unbound_placements(kind_key: str, workload: Workload, placement, created: list[PodInfo]) -> tuple:
    """Planned pods that no node has charged yet: as many of each role's planned pods as
    its pods are not bound (bound pods are in allocated). By count, not by pod index: not
    every kind numbers its pods the way the planner does."""
    if not placement:
        return ()
    roles = [ps.role for ps in workload.pod_sets]
    bound: dict[str, int] = defaultdict(int)
    for pod in created:
        if pod.node_name and not pod.terminated:
            bound[kinds.pod_role(kind_key, pod, roles).lower()] += 1
    unbound = []
    for role, index, node in placement:
        if bound[role.lower()] > 0:
            bound[role.lower()] -= 1
        else:
            unbound.append((role, index, node))
    return tuple(unbound)


def _nodes(gateway: ClusterGateway, pods: list[PodInfo]) -> tuple[Node, ...]:
    """`pods`: at least every pod not terminated (terminated pods charge no node)."""
    allocated: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        if pod.node_name and not pod.terminated:
            charged = allocated[pod.node_name]
            for name, amount in pod.requests.items():
                charged[name] += amount
            charged["pods"] += 1
    return tuple(
        Node(
            name=node.name,
            allocatable=node.allocatable,
            allocated=dict(allocated.get(node.name, {})),
            labels=node.labels,
            taints=tuple(
                Taint(t.get("key", ""), t.get("value", "") or "", t.get("effect", "NoSchedule")) for t in node.taints
            ),
            unschedulable=node.unschedulable,
        )
        for node in sorted(gateway.nodes(), key=lambda n: n.name)
    )


def _quotas(gateway: ClusterGateway, managed: Mapping[str, Mapping[str, Any]]) -> dict[str, NamespaceQuota]:
    """`managed`: per namespace its weight and elastic quota (Namespace rows)."""
    by_namespace = defaultdict(list)
    for quota in gateway.quotas():
        namespace = managed.get(quota.namespace)
        if namespace is not None:
            by_namespace[quota.namespace].append(
                NamespaceQuota(
                    quota.namespace,
                    quota.hard,
                    quota.used,
                    weight=namespace["weight"],
                    guaranteed=elastic.amounts(namespace["guaranteed"]),
                    cohort=namespace["cohort"],
                    borrowing_limit=elastic.amounts(namespace["borrowing_limit"]),
                )
            )
    return {name: NamespaceQuota.combine(quotas) for name, quotas in by_namespace.items()}


def _workloads(ids: Iterable[int], known: Mapping[int, object]) -> dict[int, Workload]:
    """Parsed workloads of the jobs in `ids` that are not in `known`, in one query."""
    missing = [job_id for job_id in ids if job_id not in known]
    if not missing:
        return {}
    rows = Job.objects.filter(pk__in=missing).values_list("id", "workload")
    return {job_id: Workload.from_json(data) for job_id, data in rows}


def history(cache: CycleCache | None = None) -> dict[tuple[str, str], tuple[float, ...]]:
    """Recent run durations of succeeded jobs, by namespace and shape."""
    from queueing.eta import shape_key

    cache = cache if cache is not None else CycleCache()
    # Which jobs are the recent ones is asked every time; what they were (namespace, shape,
    # run time) never changes once they finished, so it is read once per job.
    recent = list(
        Job.objects.filter(state=State.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("id", flat=True)[:2000]
    )
    known = {job_id: cache.finished[job_id] for job_id in recent if job_id in cache.finished}
    missing = [job_id for job_id in recent if job_id not in known]
    if missing:
        # Jobs that just finished were active a moment ago: their workloads are parsed already.
        parsed = {job_id: cache.workloads[job_id] for job_id in missing if job_id in cache.workloads}
        rows = list(
            Job.objects.filter(pk__in=missing).values_list("id", "namespace__name", "started_at", "finished_at")
        )
        unparsed = _workloads((row[0] for row in rows), parsed)
        for job_id, namespace, started_at, finished_at in rows:
            workload = parsed.get(job_id) or unparsed[job_id]
            assert started_at is not None and finished_at is not None  # `recent` are finished jobs that ran
            known[job_id] = (namespace, shape_key(workload), (finished_at - started_at).total_seconds())
    cache.finished = known
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for job_id in recent:
        namespace, shape, seconds = known[job_id]
        key = (namespace, shape)
        if len(runs[key]) < HISTORY_SIZE:
            runs[key].append(seconds)
    return {key: tuple(values) for key, values in runs.items()}


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


def build(gateway: ClusterGateway, cache: CycleCache, *, release_mode: str, node_fit: bool) -> Observation:
    now = timezone.now().timestamp()
    namespaces = list(Namespace.objects.values("name", "weight", "policy", "guaranteed", "cohort", "borrowing_limit"))
    managed = {row["name"]: row for row in namespaces}
    rows = pending_rows(cache, release_mode=release_mode)
    # The cache keeps finished pods and objects until they are deleted: read only the live
    # pods (node usage) and the pods and objects of released jobs, not all of them.
    live_pods = gateway.live_pods()

    in_flight, running = [], []
    active = list(
        Job.objects.filter(state__in=(State.RELEASED, State.RUNNING)).values(
            "id",
            "namespace__name",
            "name",
            "kind",
            "api_version",
            "state",
            "placement",
            "released_at",
            "started_at",
            "priority",
            "borrowing",
            "preemptions",
            "preempted_for_id",
        )
    )
    keys = {
        row["id"]: kinds.object_key(row["api_version"], row["kind"], row["namespace__name"], row["name"])
        for row in active
    }
    by_job = gateway.pods_of_jobs(keys.values())  # the released jobs' for the snapshot, all for publish
    exists = {
        keys[row["id"]] for row in active if row["state"] == State.RELEASED and gateway.job_object(keys[row["id"]])
    }
    recent_runs = history(cache)  # before the workloads of jobs no longer active are dropped
    workloads = {row["id"]: cache.workloads[row["id"]] for row in active if row["id"] in cache.workloads}
    workloads.update(_workloads((row["id"] for row in active), workloads))
    cache.workloads = workloads
    for row in active:
        key = keys[row["id"]]
        namespace = row["namespace__name"]
        workload = workloads[row["id"]]
        if row["state"] == State.RELEASED:
            created = [p for p in by_job.get(key, ()) if not p.deleting]
            in_flight.append(
                InFlightJob(
                    id=row["id"],
                    namespace=namespace,
                    workload=workload,
                    placements=_unbound_placements(key[0], workload, row["placement"], created),
                    outstanding=_outstanding(key[0], workload, created, key in exists),
                    released_at=epoch(row["released_at"]) or now,
                )
            )
        else:
            running.append(
                RunningJob(
                    row["id"],
                    namespace,
                    workload,
                    started_at=epoch(row["started_at"]) or now,
                    priority=row["priority"],
                    borrowing=row["borrowing"],
                    placements=tuple(tuple(pod) for pod in row["placement"] or ()),
                    preemptions=row["preemptions"],
                    preempted_for=row["preempted_for_id"],
                )
            )

    snapshot = Snapshot(
        now=now,
        pending=tuple(row.job for row in rows),
        in_flight=tuple(in_flight),
        running=tuple(running),
        quotas=_quotas(gateway, managed),
        nodes=_nodes(gateway, live_pods),
        node_fit=node_fit,
        history=recent_runs,
        policies=namespace_policies((row["name"], row["policy"]) for row in namespaces),
        preemption_limit=settings.JOBDASH_PREEMPTION_LIMIT,
    )
    return Observation(snapshot, rows, by_job)
