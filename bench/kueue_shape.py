"""The shape of Kueue's scheduler-performance baseline (test/performance/scheduler,
"baseline"), as bench.kueue_baseline runs it: the namespaces and their quota, the nodes,
the three job classes and when each job is created, and the shortest wall the quota and
the nodes allow.
"""

from __future__ import annotations

NAMESPACES = 30
QUOTA_CPU = 20
NODES, NODE_CPU = 20, 32
START_DELAY_S = 0.05
# class: (jobs per namespace at scale 1, seconds between creations, CPU, run seconds, priority)
CLASSES = {
    "small": (350, 0.1, 1, 0.2, 50),
    "medium": (100, 0.5, 5, 0.5, 100),
    "large": (50, 1.2, 20, 1.0, 200),
}


def namespace_names() -> list[str]:
    return [f"ns-{i:02d}" for i in range(NAMESPACES)]


def schedule(scale: float) -> list[tuple[float, str, str, int]]:
    """(offset seconds, namespace, class, index), in creation order."""
    items = []
    for namespace in namespace_names():
        for cls, (count, every, _cpu, _run, _prio) in CLASSES.items():
            for i in range(max(1, round(count * scale))):
                items.append((i * every, namespace, cls, i))
    items.sort(key=lambda item: (item[0], item[1], item[2]))
    return items


def ideal_seconds(scale: float) -> float:
    work = sum(max(1, round(count * scale)) * cpu * run for count, _every, cpu, run, _p in CLASSES.values())
    return work / QUOTA_CPU


def node_bound_seconds(scale: float) -> float:
    """What the nodes allow, whatever the order: each class on its own needs at least its
    pod-seconds over the pods of it the nodes hold at once (a 20-CPU pod takes a 32-CPU node
    alone: 20 at a time, 75 s for the large jobs at scale 1, against the quota's 66 s)."""
    return max(
        NAMESPACES * max(1, round(count * scale)) * run / (NODES * (NODE_CPU // cpu))
        for count, _every, cpu, run, _p in CLASSES.values()
    )
