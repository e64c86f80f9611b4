"""node_screen.never_fits, the submit page's "never fits any node", says what the planner
would: a job it calls never-fitting is one the planner never admits on those nodes, even
empty, and every job the planner calls NeverFitsNodes it calls so too."""

from hypothesis import given
from hypothesis import strategies as st

from queueing import Node, PendingJob, PodSet, Reason, Snapshot, Workload, plan
from queueing.cards import SharedCards
from queueing.node_screen import never_fits
from queueing.snapshot import gang_of

from .test_queueing_planner_properties import SETTINGS

GPU = "nvidia.com/gpu"


@st.composite
def node(draw, name: str) -> Node:
    labels = {"pool": draw(st.sampled_from(["a", "b"]))}
    unschedulable = draw(st.integers(0, 6)) == 0
    if draw(st.integers(0, 3)) == 0:  # HAMi: vGPUs, at most one per card for one pod
        cards = SharedCards.even(draw(st.integers(1, 4)), 32_768, model="hami")
        allocatable = {"cpu": 32_000, GPU: 10 * len(cards.memory), "nvidia.com/gpumem": 32_768 * len(cards.memory)}
        return Node(name, allocatable, labels=labels, unschedulable=unschedulable, cards=cards)
    allocatable = {"cpu": draw(st.sampled_from([8_000, 32_000])), GPU: draw(st.sampled_from([0, 4, 8]))}
    return Node(name, allocatable, labels=labels, unschedulable=unschedulable)


@st.composite
def job(draw) -> PendingJob:
    pod_sets = []
    for role in draw(st.lists(st.sampled_from(["Chief", "Worker"]), min_size=1, max_size=2, unique=True)):
        requests = {"cpu": draw(st.sampled_from([1_000, 16_000, 40_000])), GPU: draw(st.integers(0, 12))}
        selector = {"pool": draw(st.sampled_from(["a", "b"]))} if draw(st.booleans()) else {}
        pod_sets.append(PodSet(role, draw(st.integers(1, 3)), requests, {}, selector))
    return PendingJob(1, "team-a", 0, 0.0, Workload("TFJob", "kubeflow.org/v1", "j", None, tuple(pod_sets)))


@SETTINGS
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(*(node(f"n{i}") for i in range(n)))), job())
def test_never_fits_agrees_with_the_planner_on_empty_nodes(nodes, pending):
    found = never_fits(gang_of(pending.workload), nodes)
    result = plan(Snapshot(1.0, (pending,), nodes=nodes))
    planner_never = not result.admitted and result.pending[1].reason is Reason.NEVER_FITS_NODES
    assert (found is not None) == planner_never
    if found is not None:
        assert found == (result.pending[1].reason, result.pending[1].detail)


def test_short_only_of_the_combination_names_the_node_that_comes_closest_and_what_it_lacks():
    """Each request fits some node alone (8 GPUs on the small node, 16 CPU on the GPU-less
    one), none holds both: the words name the nearer node's shortage, not "needs 1, has 4";
    the planner, placing its largest group first, and the screen name the same group."""
    nodes = (Node("n0", {"cpu": 8_000, GPU: 4}), Node("n1", {"cpu": 32_000, GPU: 0}))
    chief = PodSet("Chief", 1, {"cpu": 16_000, GPU: 1}, {}, {})
    worker = PodSet("Worker", 1, {"cpu": 16_000, GPU: 2}, {}, {})
    pending = PendingJob(1, "team-a", 0, 0.0, Workload("TFJob", "kubeflow.org/v1", "j", None, (chief, worker)))
    found = never_fits(gang_of(pending.workload), nodes)
    result = plan(Snapshot(1.0, (pending,), nodes=nodes))
    assert found == (result.pending[1].reason, result.pending[1].detail)
    assert found[1] == {
        "resource": "cpu",
        "needed": 16_000,
        "free": 8_000,
        "role": "Worker",
        "node": "n0",
        "combined": True,
    }
    assert result.pending[1].message.startswith(
        "never fits any node: a Worker pod needs 16 cpu with its other requests on one node, "
        "the node that comes closest (n0) has 8"
    )


def test_a_group_that_never_fits_makes_the_gang_never_fit_whichever_group_failed_first():
    """The larger group fails for now (its 16 CPU are taken); the smaller asks for a pool no
    node is in: waiting will not help, and the planner says so, as the screen does."""
    busy = (  # 20 CPU free in all, 10 on each: the cluster's total is not what stops it
        Node("n0", {"cpu": 32_000}, allocated={"cpu": 22_000}, labels={"pool": "a"}),
        Node("n1", {"cpu": 32_000}, allocated={"cpu": 22_000}, labels={"pool": "a"}),
    )
    big = PodSet("Chief", 1, {"cpu": 16_000}, {}, {})
    lost = PodSet("Worker", 1, {"cpu": 1_000}, {}, {"pool": "b"})
    pending = PendingJob(1, "team-a", 0, 0.0, Workload("TFJob", "kubeflow.org/v1", "j", None, (big, lost)))
    result = plan(Snapshot(1.0, (pending,), nodes=busy))
    assert result.pending[1].reason is Reason.NEVER_FITS_NODES
    assert result.pending[1].detail["role"] == "Worker"
    assert never_fits(gang_of(pending.workload), busy) == (result.pending[1].reason, result.pending[1].detail)
