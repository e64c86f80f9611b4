"""bench.kueue_shape: Kueue's baseline and large-scale generator configs as schedules."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.kueue_shape import BASELINE, LARGE, SHAPES, nodes_for


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
    assert SHAPES == {"baseline": BASELINE, "large": LARGE}


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
