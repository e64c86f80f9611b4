"""Which gated pod goes to which planned node (queueing.placement.assign): slots held by
pods already past the gate first, then each gated pod a free slot of its role."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from queueing.placement import Assignment, JobPod, assign
from tests.examples import examples

WORKERS = [("Worker", 0, "a"), ("Worker", 1, "a"), ("Worker", 2, "b"), ("Worker", 3, "c")]


def gated(name, index=None, role="worker", node=""):
    return JobPod(name, role, index, gated=True, node=node)


def running(name, node, index=None, role="worker"):
    return JobPod(name, role, index, gated=False, node=node)


def test_gated_pods_get_the_slots_of_their_own_index():
    pods = [gated(f"w{i}", i) for i in (3, 0, 2, 1)]
    assert assign(WORKERS, pods) == Assignment({"w0": "a", "w1": "a", "w2": "b", "w3": "c"})


def test_roles_are_compared_without_case():
    placement = [("Master", 0, "m"), ("Worker", 0, "w")]
    pods = [gated("master-0", 0, role="master"), gated("worker-0", 0, role="WORKER")]
    assert assign(placement, pods).nodes == {"master-0": "m", "worker-0": "w"}


def test_gated_pods_without_an_index_fill_the_free_slots_in_index_order():
    assert assign(WORKERS, [gated("x"), gated("y")]).nodes == {"x": "a", "y": "a"}
    # Numbered pods go first, in their numbers' order, whatever their names.
    placement = [("Worker", 0, "a"), ("Worker", 1, "b"), ("Worker", 2, "c")]
    pods = [gated("c"), gated("a", 9), gated("b", 8)]
    assert assign(placement, pods).nodes == {"b": "a", "a": "b", "c": "c"}


def test_two_pods_wanting_one_slot_are_decided_by_name_not_by_the_order_they_come_in():
    placement = [("Worker", 0, "a")]
    for pods in ([gated("x", 0), gated("y", 0)], [gated("y", 0), gated("x", 0)]):
        assert assign(placement, pods) == Assignment({"x": "a"}, ("y",))


def test_pods_past_the_gate_use_up_slots_on_their_own_node_first():
    pods = [running("r", "c"), gated("g0"), gated("g1"), gated("g2"), gated("g3")]
    result = assign(WORKERS, pods)
    assert result.nodes == {"g0": "a", "g1": "a", "g2": "b"}
    assert result.unassigned == ("g3",)


def test_a_pod_past_the_gate_on_no_slot_uses_one_up_by_count():
    # Its kind numbers pods its own way, or it runs where the plan has no room for it: it
    # still is one of the role's pods, and the role has only as many slots as planned.
    pods = [running("r", "elsewhere", index=0), *[gated(f"g{i}", i) for i in range(4)]]
    result = assign(WORKERS, pods)
    assert len(result.nodes) == 3 and len(result.unassigned) == 1
    # It took a slot no gated pod's index names last: here every slot is named, the lowest goes.
    assert result.nodes == {"g1": "a", "g2": "b", "g3": "c"} and result.unassigned == ("g0",)


def test_a_pod_past_the_gate_leaves_a_gated_pods_own_slot_alone():
    placement = [("Worker", 0, "a"), ("Worker", 1, "b")]
    # r runs on no slot's node: it uses one up by count, the one g0's index does not name.
    assert assign(placement, [running("r", "z"), gated("g0", 0)]).nodes == {"g0": "a"}
    assert assign(placement, [running("r", "z"), gated("g1", 1)]).nodes == {"g1": "b"}
    # Both slots on a are named: r, running there, takes the lowest, g0 goes where one is left.
    pods = [running("r", "a"), gated("g0", 0), gated("g1", 1)]
    assert assign(WORKERS, pods).nodes == {"g0": "b", "g1": "a"}


def test_a_gated_pod_already_selected_for_a_node_keeps_it_while_a_slot_is_free_there():
    assert assign(WORKERS, [gated("g", 0, node="c")]).nodes == {"g": "c"}
    assert assign(WORKERS, [running("r", "c"), gated("g", 3, node="c")]).nodes == {"g": "a"}


def test_terminating_pods_hold_nothing_and_get_nothing():
    leaving = JobPod("old", "worker", 3, gated=False, node="c", terminating=True)
    leaving_gated = JobPod("old-gated", "worker", 2, gated=True, terminating=True)
    result = assign(WORKERS, [leaving, leaving_gated, gated("new", 3)])
    assert result == Assignment({"new": "c"})


def test_ended_pods_leave_their_slots_to_the_next_wave():
    # a batch Job of 4 completions, 2 at a time: its first wave ended on a and b, its second
    # comes gated and must get those slots (held, they would stay gated for ever)
    plan = [("Worker", 0, "a"), ("Worker", 1, "b")]
    ended = [JobPod(f"done-{i}", "worker", None, gated=False, node=n, ended=True) for i, n in enumerate("ab")]
    result = assign(plan, [*ended, gated("next-0"), gated("next-1")])
    assert result == Assignment({"next-0": "a", "next-1": "b"})


def test_pods_beyond_the_plan_are_named_unassigned():
    pods = [gated("m", 0, role="master"), *[gated(f"w{i}", i) for i in range(6)]]
    result = assign(WORKERS, pods)
    assert result.unassigned == ("m", "w4", "w5")
    assert assign([], [gated("w")]) == Assignment({}, ("w",))
    assert assign(WORKERS, []) == Assignment()


# --- properties ----------------------------------------------------------------------------

NODES = ["n0", "n1", "n2", "n3"]


@st.composite
def plans(draw):
    """(placement as the planner makes one, the job's pods in any state)."""
    roles = draw(st.lists(st.sampled_from(["Master", "Worker", "ps", "launcher"]), min_size=1, max_size=3, unique=True))
    placement, pods = [], []
    for role in roles:
        count = draw(st.integers(0, 6))
        placement += [(role, index, draw(st.sampled_from(NODES))) for index in range(count)]
        for number in range(draw(st.integers(0, count + 3))):
            pods.append(
                JobPod(
                    name=f"{role.lower()}-{number}",
                    role=draw(st.sampled_from([role, role.lower(), role.upper()])),
                    index=draw(st.none() | st.integers(0, count + 2)),
                    gated=draw(st.booleans()),
                    node=draw(st.sampled_from(["", *NODES, "elsewhere"])),
                    terminating=draw(st.integers(0, 5)) == 0,
                )
            )
    if draw(st.booleans()):  # a role the plan does not know
        pods.append(JobPod("stray-0", "stray", 0, gated=True))
    return placement, pods


def planned(placement):
    return Counter((role.lower(), node) for role, _, node in placement)


@given(plans())
@settings(max_examples=examples(500), deadline=None)
def test_no_node_gets_more_pods_of_a_role_than_planned(generated):
    placement, pods = generated
    result = assign(placement, pods)
    roles = {pod.name: pod.role.lower() for pod in pods}
    given_to = Counter((roles[name], node) for name, node in result.nodes.items())
    already = Counter((p.role.lower(), p.node) for p in pods if not p.gated and not p.terminating)
    for (role, node), count in given_to.items():
        assert count <= planned(placement)[(role, node)] - already[(role, node)]


@given(plans())
@settings(max_examples=examples(500), deadline=None)
def test_every_gated_pod_gets_a_slot_while_slots_of_its_role_remain(generated):
    placement, pods = generated
    result = assign(placement, pods)
    waiting = {p.name for p in pods if p.gated and not p.terminating}
    assert set(result.nodes) | set(result.unassigned) == waiting
    assert not set(result.nodes) & set(result.unassigned)
    slots = Counter(role.lower() for role, _, _ in placement)
    for role in {p.role.lower() for p in pods}:
        of_role = [p for p in pods if p.role.lower() == role and not p.terminating]
        left = max(0, slots[role] - sum(1 for p in of_role if not p.gated))
        got = sum(1 for p in of_role if p.name in result.nodes)
        assert got == min(left, sum(1 for p in of_role if p.gated))
        nodes_of_role = {node for r, _, node in placement if r.lower() == role}
        assert all(result.nodes[p.name] in nodes_of_role for p in of_role if p.name in result.nodes)


@given(plans(), st.randoms(use_true_random=False))
@settings(max_examples=examples(300), deadline=None)
def test_the_answer_does_not_depend_on_the_order_of_the_inputs(generated, rnd):
    placement, pods = generated
    shuffled_placement, shuffled_pods = list(placement), list(pods)
    rnd.shuffle(shuffled_placement)
    rnd.shuffle(shuffled_pods)
    assert assign(shuffled_placement, shuffled_pods) == assign(placement, pods)


@given(plans())
@settings(max_examples=examples(300), deadline=None)
def test_a_gated_pod_whose_index_is_a_free_slots_gets_that_slot(generated):
    placement, pods = generated
    # Only gated pods, none selected for a node, indexes unique within their role.
    seen, fresh = set(), []
    for pod in pods:
        key = (pod.role.lower(), pod.index)
        if key not in seen:
            seen.add(key)
            fresh.append(JobPod(pod.name, pod.role, pod.index, gated=True))
    result = assign(placement, fresh)
    slot_of = {(role.lower(), index): node for role, index, node in placement}
    for pod in fresh:
        if (pod.role.lower(), pod.index) in slot_of:
            assert result.nodes[pod.name] == slot_of[(pod.role.lower(), pod.index)]
