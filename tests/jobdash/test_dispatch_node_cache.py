"""What the snapshot keeps of the nodes between cycles (CycleCache.nodes, snapshot_phase._nodes)
is what a rebuild would make: after any sequence of the watch's node and pod events, the
nodes built through the cache equal the nodes built from nothing."""

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from jobdash.cluster.gateway import NodeInfo, PodInfo
from jobdash.dispatch.phases.snapshot_phase import _nodes

NODES = ("node-0", "node-1", "node-2")
PODS = ("a", "b", "c", "d")


def node(name: str, cpu: int, cordoned: bool, tainted: bool) -> NodeInfo:
    taints = ({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},) if tainted else ()
    return NodeInfo(name, {"cpu": cpu * 1000, "pods": 110}, {"rack": name[-1]}, taints, cordoned)


def pod(name: str, node_name: str | None, cpu: int, phase: str) -> PodInfo:
    return PodInfo("team-a", name, phase, node_name, {}, {"cpu": cpu * 100})


events = st.lists(
    st.one_of(
        st.tuples(st.just("node"), st.sampled_from(NODES), st.integers(1, 8), st.booleans(), st.booleans()),
        st.tuples(st.just("node-again"), st.sampled_from(NODES)),  # an update that changes nothing
        st.tuples(st.just("node-gone"), st.sampled_from(NODES)),
        st.tuples(
            st.just("pod"),
            st.sampled_from(PODS),
            st.one_of(st.none(), st.sampled_from(NODES)),
            st.integers(1, 8),
            st.sampled_from(("Pending", "Running", "Succeeded", "Failed")),
        ),
        st.tuples(st.just("pod-gone"), st.sampled_from(PODS)),
        st.just(("cycle",)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events)
def test_the_nodes_kept_between_cycles_are_the_nodes_a_rebuild_makes(sequence):
    nodes: dict[str, NodeInfo] = {}
    pods: dict[str, PodInfo] = {}
    kept: dict = {}

    def cycle() -> None:
        infos, live = list(nodes.values()), list(pods.values())
        assert _nodes(infos, live, {}, kept) == _nodes(infos, live, {}, {})
        assert set(kept) == set(nodes)

    for event in sequence:
        match event:
            case ("node", name, cpu, cordoned, tainted):
                nodes[name] = node(name, cpu, cordoned, tainted)
            case ("node-again", name) if name in nodes:
                nodes[name] = dataclasses.replace(nodes[name])
            case ("node-gone", name):
                nodes.pop(name, None)
            case ("pod", name, node_name, cpu, phase):
                pods[name] = pod(name, node_name, cpu, phase)
            case ("pod-gone", name):
                pods.pop(name, None)
            case ("cycle",):
                cycle()
    cycle()
