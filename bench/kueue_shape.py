"""The shapes of Kueue's scheduler-performance configs (kubernetes-sigs/kueue,
test/performance/scheduler/configs/<name>/generator.yaml), as bench.kueue_baseline runs
them: the namespaces and their quota, the nodes, the job classes and when each job is
created, and the shortest wall the quota and the nodes allow.

- "baseline": 5 cohorts x 6 ClusterQueues, 15,000 workloads;
- "large" (configs/large-scale): 10 cohorts x 100 ClusterQueues, 50,000 workloads;
- "tas" (configs/tas, topology-aware scheduling): read from Kueue's own generator.yaml,
  vendored in bench/kueue_configs/tas/ from kubernetes-sigs/kueue at ff69552e79ad (2026-08-22;
  the file last changed by bd5b1db86ce3, #9238, its rangespec.yaml by 8bf23d956b68, #12840;
  the first version, 94f078923037 #8917, had ~1,050 workloads and provisional thresholds).
  5 cohorts x 6 ClusterQueues of nominalQuota 20 as the baseline, and nine workload sets per
  queue, created concurrently (generator.go runs each set in its own goroutine): small
  (2 pods x 500m, 200 ms, every 100 ms: 120 + 120 + 110), medium (4 x 1250m, 500 ms, every
  500 ms: 34 + 33 + 33), large (8 x 2500m, 1 s, every 1.2 s: 17 + 17 + 16), each size once
  "required", "preferred" and "balanced" at the rack level: 15,000 workloads. The nodes are
  topology_generator.go's: 1 block x 10 racks x 64 hosts = 640 nodes of 96 CPU, 256Gi,
  110 pods, labelled cloud.provider.com/topology-block, cloud.provider.com/topology-rack and
  kubernetes.io/hostname.

  Kueue's topology requests as jobdash's annotations (queueing/topology_request.py):
  "required" is Kueue's podset-required-topology (generator.go: RequiredTopologyRequest) and
  jobdash.io/required-topology; "preferred" is podset-preferred-topology and
  jobdash.io/preferred-topology. "balanced" is NOT Kueue's balanced placement algorithm
  (feature gate TASBalancedPlacement, alpha and off by default, not turned on by
  minimalkueue, and used only for preferred requests): generator.go makes it
  SliceRequiredTopologyRequest(level) + SliceSizeTopologyRequest(sliceSize), a slice-only
  request, which Kueue's TAS reads as the top level, unconstrained, each slice of sliceSize
  pods in one rack (tas_flavor_snapshot.go: levelKey, isSliceTopologyOnlyRequest). That is
  jobdash.io/slice-required-topology + jobdash.io/slice-size, which jobdash has for this
  (queueing/topology.py). Slices of 1, 2 and 4 of 2, 4 and 8 pods.

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from queueing.quantity import to_millis

CONFIGS = Path(__file__).resolve().parent / "kueue_configs"
# Kueue's topology requests (the generator's tasConstraint) as jobdash's annotations.
REQUIRED = "jobdash.io/required-topology"
PREFERRED = "jobdash.io/preferred-topology"
SLICE_REQUIRED = "jobdash.io/slice-required-topology"
SLICE_SIZE = "jobdash.io/slice-size"


@dataclass(frozen=True)
class JobClass:
    count: int  # jobs per namespace at scale 1 (the workloadsSet's count)
    every_s: float  # creationIntervalMs
    cpu: float  # the job's whole request: pods x request
    run_s: float  # runtimeMs
    priority: int
    pods: int = 1  # podCount
    pod_request: str = ""  # request (per pod); "" = cpu
    topology: str = ""  # tasConstraint: "required", "preferred" or "balanced"
    level: str = ""  # tasLevel (a node label)
    slice_size: int = 0  # sliceSize ("balanced")

    @property
    def pod_cpu(self) -> str:
        return self.pod_request or str(self.cpu)

    @property
    def pod_millicores(self) -> int:
        return to_millis(self.pod_cpu)

    def annotations(self) -> dict[str, str]:
        """The class's topology request as jobdash's annotations (see the module's docstring)."""
        if self.topology == "required":
            return {REQUIRED: self.level}
        if self.topology == "preferred":
            return {PREFERRED: self.level}
        if self.topology == "balanced":
            return {SLICE_REQUIRED: self.level, SLICE_SIZE: str(self.slice_size or 1)}
        if self.topology:
            raise ValueError(f"unknown tasConstraint {self.topology!r}")
        return {}


@dataclass(frozen=True)
class Level:
    name: str  # Kueue's level name ("rack")
    label: str  # its node label
    count: int  # domains per domain of the level above (hosts per rack for the last)


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
    node_pods: int = 500
    node_memory: str = "512Gi"
    levels: tuple[Level, ...] = ()  # topology, widest first; the last is the host's

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

    def pods_per_node(self, cls: JobClass) -> int:
        """How many of the class's pods one empty node holds (its CPU, its pod slots)."""
        return min(self.node_cpu * 1000 // cls.pod_millicores, self.node_pods)

    def node_bound_seconds(self, scale: float) -> float:
        """What the nodes allow, whatever the order: each class on its own needs at least its
        pod-seconds over the pods of it the nodes hold at once (a 20-CPU pod takes a 32-CPU
        node alone: at baseline 20 at a time, 75 s for the large jobs at scale 1, against the
        quota's 66 s)."""
        return max(bound["nodes_s"] for bound in self.class_bounds(scale).values())

    def class_bounds(self, scale: float) -> dict[str, dict[str, Any]]:
        """Per class, the shortest time its jobs could run in, had it the cluster to itself:
        by the quota (its CPU-seconds over all namespaces' quota: quota_s), by the nodes (its
        pod-seconds over the pods of it the nodes hold at once: nodes_s), and by its arrivals
        (the last created, then run: arrival_s); `bound` names the larger of quota and nodes,
        the one that limits the class ("quota = nodes" within 1 %)."""
        counts = self.per_namespace(scale)
        out = {}
        for name, cls in self.classes.items():
            quota = counts[name] * cls.cpu * cls.run_s / self.quota_cpu
            nodes = self.namespaces * counts[name] * cls.pods * cls.run_s / (self.nodes * self.pods_per_node(cls))
            if math.isclose(quota, nodes, rel_tol=0.01):
                bound = "quota = nodes"
            else:
                bound = "quota" if quota > nodes else "nodes"
            out[name] = {
                "quota_s": round(quota, 3),
                "nodes_s": round(nodes, 3),
                "arrival_s": round((counts[name] - 1) * cls.every_s + cls.run_s, 3),
                "bound": bound,
            }
        return out

    def never_binding_nodes(self) -> int:
        """The fewest nodes of this size on which the nodes never keep a job the quota admits
        from starting. A pod of p CPU finds no node only if every node is too full for it:
        more than C - p CPU used, or all its pod slots taken (P pods of at least the smallest
        pod's CPU each). Everything else running is within the quota less the pod itself
        (Q - p): so N nodes with N x min(C - p, P x smallest) >= Q - p always leave it one."""
        total = self.namespaces * self.quota_cpu * 1000
        node = self.node_cpu * 1000
        smallest = min(cls.pod_millicores for cls in self.classes.values())
        needed = 1
        for cls in self.classes.values():
            pod = cls.pod_millicores
            room = min(node - pod, self.node_pods * smallest)
            if room <= 0:
                raise ValueError(f"a {cls.pod_cpu}-CPU pod does not fit a {self.node_cpu}-CPU node")
            needed = max(needed, (total - pod) // room + 1)
        return needed

    def quota_only(self) -> Shape:
        """This shape on enough nodes of the same size that none binds (never_binding_nodes),
        as Kueue's harness runs it (admission by quota alone); itself if it has as many. A
        topology's added nodes come as whole domains of the level above the host (racks)."""
        needed = self.never_binding_nodes()
        if needed <= self.nodes:
            return self
        if not self.levels:
            return replace(self, nodes=needed)
        hosts = math.prod(level.count for level in self.levels[-1:])
        above = math.prod(level.count for level in self.levels[:-2])
        racks = math.ceil(needed / (hosts * above))
        levels = (*self.levels[:-2], replace(self.levels[-2], count=racks), self.levels[-1])
        return replace(self, levels=levels, nodes=math.prod(level.count for level in levels))

    def node_groups(self) -> list[dict]:
        """kubesim's node groups (its config's `nodes`): one per domain of the level above the
        host, labelled with every level (the host label is kubesim's own kubernetes.io/hostname),
        named as Kueue's topology_generator.go names them (node-b0-r2-<i>)."""
        capacity = {"cpu": str(self.node_cpu), "memory": self.node_memory, "pods": str(self.node_pods)}
        if not self.levels:
            return [{"prefix": "node", "count": self.nodes, "capacity": capacity}]
        groups = []
        domains: list[tuple[str, dict[str, str]]] = [("node", {})]
        for level in self.levels[:-1]:
            domains = [
                (f"{prefix}-{level.name[0]}{i}", {**labels, level.label: f"{level.name}-{i}"})
                for prefix, labels in domains
                for i in range(level.count)
            ]
        for prefix, labels in domains:
            groups.append({"prefix": prefix, "count": self.levels[-1].count, "capacity": capacity, "labels": labels})
        return groups

    @property
    def topology_levels(self) -> tuple[str, ...]:
        """The node labels of the levels, widest first (the dispatcher's JOBDASH_TOPOLOGY_LEVELS)."""
        return tuple(level.label for level in self.levels)


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


def from_generator(name: str, config: dict) -> Shape:
    """A Shape from Kueue's generator.yaml (generator.go's Config): one cohort set of one
    queue set (as all Kueue's configs have), each workloads set a class of one workload
    template; the topology, if any, as topology_generator.go builds the nodes."""
    cohorts = config.get("cohorts") or []
    if len(cohorts) != 1 or len(cohorts[0].get("queuesSets") or []) != 1:
        raise ValueError("one cohort set of one queues set is all this reads")
    queues = cohorts[0]["queuesSets"][0]
    classes = {}
    for wl_set in queues["workloadsSets"]:
        if len(wl_set["workloads"]) != 1:
            raise ValueError("one workload template per workloads set is all this reads")
        template = wl_set["workloads"][0]
        pods = int(template.get("podCount") or 1)
        millicores = pods * to_millis(str(template["request"]))
        classes[template["className"]] = JobClass(
            count=int(wl_set["count"]),
            every_s=wl_set["creationIntervalMs"] / 1000,
            cpu=millicores // 1000 if millicores % 1000 == 0 else millicores / 1000,
            run_s=template["runtimeMs"] / 1000,
            priority=int(template["priority"]),
            pods=pods,
            pod_request=str(template["request"]),
            topology=template.get("tasConstraint") or "",
            level=template.get("tasLevel") or "",
            slice_size=int(template.get("sliceSize") or 0),
        )
    topology = config.get("topology")
    extra: dict[str, Any] = {}
    if topology:
        levels = tuple(Level(lv["name"], lv["nodeLabel"], int(lv["count"])) for lv in topology["levels"])
        # topology_generator.go: the last level's capacity, 96 CPU and 256Gi unless given; 110 pods.
        capacity = topology["levels"][-1].get("capacity") or {}
        extra = {
            "levels": levels,
            "nodes": math.prod(level.count for level in levels),
            "node_cpu": int(to_millis(str(capacity.get("cpu") or "96")) // 1000),
            "node_memory": str(capacity.get("memory") or "256Gi"),
            "node_pods": 110,
        }
    else:  # no nodes in Kueue's config (minimalkueue has none): the baseline's proportion
        extra = {"nodes": nodes_for(int(cohorts[0]["count"]) * int(queues["count"]), int(queues["nominalQuota"]))}
    return Shape(
        name=name,
        cohorts=int(cohorts[0]["count"]),
        queues_per_cohort=int(queues["count"]),
        quota_cpu=int(queues["nominalQuota"]),
        borrowing_limit=int(queues.get("borrowingLimit") or 0),
        classes=classes,
        **extra,
    )


def load_generator(name: str, path: Path | None = None) -> Shape:
    """bench/kueue_configs/<name>/generator.yaml (or `path`) as a Shape."""
    path = path or CONFIGS / name / "generator.yaml"
    return from_generator(name, yaml.safe_load(path.read_text()))


TAS = load_generator("tas")

SHAPES = {shape.name: shape for shape in (BASELINE, LARGE, TAS)}
