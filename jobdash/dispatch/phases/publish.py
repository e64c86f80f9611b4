"""Publish what a cycle saw of the cluster (quotas with reservations, nodes, the pods of
jobdash's jobs) to the database, where the web processes read it."""

from collections import defaultdict
from collections.abc import Iterable, Mapping

from django.utils import timezone

from jobdash.cluster import kinds
from jobdash.cluster.devices import NodeCards
from jobdash.cluster.gateway import ObjectKey, PodInfo
from jobdash.dispatch.phases import card_usage
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.phases.lost import FAILED_TAINTS
from jobdash.dispatch.phases.snapshot_phase import Observation
from jobdash.jobs.models import ClusterState
from queueing.snapshot import Snapshot
from queueing.tide import LentPool, clock_words

GPU = "nvidia.com/gpu"
PODS_SHOWN = 64  # a job's pods listed one by one on its page; beyond, counted only


def cluster_summary(
    snapshot: Snapshot,
    gpus_by_job: Mapping[str, Mapping[str, int]] | None = None,
    cards: Mapping[str, list[dict]] | None = None,
) -> tuple[dict, list]:
    """`gpus_by_job`: per node, the GPUs each of our jobs' pods hold there ("namespace/name");
    `cards`: per node that shares its GPUs by memory, its cards (card_usage.card_rows)."""
    gpus_by_job, cards = gpus_by_job or {}, cards or {}
    reserved: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for job in snapshot.in_flight:
        for key, amount in job.outstanding.items():
            reserved[job.namespace][key] += amount
    quotas = {
        name: {"hard": dict(q.hard), "used": dict(q.used), "reserved": dict(reserved.get(name, {}))}
        for name, q in snapshot.quotas.items()
    }
    lent = {name: pool for pool in snapshot.lent for name in pool.nodes}
    nodes = [
        {
            "name": n.name,
            "allocatable": dict(n.allocatable),
            "allocated": dict(n.allocated),
            "labels": dict(n.labels),
            "unschedulable": n.unschedulable,
            "failed": any(t.key in FAILED_TAINTS for t in n.taints),
            "jobs": dict(gpus_by_job.get(n.name, {})),
            **({"cards": cards[n.name]} if n.name in cards else {}),
            **({"lent": _lending(lent[n.name], snapshot.now)} if n.name in lent else {}),
        }
        for n in snapshot.nodes
    ]
    return quotas, nodes


def _lending(pool: LentPool, now: float) -> dict:
    """A lent node's pool, when it goes back and when nothing new starts there, in its
    pool's words (a pool not lent now: it goes back now)."""
    return {
        "pool": pool.name,
        "reclaim_at": pool.reclaim_at,
        "notice_from": pool.reclaim_at - pool.notice_s,
        "words": f"lent ({pool.name}) until {clock_words(pool.reclaim_at, pool.timezone, now)}"
        if pool.reclaim_at > now
        else f"not lent now ({pool.name})",
    }


def gpus_by_job(active: Iterable[ActiveJob], pods: Mapping[ObjectKey, Iterable[PodInfo]]) -> dict[str, dict[str, int]]:
    """Per node, the GPUs the live pods of each active job hold there."""
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for job in active:
        label = f"{job.namespace}/{job.name}"
        for pod in pods.get(job.key, ()):
            gpus = pod.requests.get(GPU, 0)
            if pod.node_name and gpus and not pod.terminated:
                on = found[pod.node_name]
                on[label] = on.get(label, 0) + gpus
    return found


def pod_phases(
    active: Iterable[ActiveJob],
    pods: Mapping[ObjectKey, Iterable[PodInfo]],
    sharing: Mapping[str, NodeCards] | None = None,
) -> dict:
    """{"namespace/name": {"job": job id, "replicas": {role: {phase: count}}}} for the pods
    of the active jobs (`pods`: the snapshot's, by object key: no extra call to the
    cluster; the watch cache keeps the pods of finished jobs until they are deleted, and a
    cycle must not cost more with every job that ever ran). Keyed by the job's name, not
    its id: a JSON key of digits reads as an array index in PostgreSQL's JSON
    paths, and the page looks up one job's key only. A pod being deleted counts as
    Terminating. `sharing`: the nodes whose GPUs are shared by memory: a pod there lists
    the cards it got (by index on its node)."""
    counts: dict[str, dict] = {}
    sharing = sharing or {}
    for job in active:
        roles = [ps.role for ps in job.workload.pod_sets]
        for pod in pods.get(job.key, ()):
            phase = "Terminating" if pod.deleting else pod.phase
            entry = counts.setdefault(f"{job.namespace}/{job.name}", {"job": job.id, "replicas": {}, "pods": []})
            # A kind whose pods carry no role label (a batch Job) counts them under its one pod
            # set's role, the row the page shows as wanted; "pods" if it has several.
            role = kinds.pod_role(job.kind_key, pod, roles) or "pods"
            phases = entry["replicas"].setdefault(role, {})
            phases[phase] = phases.get(phase, 0) + 1
            if len(entry["pods"]) < PODS_SHOWN:
                node = pod.node_name or pod.selected_node or ""
                shown = {
                    "name": pod.name,
                    "role": kinds.pod_role(job.kind_key, pod, roles),
                    "phase": phase,
                    "node": node,
                    "gated": bool(pod.gates),
                }
                if node in sharing and pod.cards:
                    indexes = [sharing[node].index(card) for card in pod.cards]
                    shown["cards"] = [index for index in indexes if index is not None]
                entry["pods"].append(shown)
    return counts


def jobs_of_pods(
    active: Iterable[ActiveJob], pods: Mapping[ObjectKey, Iterable[PodInfo]]
) -> dict[tuple[str, str], str]:
    """(namespace, pod name) -> "namespace/job" for the live pods of the active jobs."""
    return {(pod.namespace, pod.name): f"{job.namespace}/{job.name}" for job in active for pod in pods.get(job.key, ())}


def publish(
    snapshot: Snapshot,
    pods: dict | None = None,
    gpus: Mapping[str, Mapping[str, int]] | None = None,
    cards: Mapping[str, list[dict]] | None = None,
    budgets: Mapping[str, dict] | None = None,
) -> None:
    """`budgets`: each namespace budget's use this month (team_usage.py), under its quota's entry
    (a namespace with no ResourceQuota has none: its budget is shown from the console)."""
    quotas, nodes = cluster_summary(snapshot, gpus, cards)
    for name, budget in (budgets or {}).items():
        if name in quotas:
            quotas[name]["budget"] = budget
    fields = {"updated_at": timezone.now(), "quotas": quotas, "nodes": nodes, "pods": pods or {}}
    # Every cycle publishes: one UPDATE, not update_or_create's transaction, locking read and update.
    if not ClusterState.objects.filter(id=1).update(**fields):
        ClusterState.objects.update_or_create(id=1, defaults=fields)


def observation(observed: Observation) -> None:
    """Phase 13: what the cycle's snapshot saw of quotas (with reservations), nodes and our
    pods' phases, published. Shared cards are drawn only on clusters that share GPUs."""
    shared_cards: dict[str, list[dict]] = {}
    sharing = {}
    if any(node.cards is not None for node in observed.snapshot.nodes):
        infos = observed.node_infos
        sharing = {info.name: info.cards for info in infos if info.cards is not None}
        shared_cards = card_usage.card_rows(
            observed.snapshot.nodes,
            infos,
            observed.live_pods,
            jobs_of_pods(observed.active, observed.active_pods),
        )
    publish(
        observed.snapshot,
        pod_phases(observed.active, observed.active_pods, sharing),
        gpus_by_job(observed.active, observed.active_pods),
        shared_cards,
        observed.budgets,
    )
