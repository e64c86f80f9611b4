"""pool_base: the node pool's starting point, redone for the nodes that changed since the
last one, is what building it from scratch gives, whatever the sequence of changes."""

from hypothesis import given
from hypothesis import strategies as st

from queueing import Node, Taint
from queueing.cards import SharedCards
from queueing.node_views import _full, pool_base

from .test_queueing_planner_properties import SETTINGS

GI = 2**30


@st.composite
def node(draw, name: str) -> Node:
    cpu = draw(st.sampled_from([8000, 16000]))  # two shapes: capacities shared and not
    if draw(st.integers(0, 5)) == 0:  # HAMi: 40 vGPUs on 2 or 4 cards, one pod one per card
        cards = SharedCards.even(draw(st.sampled_from([2, 4])), 32_768, model="hami")
        return Node(name, {"cpu": cpu, "nvidia.com/gpu": 40}, cards=cards)
    return Node(
        name,
        {"cpu": cpu, "memory": 64 * GI, "nvidia.com/gpu": draw(st.integers(0, 8))},
        {"cpu": draw(st.integers(0, cpu + 2000)), "memory": draw(st.integers(0, 4)) * GI},
        taints=(Taint("gpu"),) if draw(st.integers(0, 5)) == 0 else (),
        unschedulable=draw(st.integers(0, 7)) == 0,
    )


@st.composite
def histories(draw):
    """A first set of nodes, then a few cycles each remaking some of them (or all)."""
    count = draw(st.integers(1, 12))
    nodes = [draw(node(f"n{i}")) for i in range(count)]
    steps = [tuple(nodes)]
    for _ in range(draw(st.integers(1, 6))):
        for number in draw(st.lists(st.integers(0, len(nodes) - 1), max_size=count)):
            nodes[number] = draw(node(f"n{number}"))
        if draw(st.integers(0, 9)) == 0:
            nodes = nodes[:-1] or nodes  # a node deleted
        steps.append(tuple(nodes))
    return steps


@SETTINGS
@given(histories())
def test_the_redone_base_is_the_one_built_from_scratch(steps):
    for nodes in steps:
        base, fresh = pool_base(nodes), _full(nodes)
        assert len(base.nodes) == len(nodes) and all(a is b for a, b in zip(base.nodes, nodes, strict=True))
        assert list(base.free) == list(fresh.free) and list(base.capacity) == list(fresh.capacity)
        assert (base.schedulable, base.plain, base.cluster_max) == (fresh.schedulable, fresh.plain, fresh.cluster_max)
        assert base.largest == fresh.largest and list(base.one_pod) == list(fresh.one_pod)
        assert {k: v for k, v in base.totals.items() if v} == {k: v for k, v in fresh.totals.items() if v}
