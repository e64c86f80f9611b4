"""bench.kueue_shape: Kueue's baseline, large-scale and TAS generator configs as schedules,
the nodes on which none binds (--quota-only) and the bound that limits each class."""

from collections import Counter
from dataclasses import replace

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import stack
from bench.kueue_shape import BASELINE, LARGE, SHAPES, TAS, JobClass, from_generator, load_generator, nodes_for
from bench.kueue_submit import class_of, job_name
from queueing.quantity import to_millis


def test_baseline_is_the_15000_jobs_it_always_was():
    items = BASELINE.schedule(1.0)
    assert len(items) == BASELINE.jobs(1.0) == 15_000
    assert BASELINE.namespace_names()[:2] == ["ns-00", "ns-01"] and len(BASELINE.namespace_names()) == 30
    assert Counter(cls for _at, _ns, cls, _i in items) == {"small": 10_500, "medium": 3_000, "large": 1_500}
    assert items[-1] == (49 * 1.2, "ns-29", "large", 49)
    assert BASELINE.ideal_seconds(1.0) == 66.0
    assert BASELINE.node_bound_seconds(1.0) == 75.0  # 20 nodes, a large pod alone on each
    assert (BASELINE.nodes, BASELINE.node_cpu) == (20, 32)


def test_large_is_kueues_large_scale_config():
    items = LARGE.schedule(1.0)
    assert len(items) == 50_000
    names = LARGE.namespace_names()
    assert len(set(names)) == 1_000 and names[0] == "ns-000" and names[-1] == "ns-999"
    per_namespace = Counter((ns, cls) for _at, ns, cls, _i in items)
    assert set(per_namespace.values()) == {35, 11, 4}
    assert per_namespace[("ns-500", "small")] == 35 and per_namespace[("ns-500", "large")] == 4
    # The medium jobs come last: the 11th at 10 x 300 ms.
    assert max(at for at, *_ in items) == 3.0
    assert {cls: (c.cpu, c.run_s, c.priority) for cls, c in LARGE.classes.items()} == {
        "small": (1, 0.15, 50),
        "medium": (5, 0.35, 100),
        "large": (20, 0.7, 200),
    }
    assert [LARGE.cohort_of(i) for i in (0, 99, 100, 999)] == ["cohort-0", "cohort-0", "cohort-1", "cohort-9"]
    assert LARGE.nodes * LARGE.node_cpu >= LARGE.namespaces * LARGE.quota_cpu
    assert LARGE.work_cpu_s(1.0) == 35 * 0.15 + 11 * 5 * 0.35 + 4 * 20 * 0.7


def test_shapes_by_name():
    assert SHAPES == {"baseline": BASELINE, "large": LARGE, "tas": TAS}


RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"


def test_tas_is_read_from_kueues_generator_yaml():
    assert (TAS.cohorts, TAS.queues_per_cohort, TAS.quota_cpu, TAS.borrowing_limit) == (5, 6, 20, 100)
    assert TAS.jobs(1.0) == 15_000 and TAS.ideal_seconds(1.0) == BASELINE.ideal_seconds(1.0) == 66.0
    assert (TAS.nodes, TAS.node_cpu, TAS.node_memory, TAS.node_pods) == (640, 96, "256Gi", 110)
    assert TAS.topology_levels == (BLOCK, RACK, "kubernetes.io/hostname")
    assert {name: (c.count, c.pods, c.pod_request, c.cpu, c.run_s, c.priority) for name, c in TAS.classes.items()} == {
        "small-required-rack": (120, 2, "500m", 1, 0.2, 50),
        "small-preferred-rack": (120, 2, "500m", 1, 0.2, 50),
        "small-balanced-rack": (110, 2, "500m", 1, 0.2, 50),
        "medium-required-rack": (34, 4, "1250m", 5, 0.5, 100),
        "medium-preferred-rack": (33, 4, "1250m", 5, 0.5, 100),
        "medium-balanced-rack": (33, 4, "1250m", 5, 0.5, 100),
        "large-required-rack": (17, 8, "2500m", 20, 1.0, 200),
        "large-preferred-rack": (17, 8, "2500m", 20, 1.0, 200),
        "large-balanced-rack": (16, 8, "2500m", 20, 1.0, 200),
    }
    # The sets run concurrently: three small jobs every 100 ms per namespace, the last at 11.9 s.
    firsts = [item for item in TAS.schedule(1.0) if item[1] == "ns-00" and item[0] == 0.0]
    assert sorted(cls for _at, _ns, cls, _i in firsts) == sorted(TAS.classes)
    assert max(at for at, _ns, cls, _i in TAS.schedule(1.0) if cls.startswith("small")) == pytest.approx(11.9)


def test_tas_topology_requests_become_jobdashs_annotations():
    classes = TAS.classes
    assert classes["large-required-rack"].annotations() == {"jobdash.io/required-topology": RACK}
    assert classes["medium-preferred-rack"].annotations() == {"jobdash.io/preferred-topology": RACK}
    assert [classes[f"{size}-balanced-rack"].annotations() for size in ("small", "medium", "large")] == [
        {"jobdash.io/slice-required-topology": RACK, "jobdash.io/slice-size": str(n)} for n in (1, 2, 4)
    ]
    assert BASELINE.classes["large"].annotations() == {}
    with pytest.raises(ValueError, match="tasConstraint"):
        JobClass(1, 1.0, 1, 1.0, 1, topology="spread").annotations()
    # The TFJob a submitter sends: the class's pods, each its request, and the annotations.
    manifest = yaml.safe_load(
        stack.tfjob_yaml(
            job_name("large-balanced-rack", 7),
            "ns-00",
            classes["large-balanced-rack"].pod_cpu,
            1.0,
            replicas=8,
            annotations=classes["large-balanced-rack"].annotations(),
        )
    )
    assert manifest["metadata"]["annotations"] == {
        "kubesim.io/duration-seconds": "1.0",
        "jobdash.io/slice-required-topology": RACK,
        "jobdash.io/slice-size": "4",
    }
    worker = manifest["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 8
    assert worker["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2500m"
    assert class_of(manifest["metadata"]["name"]) == "large-balanced-rack" and class_of("small-0001") == "small"


def test_tas_nodes_are_kueues_racks():
    groups = TAS.node_groups()
    assert len(groups) == 10 and sum(g["count"] for g in groups) == 640
    assert groups[3] == {
        "prefix": "node-b0-r3",
        "count": 64,
        "capacity": {"cpu": "96", "memory": "256Gi", "pods": "110"},
        "labels": {BLOCK: "block-0", RACK: "rack-3"},
    }
    assert BASELINE.node_groups() == [
        {"prefix": "node", "count": 20, "capacity": {"cpu": "32", "memory": "512Gi", "pods": "500"}}
    ]
    config = stack.cluster_config({}, nodes=0, node_cpu=0, start_delay_s=0.05, node_groups=groups)
    assert config["nodes"] == groups


def test_a_generator_without_topology_reads_as_the_baseline_and_refuses_what_it_cannot_read():
    generator = {
        "cohorts": [
            {
                "className": "cohort",
                "count": 5,
                "queuesSets": [
                    {
                        "className": "cq",
                        "count": 6,
                        "nominalQuota": "20",
                        "borrowingLimit": "100",
                        "workloadsSets": [
                            {
                                "count": n,
                                "creationIntervalMs": every,
                                "workloads": [{"className": cls, "runtimeMs": run, "priority": prio, "request": cpu}],
                            }
                            for n, every, cls, run, prio, cpu in (
                                (350, 100, "small", 200, 50, "1"),
                                (100, 500, "medium", 500, 100, "5"),
                                (50, 1200, "large", 1000, 200, "20"),
                            )
                        ],
                    }
                ],
            }
        ]
    }
    shape = from_generator("baseline", generator)
    assert shape.schedule(1.0) == BASELINE.schedule(1.0)
    assert (shape.nodes, shape.node_cpu, shape.ideal_seconds(1.0)) == (20, 32, 66.0)
    assert {name: (c.cpu, c.run_s, c.priority, c.pods) for name, c in shape.classes.items()} == {
        name: (c.cpu, c.run_s, c.priority, c.pods) for name, c in BASELINE.classes.items()
    }
    generator["cohorts"].append(generator["cohorts"][0])
    with pytest.raises(ValueError, match="one cohort set"):
        from_generator("two", generator)


def test_a_vendored_config_is_read_by_name(tmp_path):
    assert load_generator("tas") == TAS
    path = tmp_path / "generator.yaml"
    path.write_text("cohorts: []\n")
    with pytest.raises(ValueError):
        load_generator("empty", path)


def test_which_bound_limits_each_class():
    # Baseline at scale 1: the large jobs' 20-CPU pods take a node each (75 s > the quota's 50 s);
    # medium: 6 per node, exactly the quota's 12.5 s; small: the quota.
    bounds = BASELINE.class_bounds(1.0)
    assert {cls: b["bound"] for cls, b in bounds.items()} == {
        "small": "quota",
        "medium": "quota = nodes",
        "large": "nodes",
    }
    assert bounds["large"] == {"quota_s": 50.0, "nodes_s": 75.0, "arrival_s": 59.8, "bound": "nodes"}
    assert BASELINE.node_bound_seconds(1.0) == 75.0
    # On the nodes --quota-only gives it, the quota bounds every class.
    unbound = BASELINE.quota_only()
    assert unbound.nodes == 49 and unbound.node_cpu == 32
    assert {b["bound"] for b in unbound.class_bounds(1.0).values()} == {"quota"}
    # TAS: 640 x 96 CPU for 600 CPU of quota: the quota everywhere, and no more nodes needed.
    assert {b["bound"] for b in TAS.class_bounds(1.0).values()} == {"quota"}
    assert TAS.quota_only() is TAS


def test_quota_only_node_counts():
    assert BASELINE.never_binding_nodes() == 49  # (600 - 20) // (32 - 20) + 1
    assert LARGE.never_binding_nodes() == 1_666  # (20,000 - 20) // 12 + 1
    assert TAS.never_binding_nodes() == 11  # pod slots: 110 x 0.5 CPU = 55 < 96 - 2.5
    assert LARGE.quota_only().nodes == 1_666
    # A topology grows by whole racks: 3 racks of 4 hosts for 11 nodes.
    small_racks = replace(TAS, levels=(TAS.levels[0], replace(TAS.levels[1], count=1), replace(TAS.levels[2], count=4)))
    small_racks = replace(small_racks, nodes=4)
    grown = small_racks.quota_only()
    assert (grown.nodes, [level.count for level in grown.levels]) == (12, [1, 3, 4])
    assert sum(group["count"] for group in grown.node_groups()) == 12


classes_st = st.lists(
    st.tuples(st.sampled_from(["500m", "1", "1250m", "2", "2500m", "5", "8", "20"]), st.integers(1, 8)),
    min_size=1,
    max_size=4,
)


@settings(deadline=None, max_examples=60)
@given(
    classes_st,
    st.integers(1, 40),
    st.integers(1, 64),
    st.sampled_from([24, 32, 64, 96]),
    st.sampled_from([4, 16, 110, 500]),
    st.randoms(use_true_random=False),
)
def test_on_never_binding_nodes_any_mix_the_quota_admits_leaves_each_pod_a_node(
    classes, namespaces, quota, node_cpu, node_pods, rng
):
    """Whatever the quota lets run (pods of the classes, in total within every namespace's
    quota), dealt onto the nodes in any way the nodes allow, a pod of any class that the quota
    still has room for finds a node with room for it."""
    shape = replace(
        BASELINE,
        cohorts=namespaces,
        queues_per_cohort=1,
        quota_cpu=quota,
        node_cpu=node_cpu,
        node_pods=node_pods,
        classes={
            f"c{i}": JobClass(1, 1.0, to_millis(cpu) * pods / 1000, 1.0, 1, pods=pods, pod_request=cpu)
            for i, (cpu, pods) in enumerate(classes)
        },
    )
    pods = [to_millis(c.pod_cpu) for c in shape.classes.values()]
    if max(pods) > node_cpu * 1000 or max(pods) > quota * 1000:
        return
    nodes = shape.never_binding_nodes()
    total = namespaces * quota * 1000
    used = [0] * nodes
    slots = [0] * nodes
    running = 0
    # Fill adversarially: pods onto the nodes where each fits, until the next would pass the quota.
    for _ in range(2_000):
        pod = rng.choice(pods)
        if running + pod > total:
            break
        fits = [n for n in range(nodes) if used[n] + pod <= node_cpu * 1000 and slots[n] < node_pods]
        if not fits:
            pytest.fail(f"a {pod}m pod found no node with {running}m of {total}m running on {nodes} nodes")
        n = rng.choice(fits)
        used[n] += pod
        slots[n] += 1
        running += pod


# Up to a fifth of the jobs (10,000 for the large config): enough for every rounding case.
@settings(deadline=None, max_examples=40)
@given(st.sampled_from([BASELINE, LARGE]), st.floats(min_value=0.001, max_value=0.2))
def test_a_scaled_schedule_creates_each_job_once_at_its_interval(shape, scale):
    items = shape.schedule(scale)
    assert len(items) == shape.jobs(scale)
    assert items == sorted(items, key=lambda item: (item[0], item[1], item[2]))
    counts = shape.per_namespace(scale)
    assert all(1 <= n <= shape.classes[cls].count for cls, n in counts.items())
    seen = Counter((ns, cls, i) for _at, ns, cls, i in items)
    assert max(seen.values()) == 1
    for at, _ns, cls, i in items:
        assert 0 <= i < counts[cls] and at == i * shape.classes[cls].every_s


@given(st.integers(min_value=1, max_value=5_000), st.integers(min_value=1, max_value=64))
def test_nodes_hold_every_quota_at_once(namespaces, quota):
    nodes = nodes_for(namespaces, quota)
    assert nodes * 32 >= namespaces * quota
    assert (nodes - 1) * 32 < namespaces * quota * 32 / 30
