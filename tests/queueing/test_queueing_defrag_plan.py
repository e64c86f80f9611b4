"""Defragmentation in the plan (issue 48, phase 4b: Preemptor.defragment): a gang that waits
for nodes while enough GPUs are free, scattered, gets movers as its victims (cause MOVE) and
holds the room; once they have left it starts and each mover is placed again in the same
cycle.  Then the rules as properties of random worlds through plan(): every move set is one
with which the gang fits and every mover fits again (defrag.try_moves), of jobs that
checkpoint, within the limit, no job moved for two gangs."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from queueing import Node, Snapshot
from queueing.defrag import DefragRules, checkpoints, try_moves
from queueing.fit import NodePool
from queueing.planner import plan
from queueing.preemption import MOVE
from queueing.reasons import Reason

from .test_queueing_defrag import GPU, NOW, SETTINGS, nodes_for, running, waiting_job

RULES = DefragRules(limit_gpu_s=4 * 3600.0, window_s=3600.0)


def halves():
    """Two 8-GPU nodes, each half used by a 4-GPU job that checkpoints; an 8-GPU pod waits."""
    a = running(10, ["n0"], 4, checkpointed_at=NOW - 100)
    b = running(11, ["n1"], 4, checkpointed_at=NOW - 50)
    return nodes_for({"n0": 8, "n1": 8}, [a, b]), waiting_job(1, 8), a, b


def test_off_the_gang_waits_on_the_move_plan_it_holds_the_room_and_both_start_after():
    nodes, waiting, a, b = halves()
    off = plan(Snapshot(NOW, (waiting,), running=(a, b), nodes=nodes), "fifo")
    assert off.preemptions == () and off.pending[1].reason is Reason.NO_NODE_FITS

    on = plan(Snapshot(NOW, (waiting,), running=(a, b), nodes=nodes, defrag=RULES), "fifo")
    (move,) = on.preemptions
    # b saved its work 50 s ago (200 GPU-s to redo), a 100 s ago: b moves.
    assert (move.victim, move.preemptor, move.cause, move.lost_gpu_s) == (11, 1, MOVE, 200.0)
    assert move.checkpointed_at == NOW - 50
    assert on.pending[1].reason is Reason.PREEMPTING

    # While b is told (leaving for 1), nothing more moves and 1 keeps waiting for it.
    leaving = dataclasses.replace(b, preempted_for=1)
    told = plan(Snapshot(NOW + 10, (waiting,), running=(a, leaving), nodes=nodes, defrag=RULES), "fifo")
    assert told.preemptions == () and told.pending[1].reason is Reason.PREEMPTING

    # b has left (queued again, keeping its place ahead of 1): 1 starts on n1, b on n0 beside a.
    after = nodes_for({"n0": 8, "n1": 8}, [a])
    mover = dataclasses.replace(waiting_job(1, 4), id=11, namespace="team-b", submitted_at=NOW - 7200, preempted_by=1)
    back = plan(
        Snapshot(
            NOW + 20, (mover, dataclasses.replace(waiting, preempting=True)), running=(a,), nodes=after, defrag=RULES
        ),
        "fifo",
    )
    placed = {admission.job_id: {node for _, _, node in admission.placement} for admission in back.admissions}
    assert placed == {1: {"n1"}, 11: {"n0"}}


def test_a_job_that_does_not_checkpoint_is_never_moved_and_the_limit_holds():
    nodes, waiting, a, _ = halves()
    blind = running(11, ["n1"], 4)
    assert (
        plan(Snapshot(NOW, (waiting,), running=(a, blind), nodes=nodes, defrag=RULES), "fifo").preemptions[0].victim
        == 10
    )
    tight = DefragRules(limit_gpu_s=300.0, window_s=3600.0)  # a would redo 400 GPU-s
    result = plan(Snapshot(NOW, (waiting,), running=(a, blind), nodes=nodes, defrag=tight), "fifo")
    assert result.preemptions == () and result.pending[1].reason is Reason.NO_NODE_FITS


@st.composite
def worlds(draw):
    """Nodes of 8 GPUs (some of 4), running jobs of 1-2 pods of 1, 2 or 4 GPUs placed where
    they fit, most checkpointing (reported, declared or on notice), some moved lately; 1-3
    gangs waiting, most of one 8-GPU pod: worlds where GPUs are often scattered."""
    sizes = {f"n{i}": draw(st.sampled_from([8, 8, 8, 4])) for i in range(draw(st.integers(2, 5)))}
    free = dict(sizes)
    jobs = []
    for job_id in range(10, 10 + draw(st.integers(2, 10))):
        gpus = draw(st.sampled_from([1, 2, 4]))
        where = []
        for _ in range(draw(st.integers(1, 2))):
            fits = [name for name, left in free.items() if left >= gpus]
            if not fits:
                break
            node = draw(st.sampled_from(fits))
            free[node] -= gpus
            where.append(node)
        if not where:
            continue
        saves = draw(st.sampled_from(["none", "reported", "reported", "every", "notice"]))
        more = {
            "none": {},
            "reported": {"checkpointed_at": NOW - draw(st.integers(0, 3000))},
            "every": {"checkpoint_every_s": float(draw(st.sampled_from([300, 1800])))},
            "notice": {"checkpoint_on_notice_s": 30.0},
        }[saves]
        if draw(st.integers(0, 3)) == 0:
            more["moved_at"] = NOW - draw(st.integers(0, 7200))
        jobs.append(running(job_id, where, gpus, started=NOW - draw(st.integers(600, 20000)), **more))
    waiting = tuple(
        dataclasses.replace(waiting_job(1, draw(st.sampled_from([8, 8, 4]))), id=job_id)
        for job_id in range(1, 1 + draw(st.integers(1, 3)))
    )
    limit = float(draw(st.sampled_from([3600, 36000, 1e9, 0])))
    return sizes, jobs, waiting, DefragRules(limit_gpu_s=limit, window_s=3600.0)


@settings(SETTINGS, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(worlds())
def test_every_move_set_places_the_gang_and_every_mover_again_within_the_rules(world):
    sizes, jobs, waiting, rules = world
    result = plan(Snapshot(NOW, waiting, running=tuple(jobs), nodes=nodes_for(sizes, jobs), defrag=rules), "fifo")
    moves = [p for p in result.preemptions if p.cause == MOVE]
    assume(moves)
    by_id = {job.id: job for job in jobs}
    victims = [p.victim for p in moves]
    assert len(victims) == len(set(victims))  # no job moved for two gangs
    for preemptor in {p.preemptor for p in moves}:
        movers = [by_id[p.victim] for p in moves if p.preemptor == preemptor]
        assert all(checkpoints(m) and (m.moved_at is None or NOW - m.moved_at >= rules.window_s) for m in movers)
        assert sum(p.lost_gpu_s for p in moves if p.preemptor == preemptor) <= rules.limit_gpu_s
        assert result.pending[preemptor].reason is Reason.PREEMPTING
    # The first gang given moves saw the nodes as the cycle's admissions left them: with its
    # movers gone it fits, and then every mover fits again, whole.
    first = min(p.preemptor for p in moves)
    gang = next(job for job in waiting if job.id == first)
    movers = [by_id[p.victim] for p in moves if p.preemptor == first]
    assert try_moves(NodePool(_admitted(sizes, jobs, waiting, result)), gang, movers, NOW) is not None


def _admitted(sizes, jobs, waiting, result) -> list[Node]:
    """The nodes with the running jobs' pods and the plan's admissions charged."""
    per_pod = {job.id: dict(job.workload.pod_sets[0].requests)[GPU] for job in waiting}
    charged: dict[str, int] = {}
    for admission in result.admissions:
        for _, _, node in admission.placement:
            charged[node] = charged.get(node, 0) + per_pod[admission.job_id]
    return [
        dataclasses.replace(node, allocated={GPU: node.allocated.get(GPU, 0) + charged.get(node.name, 0)})
        for node in nodes_for(sizes, jobs)
    ]
