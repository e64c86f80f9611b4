"""Elastic jobs in the planner (issue 35, part 3): partial admission, growth, shrink before
kill.  Scenarios, then properties over random snapshots.

The world has GPUs only, one per pod (plus a Master without any in some scenarios): a gang
fits the nodes exactly when enough GPUs are free, so "would fit" is plain addition.
(Elastic *quota*, borrowing between namespaces, is test_queueing_elastic.py.)
"""

import os
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import NamespaceQuota, Node, PendingJob, PodSet, Reason, RunningJob, Snapshot, Workload, plan
from queueing.elastic_jobs import at_counts
from queueing.policies import get_policy
from queueing.preemption import PRIORITY, RECLAIM
from tests.examples import examples

GPU = "nvidia.com/gpu"
QUOTA_GPU = "requests.nvidia.com/gpu"
NOW = 1_000_000.0
SETTINGS = settings(
    max_examples=examples(int(os.environ.get("QUEUEING_EXAMPLES", 200))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PREEMPTING = get_policy("priority", preempt_lower_priority=True)


def elastic(count, minimum, maximum, master=False):
    """Workers of one GPU each, ``count`` asked, ``minimum`` to ``maximum``; a Master (no GPU) if asked."""
    worker = PodSet("Worker", count, {GPU: 1}, {GPU: 1}, minimum=minimum, maximum=maximum)
    pod_sets = (PodSet("Master", 1, {"cpu": 1000}, {"cpu": 1000}), worker) if master else (worker,)
    return Workload("PyTorchJob", "kubeflow.org/v1", "e", None, pod_sets)


def whole(pods):
    return Workload("PyTorchJob", "kubeflow.org/v1", "w", None, (PodSet("Worker", pods, {GPU: 1}, {GPU: 1}),))


def pending(job_id, namespace, workload, *, priority=0, submitted=NOW - 100):
    return PendingJob(job_id, namespace, priority, submitted, workload)


def running(job_id, namespace, workload, nodes, *, priority=0, started=NOW - 50, **more):
    """``nodes``: the node of each Worker, index by index (the counts it runs now)."""
    placements = tuple(("Worker", index, node) for index, node in enumerate(nodes))
    return RunningJob(
        job_id,
        namespace,
        workload,
        started,
        priority=priority,
        placements=placements,
        counts={"Worker": len(nodes)},
        **more,
    )


def nodes_for(count, gpus, jobs=()):
    used = {}
    for job in jobs:
        for _, _, node in job.placements:
            used[node] = used.get(node, 0) + 1
    return tuple(
        Node(f"n{i}", {GPU: gpus, "cpu": 64_000, "pods": 110}, {GPU: used.get(f"n{i}", 0)}) for i in range(count)
    )


def gpu_quota(namespace, hard, used=0):
    return NamespaceQuota(namespace, {QUOTA_GPU: hard}, {QUOTA_GPU: used})


def workers(placement):
    return sorted(index for role, index, _ in placement if role == "Worker")


# -- partial admission ------------------------------------------------------------------------


def test_a_job_that_fits_whole_is_admitted_whole_with_no_counts():
    result = plan(Snapshot(NOW, (pending(1, "a", elastic(4, 2, 6)),), nodes=nodes_for(1, 8)), "fifo")
    (admission,) = result.admissions
    assert admission.counts == {} and workers(admission.placement) == [0, 1, 2, 3]


def test_short_of_nodes_it_is_admitted_at_the_most_workers_that_fit_and_placed_exactly():
    snapshot = Snapshot(NOW, (pending(1, "a", elastic(6, 2, 6, master=True)),), nodes=nodes_for(2, 2))
    (admission,) = plan(snapshot, "fifo").admissions
    assert admission.counts == {"Master": 1, "Worker": 4}
    assert workers(admission.placement) == [0, 1, 2, 3]
    assert [(role, index) for role, index, _ in admission.placement if role == "Master"] == [("Master", 0)]


def test_short_of_quota_it_is_admitted_at_what_the_quota_leaves_and_charged_only_that():
    jobs = (pending(1, "a", elastic(5, 2, 5)), pending(2, "a", whole(1)))
    snapshot = Snapshot(NOW, jobs, quotas={"a": gpu_quota("a", 4)}, nodes=nodes_for(2, 8))
    result = plan(snapshot, "fifo")
    assert [(a.job_id, dict(a.counts)) for a in result.admissions] == [(1, {"Worker": 4})]
    status = result.pending[2]
    assert status.reason is Reason.QUOTA_EXCEEDED and status.detail["free"] == 0


def test_a_count_above_the_quota_s_hard_is_still_admitted_at_what_fits():
    snapshot = Snapshot(
        NOW, (pending(1, "a", elastic(5, 2, 5)),), quotas={"a": gpu_quota("a", 3)}, nodes=nodes_for(1, 8)
    )
    (admission,) = plan(snapshot, "fifo").admissions
    assert admission.counts == {"Worker": 3} and len(admission.placement) == 3


def test_a_job_that_does_not_fit_at_its_minimum_waits_with_the_reason_for_its_minimum():
    snapshot = Snapshot(NOW, (pending(1, "a", elastic(5, 2, 5)),), quotas={"a": gpu_quota("a", 4, 3)}, node_fit=False)
    result = plan(snapshot, "fifo")
    status = result.pending[1]
    assert not result.admissions
    assert status.reason is Reason.QUOTA_EXCEEDED and (status.detail["needed"], status.detail["free"]) == (2, 1)
    on_nodes = plan(Snapshot(NOW, (pending(1, "a", elastic(5, 3, 5)),), nodes=nodes_for(1, 2)), "fifo")
    assert on_nodes.pending[1].reason is Reason.NO_NODE_FITS and on_nodes.pending[1].detail["pods"] == 3


def test_a_smaller_gang_keeps_what_its_stored_demand_leaves_out():
    # A demand stored without the object count (it counts already): the smaller gang's too.
    job = pending(1, "a", elastic(5, 2, 5))
    stored = {key: amount for key, amount in job.demand.items() if not key.startswith("count/")}
    job = PendingJob(1, "a", 0, NOW - 100, job.workload, demand=stored)
    smaller = at_counts(job, {"Worker": 3})
    assert smaller.demand == {**stored, QUOTA_GPU: 3, "pods": 3}
    assert smaller.workload.counts == {"Worker": 3} and smaller.workload.pod_sets[0].minimum == 2


def test_a_strict_queue_head_that_waits_blocks_with_its_minimum_and_the_next_job_stays_behind():
    jobs = (pending(1, "a", elastic(5, 3, 5), submitted=NOW - 200), pending(2, "a", whole(1)))
    snapshot = Snapshot(NOW, jobs, nodes=nodes_for(1, 2))
    result = plan(snapshot, get_policy("fifo", strict=True))
    assert not result.admissions
    assert result.pending[2].reason is Reason.BLOCKED_BY_QUEUE_HEAD


def test_jobs_alike_but_for_their_minimum_are_not_taken_for_one_another():
    # Same gang and demand: the first cannot run at its minimum of 3, the second can at 2.
    jobs = (pending(1, "a", elastic(4, 3, 4)), pending(2, "a", elastic(4, 2, 4)))
    result = plan(Snapshot(NOW, jobs, nodes=nodes_for(1, 2)), "priority")
    assert [(a.job_id, dict(a.counts)) for a in result.admissions] == [(2, {"Worker": 2})]
    assert result.pending[1].detail["pods"] == 3


# -- growth -------------------------------------------------------------------------------------


def test_a_running_elastic_job_grows_to_its_maximum_into_idle_nodes_indexes_continuing():
    job = running(10, "a", elastic(2, 2, 4), ["n0", "n0"])
    result = plan(Snapshot(NOW, (), running=(job,), nodes=nodes_for(2, 2, (job,))), "fifo")
    resize = result.resizes[10]
    assert resize.counts == {"Worker": 4}
    assert sorted(resize.placement) == [("Worker", 2, "n1"), ("Worker", 3, "n1")]


def test_growth_comes_after_the_pending_jobs_and_takes_only_what_they_leave():
    job = running(10, "a", elastic(2, 2, 6), ["n0", "n0"])
    snapshot = Snapshot(NOW, (pending(1, "b", whole(1)),), running=(job,), nodes=nodes_for(2, 2, (job,)))
    result = plan(snapshot, "fifo")
    assert result.admitted == (1,)
    assert result.resizes[10].counts == {"Worker": 3}


def test_nothing_grows_while_a_job_waits_for_nodes():
    job = running(10, "a", elastic(2, 2, 6), ["n0", "n0"])
    snapshot = Snapshot(NOW, (pending(1, "b", whole(3)),), running=(job,), nodes=nodes_for(2, 2, (job,)))
    result = plan(snapshot, "fifo")
    assert result.pending[1].reason is Reason.NO_NODE_FITS
    assert result.resizes == {}


def test_growth_keeps_to_its_quota_and_waits_while_its_namespace_waits_for_quota():
    mine = running(10, "a", elastic(2, 2, 6), ["n0", "n0"])
    other = running(11, "b", elastic(1, 1, 2), ["n1"])
    world = {"running": (mine, other), "nodes": nodes_for(4, 2, (mine, other))}
    alone = plan(Snapshot(NOW, (), quotas={"a": gpu_quota("a", 3, 2)}, **world), "fifo")
    assert alone.resizes[10].counts == {"Worker": 3} and alone.resizes[11].counts == {"Worker": 2}
    waiting = Snapshot(NOW, (pending(1, "a", whole(2)),), quotas={"a": gpu_quota("a", 3, 2)}, **world)
    result = plan(waiting, "fifo")
    assert result.pending[1].reason is Reason.QUOTA_EXCEEDED
    assert 10 not in result.resizes and result.resizes[11].counts == {"Worker": 2}


def test_a_job_at_its_maximum_or_not_elastic_does_not_grow():
    full = running(10, "a", elastic(3, 1, 3), ["n0"] * 3)
    plain = running(11, "a", whole(1), ["n1"])
    result = plan(Snapshot(NOW, (), running=(full, plain), nodes=nodes_for(3, 4, (full, plain))), "fifo")
    assert result.resizes == {}


# -- shrink before kill ---------------------------------------------------------------------------


def test_priority_preemption_takes_the_fewest_extra_pods_before_any_whole_job():
    extra = running(10, "a", elastic(3, 1, 3), ["n0"] * 3, started=NOW - 500)
    plain = running(11, "a", whole(1), ["n0"])  # newer: first among whole victims
    world = {"running": (extra, plain), "nodes": nodes_for(1, 4, (extra, plain))}
    result = plan(Snapshot(NOW, (pending(1, "a", whole(1), priority=5),), **world), PREEMPTING)
    assert [(p.victim, dict(p.shrink_to), p.cause) for p in result.preemptions] == [(10, {"Worker": 2}, PRIORITY)]
    both = plan(Snapshot(NOW, (pending(1, "a", whole(2), priority=5),), **world), PREEMPTING)
    assert [(p.victim, dict(p.shrink_to)) for p in both.preemptions] == [(10, {"Worker": 1})]
    assert both.pending[1].reason is Reason.PREEMPTING and both.pending[1].detail["victims"] == [10]


def test_an_equal_priority_job_s_extras_go_but_the_job_itself_does_not():
    extra = running(10, "a", elastic(3, 1, 3), ["n0"] * 3)
    world = {"running": (extra,), "nodes": nodes_for(1, 3, (extra,))}
    result = plan(Snapshot(NOW, (pending(1, "a", whole(2), priority=0),), **world), PREEMPTING)
    assert [(p.victim, dict(p.shrink_to)) for p in result.preemptions] == [(10, {"Worker": 1})]
    more = plan(Snapshot(NOW, (pending(1, "a", whole(3), priority=0),), **world), PREEMPTING)
    assert more.preemptions == ()


def test_whole_jobs_go_only_when_all_extras_are_not_enough_and_on_top_of_them():
    extra = running(10, "a", elastic(2, 1, 2), ["n0"] * 2, started=NOW - 500)
    plain = running(11, "a", whole(2), ["n0"] * 2)
    world = {"running": (extra, plain), "nodes": nodes_for(1, 4, (extra, plain))}
    result = plan(Snapshot(NOW, (pending(1, "a", whole(3), priority=5),), **world), PREEMPTING)
    assert sorted((p.victim, dict(p.shrink_to)) for p in result.preemptions) == [(10, {"Worker": 1}), (11, {})]


def test_reclaim_shrinks_a_borrowing_elastic_job_before_taking_it():
    borrower = running(10, "team-a", elastic(12, 4, 12), ["n0"] * 8 + ["n1"] * 4, borrowing=True)
    quotas = {
        name: NamespaceQuota(name, {QUOTA_GPU: 16}, {QUOTA_GPU: used}, guaranteed={QUOTA_GPU: 8})
        for name, used in (("team-a", 12), ("team-b", 0))
    }
    snapshot = Snapshot(
        NOW,
        (pending(1, "team-b", whole(6)),),
        running=(borrower,),
        quotas=quotas,
        nodes=nodes_for(2, 8, (borrower,)),
    )
    result = plan(snapshot, "priority")
    assert [(p.victim, dict(p.shrink_to), p.cause) for p in result.preemptions] == [(10, {"Worker": 10}, RECLAIM)]


def test_a_job_whose_extras_are_leaving_holds_their_room_and_preempts_nothing_more():
    # Job 10 was shrunk from 3 to 1 for job 1: its pods 1 and 2 are still on n0.
    shrinking = replace(running(10, "a", elastic(3, 1, 3), ["n0"] * 3), counts={"Worker": 1}, shrinking_for=1)
    plain = running(11, "a", whole(1), ["n0"])
    snapshot = Snapshot(
        NOW,
        (pending(1, "a", whole(2), priority=5),),
        running=(shrinking, plain),
        nodes=nodes_for(1, 4, (shrinking, plain)),
    )
    result = plan(snapshot, PREEMPTING)
    assert result.preemptions == ()
    assert result.pending[1].reason is Reason.PREEMPTING and result.pending[1].detail["victims"] == [10]


# -- properties ----------------------------------------------------------------------------------


@st.composite
def worlds(draw, preempting=(True, False), crowded=False):
    """Nodes of GPUs, running jobs (elastic or not) placed on them, pending jobs (mostly
    outranking them), a quota on namespace "a" or none, and a policy: with priority
    preemption or without, of those ``preempting`` allows.  ``crowded``: one namespace,
    several running jobs, pending ones that outrank them: preemption is the common case."""
    namespaces = "a" if crowded else "aab"
    nodes = [draw(st.integers(2, 6)) for _ in range(draw(st.integers(1, 3)))]
    free = list(nodes)
    runs = []
    for job_id in range(100, 100 + draw(st.integers(2 if crowded else 0, 6))):
        minimum = draw(st.integers(1, 3))
        current = draw(st.integers(minimum, minimum + 3))
        workload = elastic(current, minimum, current + draw(st.integers(0, 3)))
        if not draw(st.booleans()):
            workload = whole(current)
        places = []
        for _ in range(current):
            number = next((n for n, gpus in enumerate(free) if gpus), None)
            if number is None:
                break
            free[number] -= 1
            places.append(f"n{number}")
        if len(places) < current:  # no room for it: gone
            for name in places:
                free[int(name[1:])] += 1
            continue
        namespace = draw(st.sampled_from(namespaces))
        priority = draw(st.integers(0, 2))
        runs.append(running(job_id, namespace, workload, places, priority=priority, started=NOW - job_id))
    jobs = []
    for job_id in range(1, 1 + draw(st.integers(0, 4))):
        count = draw(st.integers(1, 6))
        if draw(st.booleans()):
            minimum = draw(st.integers(1, count))
            workload = elastic(count, minimum, count + draw(st.integers(0, 2)))
        else:
            workload = whole(count)
        priority = draw(st.integers(1 if crowded else 0, 3))
        jobs.append(pending(job_id, draw(st.sampled_from(namespaces)), workload, priority=priority))
    quotas = {}
    if draw(st.booleans()):
        used = sum(len(job.placements) for job in runs if job.namespace == "a")
        quotas["a"] = gpu_quota("a", used + draw(st.integers(0, 6)), used)
    nodes_ = tuple(
        Node(f"n{i}", {GPU: gpus, "cpu": 64_000, "pods": 110}, {GPU: gpus - free[i]}) for i, gpus in enumerate(nodes)
    )
    policy = PREEMPTING if draw(st.sampled_from(preempting)) else get_policy("priority")
    return Snapshot(NOW, tuple(jobs), running=tuple(runs), quotas=quotas, nodes=nodes_), policy


def _ranges(workload):
    return {p.role: (p.minimum if p.minimum is not None else p.count, p.count, p.maximum) for p in workload.pod_sets}


@SETTINGS
@given(worlds())
def test_no_elastic_job_is_admitted_grown_or_shrunk_outside_its_range(world):
    snapshot, policy = world
    result = plan(snapshot, policy)
    jobs = {job.id: job for job in snapshot.pending}
    runs = {job.id: job for job in snapshot.running}
    placed: dict[str, int] = {}
    for admission in result.admissions:
        workload = jobs[admission.job_id].workload
        counts = dict(admission.counts) or workload.counts
        for role, (low, asked, _) in _ranges(workload).items():
            assert low <= counts[role] <= asked
            assert sorted(i for r, i, _ in admission.placement if r == role) == list(range(counts[role]))
        for _, _, node in admission.placement:
            placed[node] = placed.get(node, 0) + 1
    for job_id, resize in result.resizes.items():
        job = runs[job_id]
        for role, (_, _, high) in _ranges(job.workload).items():
            assert job.counts[role] <= resize.counts[role] <= (high if high is not None else job.counts[role])
            added = sorted(i for r, i, _ in resize.placement if r == role)
            assert added == list(range(job.counts[role], resize.counts[role]))
        for _, _, node in resize.placement:
            placed[node] = placed.get(node, 0) + 1
    for preemption in result.preemptions:
        if preemption.shrink_to:
            job = runs[preemption.victim]
            for role, (low, _, _) in _ranges(job.workload).items():
                assert low <= preemption.shrink_to[role] <= job.counts[role]
            assert preemption.shrink_to != dict(job.counts)
    for node in snapshot.nodes:  # what is placed fits what is free
        assert placed.get(node.name, 0) <= node.allocatable[GPU] - node.allocated[GPU]
    quota = snapshot.quotas.get("a")
    if quota is not None:
        charged = sum(
            sum((dict(a.counts) or jobs[a.job_id].workload.counts).values())
            for a in result.admissions
            if a.namespace == "a"
        )
        charged += sum(
            sum(r.counts.values()) - sum(runs[r.job_id].counts.values())
            for r in result.resizes.values()
            if r.namespace == "a"
        )
        assert quota.used[QUOTA_GPU] + charged <= quota.hard[QUOTA_GPU]


@SETTINGS
@given(worlds(preempting=(True,), crowded=True))
def test_shrinking_comes_before_any_whole_job_of_equal_or_lower_priority(world):
    snapshot, policy = world
    result = plan(snapshot, policy)
    jobs = {job.id: job for job in snapshot.pending}
    for preemptor in {p.preemptor for p in result.preemptions}:
        mine = [p for p in result.preemptions if p.preemptor == preemptor]
        if not any(not p.shrink_to for p in mine):
            continue
        job = jobs[preemptor]
        others = {p.victim for p in result.preemptions if p.preemptor != preemptor}
        victims = {p.victim for p in mine}
        for candidate in snapshot.running:
            low = _ranges(candidate.workload)["Worker"][0]
            if (
                candidate.workload.elastic
                and candidate.counts["Worker"] > low
                and candidate.namespace == job.namespace
                and candidate.priority <= job.priority
                and candidate.id not in others
            ):
                assert candidate.id in victims, (candidate.id, mine)


def _without_growth(snapshot):
    """The same world, its running elastic jobs at their maximum already (none can grow)."""
    runs = []
    for job in snapshot.running:
        pod_sets = tuple(
            replace(p, maximum=job.counts[p.role]) if p.maximum is not None else p for p in job.workload.pod_sets
        )
        runs.append(replace(job, workload=replace(job.workload, pod_sets=pod_sets)))
    return replace(snapshot, running=tuple(runs))


def _grown(snapshot, resizes):
    """The world once the resizes are done: their pods run, on their nodes and in their quota."""
    added: dict[str, int] = {}
    runs = []
    for job in snapshot.running:
        resize = resizes.get(job.id)
        if resize is None:
            runs.append(job)
            continue
        for _, _, node in resize.placement:
            added[node] = added.get(node, 0) + 1
        runs.append(replace(job, counts=resize.counts, placements=job.placements + resize.placement))
    quotas = dict(snapshot.quotas)
    if "a" in quotas:
        grown = sum(
            sum(r.counts.values()) - sum(j.counts.values())
            for j in snapshot.running
            if (r := resizes.get(j.id)) and j.namespace == "a"
        )
        quotas["a"] = gpu_quota("a", quotas["a"].hard[QUOTA_GPU], quotas["a"].used[QUOTA_GPU] + grown)
    nodes = tuple(replace(n, allocated={GPU: n.allocated[GPU] + added.get(n.name, 0)}) for n in snapshot.nodes)
    return replace(snapshot, running=tuple(runs), quotas=quotas, nodes=nodes)


@SETTINGS
@given(worlds(preempting=(False,)))
def test_growth_never_takes_room_a_pending_job_that_fits_needs(world):
    snapshot, policy = world
    result = plan(snapshot, policy, forecasts=False)
    still = plan(_without_growth(snapshot), policy, forecasts=False)
    assert still.resizes == {}
    assert result.admissions == still.admissions and result.pending == still.pending
    # The rule that keeps room for the jobs that wait: none waits for nodes, none of a grown
    # job's namespace for quota.
    if result.resizes:
        waits = [(status.namespace, status.reason) for status in result.pending.values()]
        assert not any(reason in (Reason.NO_NODE_FITS, Reason.NO_DOMAIN_FITS) for _, reason in waits)
        grown = {resize.namespace for resize in result.resizes.values()}
        assert not any(ns in grown and reason is Reason.QUOTA_EXCEEDED for ns, reason in waits)
    # And once grown, every job admitted here still fits, at the same counts.
    after = plan(_grown(snapshot, result.resizes), policy, forecasts=False)
    assert [(a.job_id, dict(a.counts)) for a in after.admissions] == [
        (a.job_id, dict(a.counts)) for a in result.admissions
    ]


def test_extra_pods_grow_onto_lent_nodes_without_a_bound_but_never_inside_their_notice():
    from queueing import LentPool

    job = running(10, "a", elastic(2, 2, 4), ["n0", "n0"])  # no prediction: as a whole job, kept off the pool
    nodes = nodes_for(2, 2, (job,))
    open_pool = LentPool("night-a", frozenset({"n1"}), NOW + 3600, 1800.0)
    grown = plan(Snapshot(NOW, (), running=(job,), nodes=nodes, lent=(open_pool,)), "fifo")
    assert sorted(grown.resizes[10].placement) == [("Worker", 2, "n1"), ("Worker", 3, "n1")]
    closing = LentPool("night-a", frozenset({"n1"}), NOW + 600, 1800.0)
    assert plan(Snapshot(NOW, (), running=(job,), nodes=nodes, lent=(closing,)), "fifo").resizes == {}
