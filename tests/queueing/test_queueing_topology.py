"""Topology-aware placement (queueing/topology.py) and the balance term of best fit: a
required level is kept or the job waits with a reason naming it, a preferred level gives
way, a gang goes to the tightest domain that holds it, and equally tight nodes are chosen
by the balance a pod leaves."""

from hypothesis import given, settings
from hypothesis import strategies as st

from queueing import Node, PendingJob, PodSet, Reason, Snapshot, Workload, plan
from queueing.fit import NodePool
from queueing.snapshot import gang_of, node_totals
from queueing.topology import PREFERRED_ANNOTATION, REQUIRED_ANNOTATION
from tests.examples import examples

GI = 2**30
NOW = 1_000_000.0
RACK = "topology.jobdash.io/rack"
BLOCK = "topology.jobdash.io/block"
LEVELS = (BLOCK, RACK, "kubernetes.io/hostname")


def gpu_job(job_id: int, workers: int, gpus: int = 8, annotations: dict | None = None) -> PendingJob:
    workload = Workload(
        "TFJob",
        "kubeflow.org/v1",
        f"j{job_id}",
        None,
        (PodSet("Worker", workers, {"cpu": 12_000 * gpus, "memory": 96 * GI * gpus, "nvidia.com/gpu": gpus}),),
        annotations=annotations or {},
    )
    return PendingJob(job_id, "team-a", 0, NOW - 100 + job_id, workload)


def gpu_node(name: str, rack: str, block: str = "b0", used_gpus: int = 0, cpu: int = 96_000) -> Node:
    allocated = {"nvidia.com/gpu": used_gpus, "cpu": 12_000 * used_gpus, "memory": 96 * GI * used_gpus}
    return Node(
        name,
        {"cpu": cpu, "memory": 768 * GI, "nvidia.com/gpu": 8, "pods": 110},
        allocated,
        labels={RACK: rack, BLOCK: block, "kubernetes.io/hostname": name},
    )


def cluster(racks: dict[str, int], busy: frozenset[str] = frozenset()) -> tuple[Node, ...]:
    """`racks`: rack -> how many nodes; the nodes named in `busy` have all GPUs in use."""
    return tuple(
        gpu_node(f"{rack}-n{i}", rack, used_gpus=8 if f"{rack}-n{i}" in busy else 0)
        for rack, count in racks.items()
        for i in range(count)
    )


def required(level: str = RACK) -> dict:
    return {REQUIRED_ANNOTATION: level}


def rack_of(node_name: str) -> str:
    return node_name.partition("-")[0]


def test_a_required_rack_keeps_the_whole_gang_in_one_rack_the_tightest_that_holds_it():
    nodes = cluster({"r1": 4, "r2": 3, "r3": 2})  # 32, 24 and 16 free GPUs
    decided = plan(Snapshot(NOW, (gpu_job(1, 3, annotations=required()),), nodes=nodes, topology_levels=LEVELS))
    (admission,) = decided.admissions
    assert {rack_of(node) for _, _, node in admission.placement} == {"r2"}  # r3 is too small, r1 roomier


def test_no_rack_that_holds_the_gang_is_a_wait_naming_the_level_and_the_roomiest_rack():
    nodes = cluster({"r1": 2, "r2": 2, "r3": 2})  # 6 free nodes, but 2 per rack
    decided = plan(Snapshot(NOW, (gpu_job(1, 4, annotations=required()),), nodes=nodes, topology_levels=LEVELS))
    assert decided.admissions == ()
    status = decided.pending[1]
    assert status.reason is Reason.NO_DOMAIN_FITS
    assert status.message == (
        "no rack has room for all 4 pods (8 nvidia.com/gpu each) at once; the roomiest has room for 2"
    )
    # The same job without the requirement spreads over racks at once.
    free = plan(Snapshot(NOW, (gpu_job(1, 4),), nodes=nodes, topology_levels=LEVELS))
    assert len(free.admissions) == 1


def test_a_preferred_rack_gives_way_to_the_block_then_to_anywhere():
    nodes = cluster({"r1": 2, "r2": 2})
    preferred = {PREFERRED_ANNOTATION: RACK}
    decided = plan(Snapshot(NOW, (gpu_job(1, 3, annotations=preferred),), nodes=nodes, topology_levels=LEVELS))
    (admission,) = decided.admissions
    assert len(admission.placement) == 3
    fits = plan(Snapshot(NOW, (gpu_job(2, 2, annotations=preferred),), nodes=nodes, topology_levels=LEVELS))
    assert len({rack_of(node) for _, _, node in fits.admissions[0].placement}) == 1


def test_a_level_no_node_carries_never_fits_and_says_so():
    nodes = (Node("n0", {"cpu": 96_000, "memory": 768 * GI, "nvidia.com/gpu": 8}),)
    decided = plan(Snapshot(NOW, (gpu_job(1, 1, annotations=required()),), nodes=nodes, topology_levels=LEVELS))
    status = decided.pending[1]
    assert status.reason is Reason.NEVER_FITS_NODES and "requires one rack" in status.message


def test_jobs_of_one_shape_with_and_without_a_requirement_are_decided_apart():
    """The planner remembers capacity failures by shape: a requirement is part of it."""
    nodes = cluster({"r1": 2, "r2": 2})
    pending = (gpu_job(1, 3, annotations=required()), gpu_job(2, 3))
    decided = plan(Snapshot(NOW, pending, nodes=nodes, topology_levels=LEVELS))
    assert decided.admitted == (2,) and decided.pending[1].reason is Reason.NO_DOMAIN_FITS


@settings(max_examples=examples(150), deadline=None)
@given(
    racks=st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4"]), st.integers(1, 4), min_size=1),
    used=st.lists(st.integers(0, 8), min_size=16, max_size=16),
    jobs=st.lists(st.tuples(st.integers(1, 5), st.sampled_from([1, 2, 4, 8]), st.booleans()), min_size=1, max_size=8),
)
def test_every_admitted_gang_with_a_required_rack_runs_in_one_rack(racks, used, jobs):
    nodes = tuple(
        gpu_node(f"{rack}-n{i}", rack, used_gpus=used[(index * 4 + i) % 16])
        for index, (rack, count) in enumerate(sorted(racks.items()))
        for i in range(count)
    )
    pending = tuple(
        gpu_job(number + 1, workers, gpus, required() if need else None)
        for number, (workers, gpus, need) in enumerate(jobs)
    )
    decided = plan(Snapshot(NOW, pending, nodes=nodes, topology_levels=LEVELS))
    wanted = {job.id: job for job in pending}
    for admission in decided.admissions:
        if REQUIRED_ANNOTATION in wanted[admission.job_id].workload.annotations:
            assert len({rack_of(node) for _, _, node in admission.placement}) == 1
    for status in decided.pending.values():
        if status.reason is Reason.NO_DOMAIN_FITS:
            assert status.detail["roomiest"] < status.detail["pods"]


def test_of_equally_tight_nodes_a_pod_takes_the_gpus_a_starved_cpu_would_strand():
    """Two nodes with 4 free GPUs each; on one, CPU is nearly all given out. The first pod
    goes there, where it leaves the node evenly used, so the second, which needs more CPU,
    still finds a node; by node order alone the first would take the roomy node and strand
    the starved node's GPUs."""
    roomy = Node("a-roomy", {"cpu": 96_000, "nvidia.com/gpu": 8}, {"nvidia.com/gpu": 4, "cpu": 48_000})
    starved = Node("z-starved", {"cpu": 96_000, "nvidia.com/gpu": 8}, {"nvidia.com/gpu": 4, "cpu": 90_000})
    small = Workload("TFJob", "kubeflow.org/v1", "s", None, (PodSet("Worker", 1, {"cpu": 4_000, "nvidia.com/gpu": 4}),))
    large = Workload("TFJob", "kubeflow.org/v1", "l", None, (PodSet("Worker", 1, {"cpu": 8_000, "nvidia.com/gpu": 4}),))
    pool = NodePool((roomy, starved))
    placed = [pool.place(gang_of(w), node_totals(gang_of(w))) for w in (small, large)]
    assert all(isinstance(p, list) for p in placed)
    assert [pool.names[p[0][1]] for p in placed] == ["z-starved", "a-roomy"]
