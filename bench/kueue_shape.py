"""The shapes of Kueue's scheduler-performance configs (kubernetes-sigs/kueue,
test/performance/scheduler/configs/<name>/generator.yaml), as bench.kueue_baseline runs
them: the namespaces and their quota, the nodes, the three job classes and when each job is
created, and the shortest wall the quota and the nodes allow.

- "baseline": 5 cohorts x 6 ClusterQueues, 15,000 workloads;
- "large" (configs/large-scale): 10 cohorts x 100 ClusterQueues, 50,000 workloads.

Each ClusterQueue (nominalQuota 20 CPU) is a jobdash namespace whose ResourceQuota is
requests.cpu: 20, as the baseline has always been run. Kueue's cohorts (borrowingLimit 100,
reclaimWithinCohort Any) are recorded here (`cohort_of`) but not given to jobdash as elastic
quota, in either config, so that the two configs stay comparable with the runs recorded in
bench/results/dispatcher.md.

Kueue's generator waits one creationIntervalMs before each workload of a set (the first at
one interval); this schedule creates the first at 0, as the baseline always has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class JobClass:
    count: int  # jobs per namespace at scale 1 (the workloadsSet's count)
    every_s: float  # creationIntervalMs
    cpu: int  # request
    run_s: float  # runtimeMs
    priority: int


@dataclass(frozen=True)
class Shape:
    name: str
    cohorts: int
    queues_per_cohort: int
    quota_cpu: int  # nominalQuota
    borrowing_limit: int  # recorded, not mapped (see the module's docstring)
    classes: dict[str, JobClass]
    nodes: int
    node_cpu: int = 32
    start_delay_s: float = 0.05

    @property
    def namespaces(self) -> int:
        return self.cohorts * self.queues_per_cohort

    def namespace_names(self) -> list[str]:
        width = len(str(self.namespaces - 1))
        return [f"ns-{i:0{max(2, width)}d}" for i in range(self.namespaces)]

    def cohort_of(self, index: int) -> str:
        """Kueue's cohort of the index-th namespace (its queues are generated cohort by cohort)."""
        return f"cohort-{index // self.queues_per_cohort}"

    def per_namespace(self, scale: float) -> dict[str, int]:
        return {name: max(1, round(cls.count * scale)) for name, cls in self.classes.items()}

    def jobs(self, scale: float) -> int:
        return self.namespaces * sum(self.per_namespace(scale).values())

    def schedule(self, scale: float) -> list[tuple[float, str, str, int]]:
        """(offset seconds, namespace, class, index), in creation order."""
        counts = self.per_namespace(scale)
        items = [
            (i * cls.every_s, namespace, name, i)
            for namespace in self.namespace_names()
            for name, cls in self.classes.items()
            for i in range(counts[name])
        ]
        items.sort(key=lambda item: (item[0], item[1], item[2]))
        return items

    def work_cpu_s(self, scale: float) -> float:
        """CPU-seconds the jobs of one namespace run for."""
        counts = self.per_namespace(scale)
        return sum(counts[name] * cls.cpu * cls.run_s for name, cls in self.classes.items())

    def ideal_seconds(self, scale: float) -> float:
        return self.work_cpu_s(scale) / self.quota_cpu

    def node_bound_seconds(self, scale: float) -> float:
        """What the nodes allow, whatever the order: each class on its own needs at least its
        pod-seconds over the pods of it the nodes hold at once (a 20-CPU pod takes a 32-CPU
        node alone: at baseline 20 at a time, 75 s for the large jobs at scale 1, against the
        quota's 66 s)."""
        counts = self.per_namespace(scale)
        return max(
            self.namespaces * counts[name] * cls.run_s / (self.nodes * (self.node_cpu // cls.cpu))
            for name, cls in self.classes.items()
        )


def nodes_for(namespaces: int, quota_cpu: int) -> int:
    """The baseline's 20 x 32-CPU nodes for 30 x 20 CPU of quota, in proportion: enough CPU for
    every namespace's quota at once (640 >= 600; 667 x 32 = 21,344 >= 20,000 for the large
    config), so the quota, not the nodes, bounds the small and medium jobs, and the large
    (20 CPU, one per node) are bounded by the nodes in the same ratio in both configs."""
    return math.ceil(namespaces * quota_cpu * 32 / 30 / 32)


BASELINE = Shape(
    name="baseline",
    cohorts=5,
    queues_per_cohort=6,
    quota_cpu=20,
    borrowing_limit=100,
    classes={
        "small": JobClass(350, 0.1, 1, 0.2, 50),
        "medium": JobClass(100, 0.5, 5, 0.5, 100),
        "large": JobClass(50, 1.2, 20, 1.0, 200),
    },
    nodes=nodes_for(30, 20),
)

LARGE = Shape(
    name="large",
    cohorts=10,
    queues_per_cohort=100,
    quota_cpu=20,
    borrowing_limit=100,
    classes={
        "small": JobClass(35, 0.06, 1, 0.15, 50),
        "medium": JobClass(11, 0.3, 5, 0.35, 100),
        "large": JobClass(4, 0.7, 20, 0.7, 200),
    },
    nodes=nodes_for(1000, 20),
)

SHAPES = {shape.name: shape for shape in (BASELINE, LARGE)}
