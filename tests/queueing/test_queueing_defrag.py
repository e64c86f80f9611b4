"""Defragmentation (queueing/defrag.py, issue 48): scenarios, then its rules as properties of
random GPU worlds: GPUs only, each job one role of identical pods, so the checks are arithmetic
written out here, not the planner's: ``n`` pods of ``g`` GPUs fit exactly when the nodes they may
use have room for ``n`` counted node by node (``free // g`` each); a job that stops loses its
GPUs times the time since its last checkpoint."""

from __future__ import annotations

import math
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import Node, PendingJob, PodSet, RunningJob, Workload
from queueing.cards import CardPod, SharedCards
from queueing.defrag import DefragRules, Move, own_pool, plan_moves, scattered, try_moves
from queueing.fit import NodePool
from queueing.topology import REQUIRED_ANNOTATION
from tests.examples import examples

NOW = 1_000_000.0
GPU = "nvidia.com/gpu"
RACK = "topology.jobdash.io/rack"
POOL = "jobdash.io/pool"  # the label some nodes have and some jobs select
EXAMPLES = examples(int(os.environ.get("QUEUEING_EXAMPLES", 300)))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ANY = DefragRules(limit_gpu_s=1e12, window_s=600.0)


def workload(pods: int, gpus: int, selector: str | None = None, annotations: dict | None = None) -> Workload:
    node_selector = {POOL: selector} if selector else {}
    pod_set = PodSet("Worker", pods, {GPU: gpus}, {GPU: gpus}, node_selector=node_selector)
    return Workload("TFJob", "kubeflow.org/v1", "j", None, (pod_set,), annotations=annotations or {})


def waiting_job(pods: int, gpus: int, selector: str | None = None) -> PendingJob:
    return PendingJob(1, "team-a", 0, NOW - 60, workload(pods, gpus, selector))


def running(job_id: int, nodes: list[str], gpus: int, selector: str | None = None, annotations=None, **more):
    """A job of one pod per entry of ``nodes`` (its node), ``gpus`` GPUs each."""
    placements = tuple(("Worker", index, node) for index, node in enumerate(nodes))
    return RunningJob(
        job_id,
        "team-b",
        workload(len(nodes), gpus, selector, annotations),
        more.pop("started", NOW - 3600),
        placements=placements,
        **more,
    )


def nodes_for(sizes: dict[str, int], jobs, labels: dict[str, dict[str, str]] | None = None) -> list[Node]:
    """Nodes of these GPU counts, charged with the jobs' pods."""
    used = dict.fromkeys(sizes, 0)
    for job in jobs:
        per_pod = dict(job.workload.pod_sets[0].requests)[GPU]
        for _, _, node in job.placements:
            used[node] += per_pod
    return [
        Node(name, {GPU: size, "pods": 110}, {GPU: used[name]}, labels=(labels or {}).get(name, {}))
        for name, size in sizes.items()
    ]


def free_of(pool: NodePool) -> list[dict[str, int]]:
    return [dict(free) for free in pool.free]


# -- scenarios ---------------------------------------------------------------------------------


def _halves(**b_more):
    """Two 8-GPU nodes, each half used by a 4-GPU job that checkpoints; an 8-GPU pod waits."""
    a = running(10, ["n0"], 4, checkpointed_at=NOW - 100)
    b = running(11, ["n1"], 4, **({"checkpointed_at": NOW - 50} | b_more))
    return NodePool(nodes_for({"n0": 8, "n1": 8}, [a, b])), waiting_job(1, 8), a, b


def test_the_job_that_checkpointed_last_moves_next_to_the_other():
    pool, waiting, a, b = _halves()
    before = free_of(pool), dict(pool.totals), dict(pool.stats)
    assert scattered(pool, waiting.gang)
    moves = plan_moves(pool, waiting, [a, b], NOW, ANY)
    # b saved its work 50 s ago (200 GPU-s to redo), a 100 s ago (400): b goes to a's node.
    assert moves == [Move(11, "team-b", 1, (("Worker", 0, "n0"),), 50.0, 200.0)]
    assert (free_of(pool), dict(pool.totals), dict(pool.stats)) == before  # the cycle's pool is not touched


def test_what_the_cycle_has_placed_already_is_counted():
    # As in the halves, with an empty n2 that a gang placed earlier in the cycle has just taken.
    a = running(10, ["n0"], 4, checkpointed_at=NOW - 100)
    b = running(11, ["n1"], 4, checkpointed_at=NOW - 50)
    pool = NodePool(nodes_for({"n0": 8, "n1": 8, "n2": 8}, [a, b]))
    waiting = waiting_job(1, 8)
    assert plan_moves(pool, waiting, [a, b], NOW, ANY) is None  # n2 holds it
    earlier = waiting_job(1, 8).gang
    assert pool.place(earlier, {GPU: 8, "pods": 1}) == [(0, 2)]
    moves = plan_moves(pool, waiting, [a, b], NOW, ANY)
    assert moves == [Move(11, "team-b", 1, (("Worker", 0, "n0"),), 50.0, 200.0)]


def test_a_job_that_does_not_checkpoint_never_moves():
    a = running(10, ["n0"], 4)  # declares no checkpoints and reported none
    b = running(11, ["n1"], 4, checkpoint_every_s=600.0, started=NOW - 1000)
    pool = NodePool(nodes_for({"n0": 8, "n1": 8}, [a, b]))
    moves = plan_moves(pool, waiting_job(1, 8), [a, b], NOW, ANY)
    assert moves is not None and [m.job for m in moves] == [11]
    # b's last declared checkpoint was at 600 s of its 1000: 400 s lost on 4 GPUs.
    assert (moves[0].lost_s, moves[0].lost_gpu_s) == (400.0, 1600.0)
    alone = [a, running(11, ["n1"], 4)]
    assert plan_moves(NodePool(nodes_for({"n0": 8, "n1": 8}, alone)), waiting_job(1, 8), alone, NOW, ANY) is None


def test_a_job_that_checkpoints_on_notice_loses_nothing_and_moves_first():
    b = running(11, ["n1"], 4, checkpointed_at=NOW - 50)
    c = running(12, ["n0"], 4, checkpoint_on_notice_s=30.0)  # writes one when told: loses nothing
    pool = NodePool(nodes_for({"n0": 8, "n1": 8}, [c, b]))
    moves = plan_moves(pool, waiting_job(1, 8), [b, c], NOW, ANY)
    assert moves == [Move(12, "team-b", 1, (("Worker", 0, "n1"),), 0.0, 0.0)]


def test_jobs_leaving_protected_or_not_taken_back_do_not_move():
    for more in (
        {"preemptible": False},
        {"preempted_for": 7},
        {"shrinking_for": 7},
        {"min_runtime_s": 7200.0},  # started an hour ago
    ):
        a = running(10, ["n0"], 4, checkpointed_at=NOW - 100, **more)
        b = running(11, ["n1"], 4, checkpointed_at=NOW - 50, **more)
        pool = NodePool(nodes_for({"n0": 8, "n1": 8}, [a, b]))
        assert plan_moves(pool, waiting_job(1, 8), [a, b], NOW, ANY) is None, more


def test_the_limit_on_lost_gpu_seconds_is_kept():
    pool, waiting, a, b = _halves()
    assert plan_moves(pool, waiting, [a, b], NOW, DefragRules(199.0, 600.0)) is None
    moves = plan_moves(pool, waiting, [a, b], NOW, DefragRules(200.0, 600.0))
    assert moves is not None and [m.job for m in moves] == [11]


def test_a_job_moved_within_the_window_stays_put():
    pool, waiting, a, b = _halves(moved_at=NOW - 100)
    moves = plan_moves(pool, waiting, [a, b], NOW, ANY)  # b moved 100 s ago: a goes instead
    assert moves == [Move(10, "team-b", 1, (("Worker", 0, "n1"),), 100.0, 400.0)]
    pool, waiting, a, b = _halves(moved_at=NOW - 600)
    moves = plan_moves(pool, waiting, [a, b], NOW, ANY)
    assert moves is not None and [m.job for m in moves] == [11]


def test_a_mover_with_no_place_to_go_is_not_moved():
    # n0: a (4 of 8, checkpoints); n1: 6 of 8 used by a job that does not; n2: 2 of 2 free.
    # Freed, n0 holds the waiting 8, but a's 4 GPUs would then be 2 + 2 on two nodes.
    a = running(10, ["n0"], 4, checkpointed_at=NOW - 10)
    fixed = running(11, ["n1"], 6)
    pool = NodePool(nodes_for({"n0": 8, "n1": 8, "n2": 2}, [a, fixed]))
    waiting = waiting_job(1, 8)
    assert scattered(pool, waiting.gang)  # 4 + 2 + 2 free: enough, scattered
    assert try_moves(pool, waiting, [a], NOW) is None
    assert plan_moves(pool, waiting, [a, fixed], NOW, ANY) is None


def test_a_mover_is_not_split_out_of_its_required_domain():
    # Racks r1 = n0, n1 and r2 = n2, n3.  a (2 pods of 4, one rack required) runs on n0 and n1;
    # fillers that do not checkpoint hold n0's other 4, n2's 4 and all of n3.  Moving a frees
    # n1 for the waiting 8; a's pods then have room on n0 and n2 only: two racks.
    annotations = {REQUIRED_ANNOTATION: RACK}
    labels = {name: {RACK: rack} for name, rack in (("n0", "r1"), ("n1", "r1"), ("n2", "r2"), ("n3", "r2"))}
    sizes = {"n0": 8, "n1": 8, "n2": 8, "n3": 8}
    fillers = [running(20, ["n0"], 4), running(21, ["n2"], 4), running(22, ["n3"], 8)]
    waiting = waiting_job(1, 8)
    racked = running(10, ["n0", "n1"], 4, annotations=annotations, checkpointed_at=NOW - 10)
    pool = NodePool(nodes_for(sizes, [racked, *fillers], labels))
    assert plan_moves(pool, waiting, [racked, *fillers], NOW, ANY, levels=(RACK,)) is None
    # The same job without the requirement moves, whole: both its pods get a node.
    free = running(10, ["n0", "n1"], 4, checkpointed_at=NOW - 10)
    pool = NodePool(nodes_for(sizes, [free, *fillers], labels))
    moves = plan_moves(pool, waiting, [free, *fillers], NOW, ANY, levels=(RACK,))
    assert moves is not None and [m.job for m in moves] == [10]
    assert sorted(node for _, _, node in moves[0].to) == ["n0", "n2"]
    assert moves[0].to == (("Worker", 0, "n0"), ("Worker", 1, "n2"))  # its pod on n0 keeps its index


def test_a_mover_keeps_to_the_nodes_it_selects():
    # n0 and n1 are pool=x nodes; a (6 GPUs, no checkpoints) on n0, b (4) on n1; n2 has 4 free.
    # Freed, n1 holds the waiting 8; b then has room only on n2, which it may not use.
    labels = {"n0": {POOL: "x"}, "n1": {POOL: "x"}}
    a = running(10, ["n0"], 6)
    selecting = running(11, ["n1"], 4, selector="x", checkpointed_at=NOW - 10)
    pool = NodePool(nodes_for({"n0": 8, "n1": 8, "n2": 4}, [a, selecting], labels))
    assert plan_moves(pool, waiting_job(1, 8), [a, selecting], NOW, ANY) is None
    anywhere = running(11, ["n1"], 4, checkpointed_at=NOW - 10)  # the same job selecting nothing
    pool = NodePool(nodes_for({"n0": 8, "n1": 8, "n2": 4}, [a, anywhere], labels))
    moves = plan_moves(pool, waiting_job(1, 8), [a, anywhere], NOW, ANY)
    assert moves is not None and [(m.job, m.to) for m in moves] == [(11, (("Worker", 0, "n2"),))]


def test_nothing_moves_when_the_gang_fits_or_the_cluster_lacks_gpus():
    pool, _, a, b = _halves()
    for pods in (1, 3):  # one pod of 4 fits on either node; three need 12, and 8 are free
        assert plan_moves(pool, waiting_job(pods, 4), [a, b], NOW, ANY) is None
        assert not scattered(pool, waiting_job(pods, 4).gang)


def test_the_fewest_movers_are_kept_and_the_cap_holds():
    # Four 8-GPU nodes; n0..n3 each run a 2-GPU job, all checkpointing; n0..n2 also run a
    # non-checkpointing 4.  The waiting 8 needs one node emptied: n3's 2 gone to n0..n2.
    movers = [running(10 + i, [f"n{i}"], 2, checkpointed_at=NOW - 10 * (4 - i)) for i in range(4)]
    fixed = [running(20 + i, [f"n{i}"], 4) for i in range(3)]
    pool = NodePool(nodes_for({f"n{i}": 8 for i in range(4)}, [*movers, *fixed]))
    waiting = waiting_job(1, 8)
    moves = plan_moves(pool, waiting, [*movers, *fixed], NOW, ANY)
    assert moves is not None and [m.job for m in moves] == [13]
    assert moves[0].to[0][2] in {"n0", "n1", "n2"}
    # Capped at no movers' candidates looked at: nothing.
    assert plan_moves(pool, waiting, [*movers, *fixed], NOW, DefragRules(1e12, 600.0, max_candidates=0)) is None


def test_a_cheaper_mover_the_gang_can_do_without_is_put_back():
    # n0: a (2 GPUs, the least to lose) and d (4, too much to lose for the limit), 2 free;
    # n1: b (4) alone; n2: a fixed 4.  Moving a alone leaves 4 on n0: not enough; a and b
    # together work; then a is put back, as b alone is enough (b to n2, the waiting 8 to n1).
    a = running(10, ["n0"], 2, checkpointed_at=NOW - 10)
    d = running(12, ["n0"], 4, checkpointed_at=NOW - 1000)
    b = running(11, ["n1"], 4, checkpointed_at=NOW - 100)
    fixed = running(20, ["n2"], 4)
    jobs = [a, b, d, fixed]
    pool = NodePool(nodes_for({"n0": 8, "n1": 8, "n2": 8}, jobs))
    waiting = waiting_job(1, 8)
    assert try_moves(pool, waiting, [a], NOW) is None and try_moves(pool, waiting, [a, b], NOW) is not None
    rules = DefragRules(1000.0, 600.0)
    assert plan_moves(pool, waiting, jobs, NOW, rules) == [Move(11, "team-b", 1, (("Worker", 0, "n2"),), 100.0, 400.0)]
    assert plan_moves(pool, waiting, jobs, NOW, DefragRules(1000.0, 600.0, max_candidates=1)) is None


def test_a_job_that_cannot_open_a_node_for_the_gang_is_no_candidate():
    # a (the least to lose) shares n0 with a fixed 4: gone, it leaves 4 free there, no room for
    # the waiting 8.  So the one candidate looked at (max_candidates=1) is b, which opens n1.
    a = running(10, ["n0"], 2, checkpointed_at=NOW - 10)
    b = running(11, ["n1"], 4, checkpointed_at=NOW - 100)
    fixed = [running(20, ["n0"], 4), running(21, ["n2"], 4)]
    jobs = [a, b, *fixed]
    pool = NodePool(nodes_for({"n0": 8, "n1": 8, "n2": 8}, jobs))
    moves = plan_moves(pool, waiting_job(1, 8), jobs, NOW, DefragRules(1e12, 600.0, max_candidates=1))
    assert moves == [Move(11, "team-b", 1, (("Worker", 0, "n2"),), 100.0, 400.0)]


def test_the_pool_of_its_own_is_the_pool_as_the_cycle_left_it():
    memory = "aliyun.com/gpu-mem"
    shared = Node(
        "s0",
        {memory: 32_000, "aliyun.com/gpu-count": 2, "pods": 110},
        {memory: 4_000},
        cards=SharedCards.even(2, 16_000, [CardPod(4_000, 0)]),
    )
    plain = nodes_for({"n0": 8, "n1": 8}, [running(10, ["n0"], 4)])
    pool = NodePool([shared, *plain])
    share = PendingJob(2, "a", 0, NOW, Workload("TFJob", "v1", "s", None, (PodSet("W", 1, {memory: 10_000}),)))
    assert pool.place(share.gang, share.totals) == [(0, 0)]  # on card 0 (12,000 left: the tightest)
    assert pool.place(waiting_job(1, 4).gang, {GPU: 4, "pods": 1}) == [(0, 1)]  # n0 is full now
    own = own_pool(pool)
    assert own is not pool and own.nodes[2] is pool.nodes[2]  # an unchanged node is the same Node
    assert free_of(own) == free_of(pool) and own.totals == pool.totals
    assert own.cards.free == pool.cards.free == {0: [2_000, 16_000]}


# -- properties --------------------------------------------------------------------------------


def _standing(draw) -> dict:
    """How a random job checkpoints and stands: every case of rule 1."""
    return {
        "started": NOW - draw(st.integers(1, 5000)),
        "checkpoint_every_s": draw(st.sampled_from([None, 300.0, 1000.0])),
        "checkpoint_on_notice_s": draw(st.sampled_from([None, None, None, 30.0])),
        "checkpointed_at": draw(st.sampled_from([None, NOW - 10, NOW - 200, NOW - 3000])),
        "min_runtime_s": draw(st.sampled_from([0.0] * 5 + [1000.0])),
        "moved_at": draw(st.sampled_from([None, None, None, NOW - 100, NOW - 1000])),
        "preemptible": draw(st.sampled_from([True] * 5 + [False])),
        "preempted_for": draw(st.sampled_from([None] * 8 + [99])),
    }


@st.composite
def worlds(draw, fragmented: bool = False):
    """Nodes of 4 or 8 GPUs (some labelled pool=x), running jobs of 1-2 pods of 1, 2 or 4 GPUs
    placed where there is room (some selecting pool=x), with every kind of checkpointing and of
    standing, one waiting gang (mostly one that has GPUs enough in all but not on one node) and
    random rules.  ``fragmented``: 8-GPU nodes, each partly used by one-pod jobs (so moves are
    often possible)."""
    count = draw(st.integers(2, 5))
    sizes = {f"n{i}": 8 if fragmented else draw(st.sampled_from([4, 8, 8])) for i in range(count)}
    labels = {name: {POOL: "x"} for name in sizes if draw(st.booleans())}
    free = dict(sizes)
    jobs = []
    for job_id in range(10, 10 + draw(st.integers(0, 12))):
        gpus, pods = draw(st.sampled_from([1, 2, 4])), 1 if fragmented else draw(st.integers(1, 2))
        selector = draw(st.sampled_from([None, None, "x"]))
        placements = []
        for _ in range(pods):
            room = [n for n, f in free.items() if f >= gpus and (selector is None or n in labels)]
            if fragmented:  # (no node filled up)
                room = [n for n in room if free[n] - gpus >= 2]
            if not room:
                break
            node = draw(st.sampled_from(room))
            free[node] -= gpus
            placements.append(node)
        if len(placements) < pods:
            for node in placements:
                free[node] += gpus
            continue
        jobs.append(running(job_id, placements, gpus, selector, **_standing(draw)))
    # Mostly a gang the world may defragment for: enough GPUs free in all, not on one node.
    aimed = [g for g in (2, 4, 8) if max(free.values()) < g <= min(sum(free.values()), max(sizes.values()))]
    gpus = draw(st.sampled_from(aimed)) if aimed and draw(st.integers(0, 3)) else draw(st.sampled_from([2, 4, 8]))
    pods = draw(st.integers(1, 2)) if 2 * gpus <= sum(free.values()) else 1
    waiting = waiting_job(pods, gpus, draw(st.sampled_from([None, None, "x"])))
    rules = DefragRules(
        limit_gpu_s=draw(st.sampled_from([0.0, 500.0, 5000.0, 1e12, 1e12])),
        window_s=600.0,
        max_movers=draw(st.sampled_from([1, 2, 4, 32])),
        max_candidates=draw(st.sampled_from([1, 2, 32])),
    )
    return sizes, labels, jobs, waiting, rules


ANY_WORLD = st.one_of(worlds(), worlds(fragmented=True))


def _per_pod(job) -> int:
    return dict(job.workload.pod_sets[0].requests)[GPU]


def _selects(job, node: str, labels) -> bool:
    wanted = job.workload.pod_sets[0].node_selector.get(POOL)
    return wanted is None or labels.get(node, {}).get(POOL) == wanted


def _free(sizes, jobs) -> dict[str, int]:
    free = dict(sizes)
    for job in jobs:
        for _, _, node in job.placements:
            free[node] -= _per_pod(job)
    return free


def _room(job, free: dict[str, int], labels) -> int:
    """How many of the job's pods the nodes it may use have room for, node by node."""
    per_pod = _per_pod(job)
    return sum(amount // per_pod for node, amount in free.items() if _selects(job, node, labels))


def _lost(job) -> tuple[float, float]:
    """(seconds, GPU-seconds) stopping it now loses: the run since its last checkpoint."""
    gpus = _per_pod(job) * len(job.placements)
    if job.checkpoint_on_notice_s is not None:
        return 0.0, 0.0
    saved = [job.started_at]
    if job.checkpointed_at is not None and job.checkpointed_at >= job.started_at:
        saved.append(min(job.checkpointed_at, NOW))
    if job.checkpoint_every_s:
        saved.append(
            job.started_at + math.floor((NOW - job.started_at) / job.checkpoint_every_s) * job.checkpoint_every_s
        )
    lost = NOW - max(saved)
    return lost, lost * gpus


def _movable(job, window_s: float) -> bool:
    saves = (job.checkpoint_every_s, job.checkpoint_on_notice_s, job.checkpointed_at) != (None, None, None)
    standing = job.preemptible and job.preempted_for is None and job.shrinking_for is None
    recent = job.moved_at is not None and NOW - job.moved_at < window_s
    return saves and standing and NOW - job.started_at >= job.min_runtime_s and not recent


def _sequence(jobs, waiting: PendingJob, free: dict[str, int], labels, rules: DefragRules) -> list:
    """The candidates plan_moves looks at, found here: movable, with a pod on a node the waiting
    gang may use where one of its pods would fit once every movable job there had left; the
    fewest GPU-seconds lost first (then GPUs, seconds, id); of the first max_candidates those
    within the limit together."""
    movable = [job for job in jobs if _movable(job, rules.window_s)]
    leaving = dict.fromkeys(free, 0)
    for job in movable:
        for _, _, node in job.placements:
            leaving[node] += _per_pod(job)
    opened = {
        node for node in free if _selects(waiting, node, labels) and free[node] + leaving[node] >= _per_pod(waiting)
    }
    found = [job for job in movable if any(node in opened for _, _, node in job.placements)]
    found.sort(key=lambda job: (_lost(job)[1], _per_pod(job) * len(job.placements), _lost(job)[0], job.id))
    taken, spent = [], 0.0
    for job in found[: rules.max_candidates]:
        if spent + _lost(job)[1] > rules.limit_gpu_s:
            break
        taken.append(job)
        spent += _lost(job)[1]
    return taken


@SETTINGS
@given(ANY_WORLD)
def test_moves_keep_every_rule(world):
    sizes, labels, jobs, waiting, rules = world
    pool = NodePool(nodes_for(sizes, jobs, labels))
    before = (free_of(pool), dict(pool.totals))
    moves = plan_moves(pool, waiting, jobs, NOW, rules)
    assert (free_of(pool), dict(pool.totals)) == before  # the pool given is not touched
    free = _free(sizes, jobs)
    need = _per_pod(waiting) * waiting.workload.pods
    fits_now = _room(waiting, free, labels) >= waiting.workload.pods
    # scattered: enough GPUs free in all, not on nodes that hold the gang's pods.
    assert scattered(pool, waiting.gang) == (sum(free.values()) >= need and not fits_now)
    if moves is None:
        return
    # Rule 5: only for a gang that does not fit now, with enough GPUs free in all.
    assert not fits_now and sum(free.values()) >= need and scattered(pool, waiting.gang)
    by_id = {job.id: job for job in jobs}
    movers = [by_id[move.job] for move in moves]
    assert len(set(move.job for move in moves)) == len(moves) and all(m.for_job == waiting.id for m in moves)
    # Rule 1: only jobs that checkpoint, may go, are past their minimum and not moved lately.
    assert all(_movable(job, rules.window_s) for job in movers)
    # Rule 2: at once, every mover whole on nodes it may use, and then the waiting gang fits.
    after = dict(free)
    for move, job in zip(moves, movers, strict=True):
        assert sorted(move.to) != sorted(job.placements)  # it does move
        assert sorted(index for _, index, _ in move.to) == list(range(len(job.placements)))
        assert {role for role, _, _ in move.to} == {"Worker"}
        for _, _, node in job.placements:
            after[node] += _per_pod(job)
    for move, job in zip(moves, movers, strict=True):
        for _, _, node in move.to:
            assert _selects(job, node, labels)
            after[node] -= _per_pod(job)
    assert all(amount >= 0 for amount in after.values())
    assert _room(waiting, after, labels) >= waiting.workload.pods
    # Rule 3: what they lose, as written here, within the limit together.
    for move, job in zip(moves, movers, strict=True):
        lost_s, lost_gpu_s = _lost(job)
        assert math.isclose(move.lost_s, lost_s, abs_tol=1e-6) and math.isclose(
            move.lost_gpu_s, lost_gpu_s, abs_tol=1e-6
        )
    assert sum(move.lost_gpu_s for move in moves) <= rules.limit_gpu_s
    # Rule 4: few, from the candidates in order, none that could be put back, and no shorter
    # run of the candidates that would have worked.
    assert len(moves) <= rules.max_movers
    sequence = _sequence(jobs, waiting, free, labels, rules)
    positions = [sequence.index(job) for job in movers]  # (raises if a mover is no candidate)
    assert positions == sorted(positions)
    for shorter in range(1, max(positions) + 1):
        assert try_moves(pool, waiting, sequence[:shorter], NOW) is None
    for left_out in movers:
        assert try_moves(pool, waiting, [job for job in movers if job is not left_out], NOW) is None


@SETTINGS
@given(ANY_WORLD)
def test_moves_are_found_whenever_a_run_of_the_candidates_works(world):
    """With room for as many movers as candidates, a run of candidates that works means a plan."""
    sizes, labels, jobs, waiting, rules = world
    rules = DefragRules(rules.limit_gpu_s, rules.window_s, max_movers=32, max_candidates=rules.max_candidates)
    pool = NodePool(nodes_for(sizes, jobs, labels))
    if try_moves(pool, waiting, [], NOW) is not None:  # it fits: nothing to do
        assert plan_moves(pool, waiting, jobs, NOW, rules) is None
        return
    sequence = _sequence(jobs, waiting, _free(sizes, jobs), labels, rules)
    works = [n for n in range(1, len(sequence) + 1) if try_moves(pool, waiting, sequence[:n], NOW) is not None]
    moves = plan_moves(pool, waiting, jobs, NOW, rules)
    if works:
        assert moves is not None
        assert max(sequence.index(next(j for j in jobs if j.id == m.job)) for m in moves) < works[0]
    else:
        assert moves is None


@SETTINGS
@given(ANY_WORLD)
def test_the_check_of_one_mover_is_the_arithmetic(world):
    """One pod waiting, one one-pod job moving, neither selecting nodes: the move works exactly
    when, the job's GPUs given back to its node, some node holds the waiting pod and then some
    node (that one with what it has left) holds the job's pod."""
    sizes, labels, jobs, waiting, _ = world
    if waiting.workload.pods != 1 or waiting.workload.pod_sets[0].node_selector:
        return
    pool = NodePool(nodes_for(sizes, jobs, labels))
    free, need = _free(sizes, jobs), _per_pod(waiting)
    for job in jobs:
        if len(job.placements) != 1 or job.workload.pod_sets[0].node_selector:
            continue
        after = dict(free)
        after[job.placements[0][2]] += _per_pod(job)
        works = any(
            after[x] >= need and any(after[y] - (need if y == x else 0) >= _per_pod(job) for y in after) for x in after
        )
        assert (try_moves(pool, waiting, [job], NOW) is not None) == works
