"""Slices (queueing/topology.py, Kueue's podset-slice-required-topology and
podset-slice-size): each role's pods in slices, each slice in one domain of the slice level,
all or none; the annotations that ask for them (queueing/topology_request.py)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from queueing import Node, PendingJob, PodSet, Reason, Snapshot, Workload, plan
from queueing.fit import NodeFailure, NodePool
from queueing.snapshot import gang_of, node_totals
from queueing.topology import (
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    SLICE_REQUIRED_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    Topology,
    TopologyRequest,
    request_of,
)
from tests.examples import examples

GI = 2**30
NOW = 1_000_000.0
RACK = "topology.jobdash.io/rack"
BLOCK = "topology.jobdash.io/block"
LEVELS = (BLOCK, RACK, "kubernetes.io/hostname")


def workload(roles: dict[str, int], gpus: int = 8, annotations: dict | None = None) -> Workload:
    pod_sets = tuple(
        PodSet(role, count, {"cpu": 12_000 * gpus, "memory": 96 * GI * gpus, "nvidia.com/gpu": gpus})
        for role, count in roles.items()
    )
    return Workload("TFJob", "kubeflow.org/v1", "j", None, pod_sets, annotations=annotations or {})


def job(job_id: int, workers: int, annotations: dict | None = None, gpus: int = 8) -> PendingJob:
    return PendingJob(job_id, "team-a", 0, NOW - 100 + job_id, workload({"Worker": workers}, gpus, annotations))


def node(name: str, rack: str, used_gpus: int = 0, block: str = "b0") -> Node:
    allocated = {"nvidia.com/gpu": used_gpus, "cpu": 12_000 * used_gpus, "memory": 96 * GI * used_gpus}
    return Node(
        name,
        {"cpu": 96_000, "memory": 768 * GI, "nvidia.com/gpu": 8, "pods": 110},
        allocated,
        labels={RACK: rack, BLOCK: block, "kubernetes.io/hostname": name},
    )


def cluster(racks: dict[str, int]) -> tuple[Node, ...]:
    return tuple(node(f"{rack}-n{i}", rack) for rack, count in racks.items() for i in range(count))


def slices(level: str = RACK, size: str = "4") -> dict:
    return {SLICE_REQUIRED_ANNOTATION: level, SLICE_SIZE_ANNOTATION: size}


def rack_of(node_name: str) -> str:
    return node_name.partition("-")[0]


def test_the_annotations_ask_for_slices_alone_or_within_a_required_or_preferred_level():
    assert request_of(workload({"Worker": 8}, annotations=slices())) == TopologyRequest("", False, RACK, 4)
    both = {**slices(size="2"), REQUIRED_ANNOTATION: BLOCK}
    assert request_of(workload({"Worker": 8}, annotations=both)) == TopologyRequest(BLOCK, True, RACK, 2)
    preferred = {**slices(), PREFERRED_ANNOTATION: BLOCK}
    assert request_of(workload({"Worker": 8}, annotations=preferred)) == TopologyRequest(BLOCK, False, RACK, 4)
    for size in ("0", "-1", "two", "", " "):
        assert request_of(workload({"Worker": 8}, annotations=slices(size=size))) is None
    assert request_of(workload({"Worker": 8}, annotations={SLICE_SIZE_ANNOTATION: "4"})) is None
    required = {REQUIRED_ANNOTATION: RACK, SLICE_SIZE_ANNOTATION: "4"}
    assert request_of(workload({"Worker": 8}, annotations=required)) == TopologyRequest(RACK, True)


def test_each_slice_runs_in_one_rack_and_the_slices_spread():
    nodes = cluster({"r1": 4, "r2": 4, "r3": 3})
    decided = plan(Snapshot(NOW, (job(1, 8, slices()),), nodes=nodes, topology_levels=LEVELS))
    (admission,) = decided.admissions
    racks = [rack_of(name) for _, _, name in admission.placement]
    assert sorted(racks) == ["r1"] * 4 + ["r2"] * 4  # no rack holds all 8; r3 holds no slice of 4


def test_no_rack_that_holds_a_slice_is_a_wait_naming_the_slice():
    nodes = cluster({"r1": 4, "r2": 3, "r3": 3})  # 10 free nodes: one rack holds a slice of 4
    decided = plan(Snapshot(NOW, (job(1, 8, slices()),), nodes=nodes, topology_levels=LEVELS))
    assert decided.admissions == ()
    status = decided.pending[1]
    assert status.reason is Reason.NO_DOMAIN_FITS
    assert status.message == (
        "no rack has room for a slice of 4 of its 8 pods (8 nvidia.com/gpu each); the roomiest has room for 3"
    )
    # Slices of 2 fit: 2 + 1 + 1 of them.
    assert len(plan(Snapshot(NOW, (job(1, 8, slices(size="2")),), nodes=nodes, topology_levels=LEVELS)).admissions)


def test_slices_within_a_required_block_stay_in_it():
    nodes = (*cluster({"r1": 2, "r2": 2}), *(node(f"r9-n{i}", "r9", block="b1") for i in range(8)))
    annotations = {**slices(size="2"), REQUIRED_ANNOTATION: BLOCK}
    decided = plan(Snapshot(NOW, (job(1, 4, annotations),), nodes=nodes, topology_levels=LEVELS))
    (admission,) = decided.admissions
    # b0 (r1 + r2) is the tighter block that holds both slices: one slice per rack.
    assert sorted(rack_of(name) for _, _, name in admission.placement) == ["r1", "r1", "r2", "r2"]


def test_a_slice_level_no_node_carries_never_fits():
    nodes = (Node("n0", {"cpu": 96_000, "memory": 768 * GI, "nvidia.com/gpu": 8}),)
    decided = plan(Snapshot(NOW, (job(1, 1, slices(size="1")),), nodes=nodes, topology_levels=LEVELS))
    status = decided.pending[1]
    assert status.reason is Reason.NEVER_FITS_NODES and "requires one rack" in status.message


@settings(max_examples=examples(200), deadline=None)
@given(
    racks=st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4"]), st.integers(1, 4), min_size=1),
    used=st.lists(st.integers(0, 8), min_size=16, max_size=16),
    roles=st.dictionaries(st.sampled_from(["Chief", "Worker", "PS"]), st.integers(1, 6), min_size=1, max_size=2),
    gpus=st.sampled_from([1, 2, 4, 8]),
    size=st.integers(1, 5),
)
def test_slices_each_in_one_rack_on_room_there_was_or_nothing_placed(racks, used, roles, gpus, size):
    nodes = tuple(
        node(f"{rack}-n{i}", rack, used_gpus=used[(index * 4 + i) % 16])
        for index, (rack, count) in enumerate(sorted(racks.items()))
        for i in range(count)
    )
    gang = gang_of(workload(roles, gpus))
    pool = NodePool(nodes)
    before = [dict(free) for free in pool.free]
    placed = Topology(pool, LEVELS).place(gang, node_totals(gang), TopologyRequest("", False, RACK, size))
    if isinstance(placed, NodeFailure):
        assert [dict(free) for free in pool.free] == before  # nothing charged
        assert placed.level == RACK and placed.free < placed.pods <= size
        return
    assert sorted(number for number, _ in placed) == sorted(n for n, g in enumerate(gang) for _ in range(g.count))
    for number, group in enumerate(gang):
        on = [pool.names[n] for g, n in placed if g == number]
        for start in range(0, group.count, size):
            assert len({rack_of(name) for name in on[start : start + size]}) == 1
    for number in range(len(pool.names)):
        taken = sum(gpus for _, n in placed if n == number)
        assert pool.free[number].get("nvidia.com/gpu", 0) >= 0
        assert pool.free[number].get("nvidia.com/gpu", 0) == before[number].get("nvidia.com/gpu", 0) - taken
