"""A role whose planned pods share one node: its template names the node (no gate, no patch
per pod), and restore takes it back exactly (queueing/placement.py: one_node_roles, hold's
`nodes`, PLACED_ON)."""

import copy

from hypothesis import given
from hypothesis import strategies as st

from queueing import Workload, capabilities
from queueing.placement import GATE, HOSTNAME, PLACED_ON, held, hold, one_node_roles, restore
from queueing.workload import PodSet
from tests.queueing.test_queueing_placement import SETTINGS, adapter_of, written

NODES = st.sampled_from(["n0", "n1", "rack-a-node-7"])


@st.composite
def with_nodes(draw):
    """(manifest, runtimes, workload, nodes): some of the workload's roles named a node."""
    manifest, runtimes, workload = draw(written())
    roles = [ps.role.lower() for ps in workload.pod_sets]
    named = draw(st.lists(st.sampled_from(roles), unique=True)) if roles else []
    return manifest, runtimes, workload, {role: draw(NODES) for role in named}


def templates(adapter, obj):
    return [
        (role.lower(), capabilities.template_pod_spec(adapter, template))
        for role, template in capabilities.pod_templates(adapter, obj)
    ]


@given(with_nodes())
@SETTINGS
def test_restore_undoes_a_hold_that_names_nodes_exactly(generated):
    manifest, _, workload, nodes = generated
    adapter, before = adapter_of(manifest), copy.deepcopy(manifest)
    held_obj = hold(adapter, manifest, workload, nodes)
    assert manifest == before
    assert restore(adapter, held_obj) == manifest
    assert held(adapter, held_obj, workload)
    assert hold(adapter, held_obj, workload, nodes) == held_obj  # idempotent


@given(with_nodes(), st.data())
@SETTINGS
def test_every_template_is_gated_or_names_its_roles_one_node(generated, data):
    manifest, _, workload, nodes = generated
    adapter = adapter_of(manifest)
    held_obj = hold(adapter, manifest, workload, nodes)
    for role, spec in templates(adapter, held_obj):
        gated = GATE in [gate.get("name") for gate in spec.get("schedulingGates") or []]
        selected = (spec.get("nodeSelector") or {}).get(HOSTNAME)
        if selected is not None and selected == nodes.get(role):
            assert not gated  # its pods go there as they are made: nothing to lift
        else:
            assert gated
    # Released again elsewhere (a preempted job resumes on other nodes): as if held afresh.
    roles = [ps.role.lower() for ps in workload.pod_sets]
    again = {role: data.draw(NODES) for role in roles if data.draw(st.booleans())}
    assert hold(adapter, held_obj, workload, again) == hold(adapter, manifest, workload, again)


@given(with_nodes())
@SETTINGS
def test_the_object_says_which_roles_hold_named_and_nothing_when_none(generated):
    manifest, _, workload, nodes = generated
    adapter = adapter_of(manifest)
    annotations = hold(adapter, manifest, workload, nodes).get("metadata", {}).get("annotations") or {}
    assert (PLACED_ON in annotations) <= bool(nodes)
    assert PLACED_ON not in (hold(adapter, manifest, workload).get("metadata", {}).get("annotations") or {})


def workload(*pod_sets: PodSet) -> Workload:
    return Workload("TFJob", "kubeflow.org/v1", "j", "team-a", pod_sets)


def test_one_node_roles_are_those_whose_pods_share_a_node_not_elastic_not_on_shared_cards():
    w = workload(
        PodSet("Launcher", 1),
        PodSet("Worker", 3),
        PodSet("PS", 2),
        PodSet("Elastic", 2, minimum=1, maximum=4),
        PodSet("Carded", 1),
    )
    placement = [
        ("Launcher", 0, "a"),
        ("Worker", 0, "b"),
        ("Worker", 1, "b"),
        ("Worker", 2, "b"),
        ("PS", 0, "a"),
        ("PS", 1, "c"),
        ("Elastic", 0, "a"),
        ("Carded", 0, "d"),
    ]
    cards = [("Carded", 0, (1,))]
    assert one_node_roles(w, placement, cards) == {"launcher": "a", "worker": "b"}
    assert one_node_roles(w, [], ()) == {}
