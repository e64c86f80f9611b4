"""Failed nodes (queueing/replacement.py): the lost pods of admitted gangs are placed again
on sound nodes before the queue is, keeping their numbers; a gang that finds no room is
evicted with a reason that names the failed node."""

from queueing import Node, PendingJob, PodSet, Snapshot, Workload, plan
from queueing.replacement import Replacement

GI = 2**30
NOW = 1_000_000.0


def workload(workers: int) -> Workload:
    pod = {"cpu": 8_000, "memory": 64 * GI, "nvidia.com/gpu": 8}
    return Workload("TFJob", "kubeflow.org/v1", "w", "team-a", (PodSet("Worker", workers, pod),))


def node(name: str, unschedulable: bool = False, used_gpus: int = 0) -> Node:
    return Node(
        name,
        {"cpu": 96_000, "memory": 768 * GI, "nvidia.com/gpu": 8},
        {"nvidia.com/gpu": used_gpus},
        unschedulable=unschedulable,
    )


def test_lost_pods_move_to_sound_nodes_before_the_queue_takes_them():
    # n0 still runs worker 0 and n2 is full, so only n3 is free: the lost worker takes it,
    # and the queued 1-node job behind finds nothing.
    nodes = (node("n0", used_gpus=8), node("n1", unschedulable=True), node("n2", used_gpus=8), node("n3"))
    lost = Replacement(7, "team-a", workload(2), keep=(("Worker", 0, "n0"),), lost=(("Worker", 1, "n1"),))
    queued = PendingJob(1, "team-a", 0, NOW - 10, workload(1))
    decided = plan(Snapshot(NOW, (queued,), nodes=nodes, replacements=(lost,)))
    assert decided.replacements == {7: (("Worker", 0, "n0"), ("Worker", 1, "n3"))}
    assert decided.evictions == {} and decided.admissions == ()


def test_a_gang_whose_lost_pods_find_no_room_is_evicted_naming_the_node():
    nodes = (node("n0", used_gpus=8), node("n1", unschedulable=True))
    lost = Replacement(7, "team-a", workload(2), keep=(("Worker", 0, "n0"),), lost=(("Worker", 1, "n1"),))
    decided = plan(Snapshot(NOW, (), nodes=nodes, replacements=(lost,)))
    assert decided.replacements == {}
    assert decided.evictions == {7: "its node n1 failed and no node has room for its 1 pod(s) from there: queued again"}
