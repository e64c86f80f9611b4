"""The cluster as the last cycle saw it, for the staff cluster page and GET /api/v1/cluster/
(one selector, so the page and the API cannot disagree).

Numbers stay canonical integers (cpu in millicores, memory in bytes, GPUs and pods as
counts); the page formats them.
"""

from jobdash.jobs.models import ClusterState

from . import status

# Plain names for the Kubernetes resources shown (a dotted name cannot be a serializer
# field or a template lookup): gpu is nvidia.com/gpu.
RESOURCES = {"cpu": "cpu", "memory": "memory", "gpu": "nvidia.com/gpu", "pods": "pods"}
GPU_SIZES = (1, 2, 4, 8)
RECENT_CYCLES = 20


def node_rows(nodes: list[dict]) -> list[dict]:
    rows = []
    for node in sorted(nodes, key=lambda n: n.get("name", "")):
        allocatable, allocated = node.get("allocatable", {}), node.get("allocated", {})
        resources = {}
        for r, key in RESOURCES.items():
            total, used = int(allocatable.get(key, 0)), int(allocated.get(key, 0))
            resources[r] = {"allocatable": total, "allocated": used, "free": max(total - used, 0)}
        rows.append(
            {
                "name": node.get("name", ""),
                "unschedulable": bool(node.get("unschedulable")),
                "labels": dict(node.get("labels", {})),
                "resources": resources,
            }
        )
    return rows


def gpu_fit(rows: list[dict]) -> list[dict]:
    """For a pod of k GPUs: how many schedulable nodes could take one right now, and how
    many such pods fit in all. Free GPUs spread thin over many nodes is fragmentation:
    plenty of 1-GPU room, no node for an 8-GPU pod."""
    free = [row["resources"]["gpu"]["free"] for row in rows if not row["unschedulable"]]
    return [{"gpus": k, "nodes": sum(1 for f in free if f >= k), "pods": sum(f // k for f in free)} for k in GPU_SIZES]


def cluster_overview(cycles: int = RECENT_CYCLES) -> dict:
    """Nodes with allocatable/allocated/free, the GPU fit table, totals, the leader and
    the last cycles. Three queries (cluster state, fence, cycles) plus the election
    backend's holder check made by status.leader()."""
    state = ClusterState.objects.filter(id=1).values("updated_at", "nodes").first() or {"updated_at": None, "nodes": []}
    rows = node_rows(state["nodes"] or [])
    totals = {
        r: {part: sum(row["resources"][r][part] for row in rows) for part in ("allocatable", "allocated", "free")}
        for r in RESOURCES
    }
    recent = [
        {
            "started_at": c.started_at,
            "duration_ms": c.duration_ms,
            "policy": c.policy,
            "pending": c.pending,
            "admitted": c.admitted,
            "released": c.released,
            "term": c.term,
        }
        for c in status.recent_cycles(cycles)
    ]
    return {
        "updated_at": state["updated_at"],
        "nodes": rows,
        "totals": totals,
        "gpu_fit": gpu_fit(rows),
        "leader": status.leader(),
        "cycles": recent,
    }
