"""Reads of what the dispatcher records (Fence, Cycle, ClusterState): who leads, the last
cycles, and the cluster as the last cycle saw it. The status API, the page header, the
staff cluster page and GET /api/v1/cluster/ all read through here, so they cannot disagree.

Numbers stay canonical integers (cpu in millicores, memory in bytes, GPUs and pods as
counts); the page formats them.
"""

from typing import Any

from django.conf import settings
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from queueing.cluster_request import CLUSTER_LABEL
from queueing.topology import HOSTNAME

from . import card_selectors, cluster_port
from .models import ClusterState, Cycle, Fence, Namespace, State

# Plain names for the Kubernetes resources shown (a dotted name cannot be a serializer
# field or a template lookup): gpu is nvidia.com/gpu.
RESOURCES = {"cpu": "cpu", "memory": "memory", "gpu": "nvidia.com/gpu", "pods": "pods"}
GPU_SIZES = (1, 2, 4, 8)
RECENT_CYCLES = 20


def leading_term() -> int | None:
    """The term the fence records: the newest leader's, under which alone jobdash's writes
    pass (None before any leader). The webhook's fence and the dispatcher's tasks read it."""
    return Fence.objects.filter(id=1).values_list("term", flat=True).first()


def leader(*, reveal_identity: bool) -> dict:
    """The recorded leadership (the fence), checked against the election backend when there
    is one: a leader whose lock is gone is reported as not alive, not as leading. Its
    identity (host:pid) is for staff: `reveal_identity` False reports it as None."""
    fence = Fence.objects.filter(id=1).first()
    status = {
        "backend": settings.JOBDASH_LEADER,
        "identity": fence.holder if fence and reveal_identity else None,
        "term": fence.term if fence else None,
        "since": fence.since if fence else None,
        "alive": None,
    }
    if fence is None:
        return status
    if settings.JOBDASH_LEADER == "none":
        status["alive"] = True
        return status
    try:
        status["alive"] = cluster_port.leader_term() == fence.term
    except cluster_port.ElectionUnreadable:
        status["alive"] = None  # unknown, not "no leader"
    return status


def _cycle_row(cycle: Cycle) -> dict:
    return {
        "started_at": cycle.started_at,
        "duration_ms": cycle.duration_ms,
        "policy": cycle.policy,
        "pending": cycle.pending,
        "admitted": cycle.admitted,
        "released": cycle.released,
        "term": cycle.term,
    }


def recent_cycles(limit: int = RECENT_CYCLES) -> list[dict]:
    """The most recent first."""
    return [_cycle_row(cycle) for cycle in Cycle.objects.order_by("-started_at")[:limit]]


def last_cycle() -> dict | None:
    """The most recent cycle with its phase timings (phase -> milliseconds)."""
    cycle = Cycle.objects.order_by("-started_at").first()
    if cycle is None:
        return None
    return {**_cycle_row(cycle), "phases": cycle.phases}


def several_clusters() -> bool:
    """Whether jobdash dispatches to several clusters (issue 49: JOBDASH_CLUSTERS; the
    dispatcher keeps a Cluster row for each): the pages then name each job's cluster."""
    return cluster_port.several_clusters()


def cluster_trouble(name: str) -> str:
    """ "" while the cluster `name` answers (or is unknown: one cluster); else its health in
    words, for the page of a job released there."""
    if not name:
        return ""
    found = next(iter(cluster_port.clusters(name)), None)
    if found is None:
        return ""
    if found["health"] == "Lost":  # (jobdash.clusters.models.ClusterHealth)
        return "lost: its API server does not answer; its jobs there wait for it"
    if found["health"] == "Returning":
        return "returning: answering again, the copies left there being deleted"
    return "cordoned: nothing new is sent there" if found["cordoned"] else ""


def node_rows(nodes: list[dict]) -> list[dict]:
    rows = []
    for node in sorted(nodes, key=lambda n: n.get("name", "")):
        allocatable, allocated = node.get("allocatable", {}), node.get("allocated", {})
        cards = card_selectors.cards_of(node)
        resources = {}
        for r, key in RESOURCES.items():
            total, used = int(allocatable.get(key, 0)), int(allocated.get(key, 0))
            resources[r] = {"allocatable": total, "allocated": used, "free": max(total - used, 0)}
        # Whole GPUs only: a shared node's nvidia.com/gpu (HAMi's vGPUs) is not that many cards.
        resources["gpu"] = card_selectors.whole_gpus(node, cards)
        labels = dict(node.get("labels", {}))
        rows.append(
            {
                "name": node.get("name", ""),
                "cluster": labels.get(CLUSTER_LABEL, ""),  # (several clusters: the gateway's label)
                "unschedulable": bool(node.get("unschedulable")),
                "failed": bool(node.get("failed")),
                "labels": labels,
                # Its domain at each topology level above the host ("block1 / rack2").
                "domain": " / ".join(labels.get(level, "–") for level in topology_levels() if level != HOSTNAME),
                "resources": resources,
                "jobs": dict(node.get("jobs", {})),  # GPUs held there by each of jobdash's jobs
                "sharing": card_selectors.sharing_model(cards),  # "" | "gpushare" | "hami" | a site's model
                "cards": cards,
                "slices": card_selectors.slices_of(node),  # MIG slices, time-sliced replicas
                "replicas": card_selectors.replicas_of(node),
                "lent": _lent(node.get("lent")),
            }
        )
    return rows


def _lent(published) -> str:
    """How the node is lent, in words ("lent (night-a) until 08:00"); "" when it is not."""
    return str(published.get("words", "")) if isinstance(published, dict) else ""


def topology_levels() -> tuple[str, ...]:
    """The node labels that name topology levels, the widest first (JOBDASH_TOPOLOGY_LEVELS)."""
    return tuple(settings.JOBDASH_TOPOLOGY_LEVELS)


def domain_rows(rows: list[dict]) -> list[dict]:
    """Per domain of the level above the host (a rack): its nodes, GPUs free of all, and
    how many of its nodes are whole and free (room for a whole-node pod)."""
    domains: dict[str, dict] = {}
    for row in rows:
        entry = domains.setdefault(
            row["domain"], {"domain": row["domain"], "nodes": 0, "gpus": 0, "free": 0, "empty": 0}
        )
        gpu = row["resources"]["gpu"]
        entry["nodes"] += 1
        entry["gpus"] += gpu["allocatable"]
        if not row["unschedulable"] and not row["failed"]:
            entry["free"] += gpu["free"]
            entry["empty"] += int(gpu["allocatable"] > 0 and gpu["allocated"] == 0)
    return [domains[name] for name in sorted(domains)]


def gpu_fit(rows: list[dict]) -> list[dict]:
    """For a pod of k GPUs: how many schedulable nodes could take one right now, and how
    many such pods fit in all. Free GPUs spread thin over many nodes is fragmentation:
    plenty of 1-GPU room, no node for an 8-GPU pod."""
    free = [row["resources"]["gpu"]["free"] for row in rows if not row["unschedulable"]]
    return [{"gpus": k, "nodes": sum(1 for f in free if f >= k), "pods": sum(f // k for f in free)} for k in GPU_SIZES]


def elastic_overview() -> dict:
    """Elastic quota across namespaces, in one query: per namespace that is elastic or has
    seen preemption, its cohort and guarantee, how often its jobs were preempted in all,
    and how many of its jobs borrow or are in their grace period (being preempted) now."""
    holding = Q(jobs__state__in=(State.RELEASED, State.RUNNING))
    rows = (
        Namespace.objects.annotate(
            preemptions=Coalesce(Sum("jobs__preemptions"), 0),
            borrowing=Count("jobs", filter=holding & Q(jobs__borrowing=True)),
            grace=Count(
                "jobs", filter=holding & (Q(jobs__preempted_for__isnull=False) | Q(jobs__preempt_at__isnull=False))
            ),
        )
        .order_by("cohort", "name")
        .values("name", "cohort", "guaranteed", "preemptions", "borrowing", "grace")
    )
    counts = ("preemptions", "borrowing", "grace")
    shown: list[dict] = []
    for row in rows:
        found: dict[str, Any] = {**row}
        if found["guaranteed"] or any(found[part] for part in counts):
            shown.append({**found, "guaranteed": dict(found["guaranteed"] or {})})
    totals = {part: sum(int(row[part]) for row in shown) for part in counts}
    return {"namespaces": shown, "totals": totals}


def cluster_rows(rows: list[dict]) -> list[dict]:
    """Several clusters (issue 49): each configured cluster's health as the dispatcher
    recorded it, and its nodes and GPUs (all, and free on its schedulable, ready nodes) from
    the node rows (`node_rows`: the nodes the last cycle published, labelled with their
    cluster). One query; [] with one cluster (no Cluster rows)."""
    found = []
    for cluster in cluster_port.clusters():
        mine = [row for row in rows if row["cluster"] == cluster["name"]]
        gpus = [row["resources"]["gpu"] for row in mine]
        usable = [row["resources"]["gpu"] for row in mine if not row["unschedulable"] and not row["failed"]]
        found.append(
            {
                **cluster,
                "labels": dict(cluster["labels"] or {}),
                "nodes": len(mine),
                "gpus": sum(gpu["allocatable"] for gpu in gpus),
                "free": sum(gpu["free"] for gpu in usable),
            }
        )
    return found


def cluster_overview(cycles: int = RECENT_CYCLES, cluster: str = "") -> dict:
    """Nodes with allocatable/allocated/free, the GPU fit table, totals, the leader, the
    last cycles and elastic quota (guarantees, borrowing, preemptions); with several
    clusters, the clusters (`cluster_rows`), and `cluster` (a name) keeps the nodes of that
    cluster alone (their fit, domains and totals too; a name no node has: none). Five
    queries (cluster state, clusters, fence, cycles, namespaces) plus the election
    backend's holder check made by leader()."""
    state = ClusterState.objects.filter(id=1).values("updated_at", "nodes").first() or {"updated_at": None, "nodes": []}
    rows = node_rows(state["nodes"] or [])
    clusters = cluster_rows(rows)
    if cluster:
        rows = [row for row in rows if row["cluster"] == cluster]
    totals = {
        r: {part: sum(row["resources"][r][part] for row in rows) for part in ("allocatable", "allocated", "free")}
        for r in RESOURCES
    }
    return {
        "updated_at": state["updated_at"],
        "clusters": clusters,
        "cluster": cluster,
        "nodes": rows,
        "totals": totals,
        "gpu_fit": gpu_fit(rows),
        "domains": domain_rows(rows),
        "leader": leader(reveal_identity=True),
        "cycles": recent_cycles(cycles),
        "elastic": elastic_overview(),
    }
