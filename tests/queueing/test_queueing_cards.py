"""GPU sharing by memory (issue 34): each card checked, the pod on the card binpack picks."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import Node, PendingJob, PodSet, Reason, Snapshot, Workload, plan
from queueing.cards import CardPod, SharedCards, binpack
from queueing.devices import GPUSHARE, HAMI
from tests.examples import examples

NOW = 1_000_000.0
MEM = "aliyun.com/gpu-mem"
CARD = 16_276


def shared_node(name, used, memory=CARD):
    """A gpushare node whose card i has ``used[i]`` MiB taken by one pod that names the card."""
    cards = SharedCards.even(len(used), memory, [CardPod(amount, i) for i, amount in enumerate(used) if amount])
    allocatable = {"cpu": 64_000, MEM: memory * len(used), "aliyun.com/gpu-count": len(used), "pods": 110}
    return Node(name, allocatable, {MEM: sum(used)}, cards=cards)


def shared_job(job_id, mebibytes, pods=1, namespace=None):
    pod_set = PodSet("Worker", pods, {"cpu": 1000, MEM: mebibytes}, {MEM: mebibytes})
    workload = Workload("TFJob", "kubeflow.org/v1", f"job-{job_id}", None, (pod_set,))
    return PendingJob(job_id, namespace or f"team-{job_id}", 0, NOW - 60 + job_id, workload)


def world(jobs, nodes):
    return Snapshot(NOW, tuple(jobs), nodes=tuple(nodes))


def test_a_pod_goes_to_the_one_node_with_a_card_that_holds_it_though_another_has_as_much_in_total():
    nodes = [
        shared_node("n1", [CARD - 4_069, CARD]),  # 4,069 MiB left in total
        shared_node("n2", [CARD - 4_069, CARD - 4_069]),  # 8,138 in total, 4,069 per card
        shared_node("n3", [CARD - 8_138, CARD]),  # 8,138 on card 0
    ]
    result = plan(world([shared_job(1, 8_138)], nodes))
    assert result.admissions[0].placement == (("Worker", 0, "n3"),)
    assert result.cards == {1: (("Worker", 0, (0,)),)}


def test_binpack_takes_the_card_with_the_least_free_that_still_holds_the_pod():
    assert binpack([12_207, 8_138, 4_069, 16_276], 8_000) == (1,)
    node = shared_node("n1", [CARD - 12_207, CARD - 8_138, CARD - 4_069, 0])
    result = plan(world([shared_job(1, 8_000)], [node]))
    assert result.cards == {1: (("Worker", 0, (1,)),)}


def test_pods_of_one_gang_are_charged_card_by_card():
    # 3 pods of 6,000 on two 16,276 cards: two fit on card 0 (12,000), the third on card 1.
    result = plan(world([shared_job(1, 6_000, pods=3), shared_job(2, 10_000)], [shared_node("n1", [0, 0])]))
    assert result.cards[1] == (("Worker", 0, (0,)), ("Worker", 1, (0,)), ("Worker", 2, (1,)))
    # 4,276 left on card 0 and 10,276 on card 1: the 10,000 pod fits card 1 only.
    assert result.cards[2] == (("Worker", 0, (1,)),)


def test_the_reason_names_the_card_with_the_most_free_memory():
    nodes = [shared_node("node-1", [CARD - 2_000, CARD - 2_069]), shared_node("node-2", [CARD - 4_069] * 2)]
    nodes.append(Node("cpu-1", {"cpu": 64_000, "pods": 110}))  # no GPUs: not why it waits
    result = plan(world([shared_job(1, 8_138)], nodes))
    status = result.pending[1]
    assert status.reason is Reason.NO_NODE_FITS
    assert status.message == "no single GPU has 8,138 MiB free: the most is 4,069 MiB on node-2's GPU 0"


def test_a_pod_larger_than_one_card_never_fits_though_the_node_has_enough_in_total():
    result = plan(world([shared_job(1, CARD + 1)], [shared_node("n1", [0, 0])]))
    status = result.pending[1]
    assert status.reason is Reason.NEVER_FITS_NODES
    assert "16,277 MiB on one GPU, the largest GPU has 16,276 MiB" in status.message


def test_a_shared_node_hands_out_no_whole_cards():
    allocatable = {"cpu": 64_000, "nvidia.com/gpu": 2, MEM: 2 * CARD}
    node = Node("n1", allocatable, cards=SharedCards.even(2, CARD))
    pod_set = PodSet("Worker", 1, {"cpu": 1000, "nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1})
    job = PendingJob(1, "team-a", 0, NOW, Workload("TFJob", "kubeflow.org/v1", "j", None, (pod_set,)))
    assert not plan(world([job], [node])).admissions


def test_pods_without_a_card_index_are_charged_where_binpack_puts_them():
    cards = SharedCards.even(2, CARD, [CardPod(10_000, 1), CardPod(5_000), CardPod(3_000)])
    # 5,000 goes to card 1 (6,276 free, the tightest that holds it), then 3,000 to card 0.
    assert cards.used == (3_000, 15_000)


def test_device_models_read_their_own_resources():
    assert GPUSHARE.demand({MEM: 4_000}) == (4_000, 1)
    assert HAMI.demand({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 3_000}) == (3_000, 2)
    assert HAMI.quota_total({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 3_000}) == 6_000
    assert GPUSHARE.demand({"nvidia.com/gpu": 1}) is None
    with pytest.raises(ValueError, match="unknown device model"):
        SharedCards((CARD,), model="nope")


def test_nodes_without_shared_cards_plan_as_before():
    node = Node("n1", {"cpu": 4_000, "nvidia.com/gpu": 2})
    pod_set = PodSet("Worker", 2, {"cpu": 1000, "nvidia.com/gpu": 1}, {})
    job = PendingJob(1, "team-a", 0, NOW, Workload("TFJob", "kubeflow.org/v1", "j", None, (pod_set,)))
    result = plan(world([job], [node]))
    assert result.admitted == (1,)
    assert result.cards == {}


@st.composite
def shared_worlds(draw):
    nodes = []
    for number in range(draw(st.integers(1, 4))):
        memory = draw(st.sampled_from([8_000, CARD]))
        used = draw(st.lists(st.integers(0, memory), min_size=1, max_size=4))
        nodes.append(shared_node(f"n{number}", used, memory))
    sizes = draw(st.lists(st.tuples(st.integers(500, 17_000), st.integers(1, 3)), min_size=1, max_size=6))
    jobs = [shared_job(job_id, mebibytes, pods) for job_id, (mebibytes, pods) in enumerate(sizes, 1)]
    return world(jobs, nodes)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shared_worlds())
def test_admitted_pods_fit_their_cards_and_refused_pods_fit_no_card(snapshot):
    result = plan(snapshot)
    nodes = {node.name: node for node in snapshot.nodes}
    free = {name: list(node.cards.free) for name, node in nodes.items()}
    jobs = {job.id: job for job in snapshot.pending}
    for admission in result.admissions:
        asked = dict(jobs[admission.job_id].gang[0].requests)[MEM]
        cards = {(role, index): chosen for role, index, chosen in result.cards[admission.job_id]}
        for role, index, name in admission.placement:
            (card,) = cards[(role, index)]
            assert free[name][card] >= asked, "an admitted pod fits its card"
            free[name][card] -= asked
    assert all(amount >= 0 for cards in free.values() for amount in cards), "no card is over-committed"
    roomiest = max(amount for cards in free.values() for amount in cards)
    for job_id, status in result.pending.items():
        job = jobs[job_id]
        asked = dict(job.gang[0].requests)[MEM]
        if status.reason in (Reason.NO_NODE_FITS, Reason.NEVER_FITS_NODES) and job.gang[0].count == 1:
            assert asked > roomiest, "a single pod refused fits no card"


def test_a_hami_pod_takes_one_share_on_each_of_as_many_cards_as_it_asks_vgpus():
    # Three 16,276 cards with 10,000 / 4,000 / 3,000 MiB free: two vGPUs of 3,500 MiB go
    # to cards 1 and 0 (the tightest that hold one each), not card 2.
    cards = SharedCards(
        (CARD,) * 3, (CardPod(CARD - 10_000, 0), CardPod(CARD - 4_000, 1), CardPod(CARD - 3_000, 2)), "hami"
    )
    allocatable = {"cpu": 64_000, "nvidia.com/gpu": 30, "nvidia.com/gpumem": 3 * CARD}
    allocated = {"nvidia.com/gpu": 3, "nvidia.com/gpumem": 3 * CARD - 17_000}
    node = Node("n1", allocatable, allocated, cards=cards)
    requests = {"cpu": 1000, "nvidia.com/gpu": 2, "nvidia.com/gpumem": 3_500}
    pod_set = PodSet("Worker", 1, requests, {})
    job = PendingJob(1, "team-a", 0, NOW, Workload("TFJob", "kubeflow.org/v1", "j", None, (pod_set,)))
    assert plan(world([job], [node])).cards == {1: (("Worker", 0, (0, 1)),)}


def test_no_pod_is_preempted_for_memory_the_cards_would_not_give_back():
    """The planner does not know which card a victim frees, so it frees none: a card-bound
    pod never costs a running job its place (documented), rather than a kill that helps nobody."""
    from queueing import NamespaceQuota, RunningJob, get_policy

    node = shared_node("n1", [CARD - 4_000, CARD])  # a running job holds 12,276 on card 0; card 1 full too
    low = PodSet("Worker", 1, {"cpu": 1000, MEM: CARD - 4_000}, {})
    running = RunningJob(
        9,
        "team-a",
        Workload("TFJob", "kubeflow.org/v1", "low", None, (low,)),
        NOW - 600,
        priority=0,
        placements=(("Worker", 0, "n1"),),
    )
    urgent = PendingJob(
        1,
        "team-a",
        1000,
        NOW,
        Workload("TFJob", "kubeflow.org/v1", "j", None, (PodSet("Worker", 1, {"cpu": 1000, MEM: 8_000}, {}),)),
    )
    quota = {"team-a": NamespaceQuota("team-a", {"requests.cpu": 64_000}, {"requests.cpu": 1_000})}
    policy = get_policy("priority", preempt_lower_priority=True)
    result = plan(Snapshot(NOW, (urgent,), running=(running,), quotas=quota, nodes=(node,)), policy)
    assert not result.admissions and not result.preemptions
    # The same node counted by its total alone: the victim would be preempted.
    whole = Node("n1", node.allocatable, node.allocated)
    counted = plan(Snapshot(NOW, (urgent,), running=(running,), quotas=quota, nodes=(whole,)), policy)
    assert [p.victim for p in counted.preemptions] == [9]


def test_a_pod_asking_more_whole_gpus_than_any_node_has_never_fits_though_a_hami_node_counts_more_vgpus():
    """HAMi's nvidia.com/gpu counts vGPUs (4 cards x 10 here): one pod gets at most one per
    card, so the node holds 4 whole GPUs for one pod, not 40. The largest node is named."""
    hami = Node(
        "share-hami-0",
        {"cpu": 32_000, "nvidia.com/gpu": 40, "pods": 110},
        cards=SharedCards.even(4, 32_768, model="hami"),
    )
    whole = [Node(f"rack1-node-{i}", {"cpu": 32_000, "nvidia.com/gpu": 8, "pods": 110}) for i in range(2)]
    pod_set = PodSet("Worker", 1, {"cpu": 1000, "nvidia.com/gpu": 16}, {"nvidia.com/gpu": 16})
    job = PendingJob(1, "team-b", 0, NOW, Workload("TFJob", "kubeflow.org/v1", "big", None, (pod_set,)))
    status = plan(world([job], [hami, *whole])).pending[1]
    assert status.reason is Reason.NEVER_FITS_NODES
    assert status.detail["free"] == 8 and status.detail["node"] == "rack1-node-0"
    assert status.message == (
        "never fits any node: a Worker pod needs 16 nvidia.com/gpu, the largest node (rack1-node-0) has 8"
    )
    assert status.eta is None
    # The same pod on a cluster of only the HAMi node: its 4 cards are the most one pod gets.
    alone = plan(world([job], [hami])).pending[1]
    assert alone.reason is Reason.NEVER_FITS_NODES and alone.detail["free"] == 4
