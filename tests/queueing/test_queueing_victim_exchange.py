"""Victims by the work they lose (issue 48): the cheapest-first prefix that frees room may end
on a costly job (the one that empties a node); choose_victims with ``cost`` searches again
without its costliest victim and takes the other set when it loses less, never one of higher
priority, and what it takes is still minimal."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from queueing.preemption import choose_victims
from tests.examples import examples

from .test_queueing_elastic import running

EXAMPLES = examples(int(os.environ.get("QUEUEING_EXAMPLES", 300)))


def whole_node(size: int = 8):
    """fits: some node has all its GPUs freed (pods of one GPU, ``size`` a node)."""

    def fits(chosen, jobs) -> bool:
        freed: dict[str, int] = {}
        for job in chosen:
            for _, _, node in job.placements:
                freed[node] = freed.get(node, 0) + 1
        return any(count >= size for count in freed.values())

    return fits


def test_the_costly_job_that_ends_the_prefix_is_exchanged_for_cheaper_ones():
    # n0: A (4 GPUs, cheap) and L (4, costly); n1: B and C (2 each, cheap), D (4, costlier than them).
    a, b, c = running(1, "x", ["n0"] * 4), running(2, "x", ["n1"] * 2), running(3, "x", ["n1"] * 2)
    d, big = running(4, "x", ["n1"] * 4), running(5, "x", ["n0"] * 4)
    cost = {1: 1.0, 2: 2.0, 3: 3.0, 4: 9.0, 5: 10.0}.__getitem__
    candidates = [a, b, c, d, big]  # cheapest first

    def fits(chosen):
        return whole_node()(chosen, candidates)

    plain = choose_victims(candidates, fits)
    assert sorted(job.id for job in plain) == [2, 3, 4]  # 14 lost
    exchanged = choose_victims(candidates, fits, cost=lambda job: cost(job.id))
    assert sorted(job.id for job in exchanged) == [1, 5]  # 11 lost


def test_no_exchange_takes_a_job_of_higher_priority():
    a, b, c = running(1, "x", ["n0"] * 4), running(2, "x", ["n1"] * 2), running(3, "x", ["n1"] * 2)
    d, big = running(4, "x", ["n1"] * 4), running(5, "x", ["n0"] * 4, priority=5)
    cost = {1: 1.0, 2: 2.0, 3: 3.0, 4: 9.0, 5: 10.0}.__getitem__
    candidates = [a, b, c, d, big]  # (the higher priority last, as victim_order puts it)

    def fits(chosen):
        return whole_node()(chosen, candidates)

    exchanged = choose_victims(candidates, fits, cost=lambda job: cost(job.id))
    assert sorted(job.id for job in exchanged) == [2, 3, 4]


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(0, 100), st.integers(0, 1)), min_size=1, max_size=9
    )
)
def test_an_exchange_never_loses_more_and_stays_minimal(specs):
    jobs = [
        running(i, "x", [f"n{node}"] * gpus, priority=priority) for i, (node, gpus, _, priority) in enumerate(specs)
    ]
    costs = {i: float(lost) for i, (_, _, lost, _) in enumerate(specs)}
    jobs.sort(key=lambda job: (job.priority, costs[job.id], job.id))

    def fits(chosen):
        return whole_node(4)(chosen, jobs)

    plain = choose_victims(jobs, fits)
    exchanged = choose_victims(jobs, fits, cost=lambda job: costs[job.id])
    assert (plain is None) == (exchanged is None)
    if plain is None:
        return
    assert fits(exchanged)
    assert sum(costs[j.id] for j in exchanged) <= sum(costs[j.id] for j in plain)
    assert max(j.priority for j in exchanged) <= max(j.priority for j in plain)
    for job in exchanged:  # minimal: none can be put back
        rest = [other for other in exchanged if other is not job]
        assert not (rest and fits(rest))


def test_a_victim_whose_pods_have_ended_gives_back_no_quota_twice():
    """Seen on make run: a victim whose pods had ended (its end not yet recorded) was credited
    its quota again, which the namespace's used no longer held; the victims that had left
    took that room back in the cycle and were preempted a second time."""
    from dataclasses import replace

    from queueing import NamespaceQuota, Node, PendingJob, PodSet, RunningJob, Snapshot, Workload, plan

    from .test_queueing_elastic import GPU, NOW, workload

    names = [f"n{i}" for i in range(8)]
    leaving = replace(running(17, "team-b", ["n2"], priority=1000), preempted_for=22)
    ended = RunningJob(  # its 3 pods of 8 GPUs have ended: neither the nodes nor the quota hold them
        21,
        "team-b",
        workload(3, 8),
        NOW - 100,
        priority=1000,
        placements=(("Worker", 0, "n1"), ("Worker", 1, "n5"), ("Worker", 2, "n6")),
        preempted_for=22,
    )
    nodes = tuple(Node(n, {"nvidia.com/gpu": 8, "pods": 110}, {"nvidia.com/gpu": 1 if n == "n2" else 0}) for n in names)
    quotas = {"team-b": NamespaceQuota("team-b", {GPU: 32}, {GPU: 1})}
    big = Workload(
        "PyTorchJob",
        "kubeflow.org/v1",
        "big",
        None,
        (PodSet("Worker", 4, {"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 8}),),
    )
    preemptor = PendingJob(22, "team-b", 10000, NOW - 50, big, preempting=True)
    left = [PendingJob(i, "team-b", 1000, NOW - 500, workload(1), preempted_by=22) for i in (18, 19, 20)]
    result = plan(Snapshot(NOW, (preemptor, *left), running=(leaving, ended), nodes=nodes, quotas=quotas), "priority")
    assert result.pending[22].reason.value == "Preempting"
    assert result.admitted == ()  # the victims that left wait behind the room their preemptor holds
