"""Elastic quota and preemption in the planner: scenarios, then properties over random
snapshots and over sequences of cycles (a small world simulated here, arithmetic
written out rather than borrowed from the planner).

The world of the properties has GPUs only, one per pod: a gang fits the nodes exactly
when enough GPUs are free, so "would fit" is plain addition.
"""

import os
import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import NamespaceQuota, Node, PendingJob, PodSet, Reason, RunningJob, Snapshot, Workload, plan
from queueing.preemption import PRIORITY, RECLAIM, choose_victims, victim_order
from tests.examples import examples

GPU = "requests.nvidia.com/gpu"
NOW = 1_000_000.0
SETTINGS = settings(
    max_examples=examples(int(os.environ.get("QUEUEING_EXAMPLES", 80))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def workload(pods: int, gpus_per_pod: int = 1) -> Workload:
    pod_set = PodSet("Worker", pods, {"nvidia.com/gpu": gpus_per_pod}, {"nvidia.com/gpu": gpus_per_pod})
    return Workload("TFJob", "kubeflow.org/v1", "j", None, (pod_set,))


def pending(job_id, namespace, pods, *, priority=0, submitted=NOW - 100, preempted_by=None):
    return PendingJob(job_id, namespace, priority, submitted, workload(pods), preempted_by=preempted_by)


def running(job_id, namespace, placements, *, priority=0, borrowing=False, started=NOW - 50, **more):
    """``placements``: the node of each pod (one GPU each)."""
    pods = tuple(("Worker", index, node) for index, node in enumerate(placements))
    return RunningJob(
        job_id,
        namespace,
        workload(len(placements)),
        started,
        priority=priority,
        borrowing=borrowing,
        placements=pods,
        **more,
    )


def gpu_nodes(count: int, gpus: int, jobs=()) -> tuple[Node, ...]:
    """Nodes of ``gpus`` GPUs each, charged with the running jobs' pods."""
    used: dict[str, int] = {}
    for job in jobs:
        for _, _, node in job.placements:
            used[node] = used.get(node, 0) + 1
    return tuple(
        Node(f"n{i}", {"nvidia.com/gpu": gpus, "pods": 110}, {"nvidia.com/gpu": used.get(f"n{i}", 0)})
        for i in range(count)
    )


def quotas(guarantees: dict[str, int], ceiling: int, jobs=(), **more) -> dict[str, NamespaceQuota]:
    used: dict[str, int] = {}
    for job in jobs:
        used[job.namespace] = used.get(job.namespace, 0) + len(job.placements)
    return {
        name: NamespaceQuota(name, {GPU: ceiling}, {GPU: used.get(name, 0)}, guaranteed={GPU: share}, **more)
        for name, share in guarantees.items()
    }


# -- scenarios ---------------------------------------------------------------------------------


def test_a_namespace_borrows_what_its_cohort_leaves_idle_and_is_marked_borrowing():
    # Two namespaces of 8 GPUs each on 16 GPUs; team-b idle: team-a may run 12.
    snapshot = Snapshot(
        NOW,
        (pending(1, "team-a", 8), pending(2, "team-a", 4)),
        quotas=quotas({"team-a": 8, "team-b": 8}, 16),
        nodes=gpu_nodes(2, 8),
    )
    result = plan(snapshot, "priority")
    assert [(a.job_id, a.borrowing) for a in result.admissions] == [(1, False), (2, True)]


def test_borrowing_stops_where_the_cohort_has_nothing_idle_and_the_reason_says_so():
    jobs = (running(10, "team-b", ["n1"] * 6),)
    snapshot = Snapshot(
        NOW,
        (pending(1, "team-a", 8), pending(2, "team-a", 4)),
        running=jobs,
        quotas=quotas({"team-a": 8, "team-b": 8}, 16, jobs),
        nodes=gpu_nodes(2, 8, jobs),
    )
    result = plan(snapshot, "priority")
    assert result.admitted == (1,)
    status = result.pending[2]
    assert status.reason is Reason.CANNOT_BORROW
    assert status.detail["free"] == 2 and status.detail["needed"] == 4
    assert "lends 2 now" in status.message


def test_idle_guarantee_a_waiting_job_claims_is_not_lent():
    # team-b's job 3 (within its 8) waits on nodes; team-a may not borrow the 8 it needs.
    jobs = (running(10, "team-a", ["n0"] * 8), running(11, "team-x", ["n1"] * 8))
    snapshot = Snapshot(
        NOW,
        (pending(2, "team-a", 1, submitted=NOW - 500), pending(3, "team-b", 8)),
        running=jobs,
        quotas={
            **quotas({"team-a": 8, "team-b": 8}, 24, jobs),
            "team-x": NamespaceQuota("team-x", {GPU: 8}, {GPU: 8}),
        },
        nodes=gpu_nodes(3, 8, jobs),
    )
    result = plan(snapshot, "priority")
    assert result.admitted == (3,)
    assert result.pending[2].reason is Reason.CANNOT_BORROW


def test_the_borrowing_limit_caps_what_a_namespace_borrows():
    snapshot = Snapshot(
        NOW,
        (pending(1, "team-a", 8), pending(2, "team-a", 4), pending(3, "team-a", 2)),
        quotas=quotas({"team-a": 8, "team-b": 8}, 16, borrowing_limit={GPU: 3}),
        nodes=gpu_nodes(2, 8),
    )
    result = plan(snapshot, "priority")
    assert result.admitted == (1, 3)
    assert result.pending[2].detail["limit"] == 3
    assert "borrowing limit of 3 is reached" in result.pending[2].message


def test_reclaim_preempts_the_fewest_borrowers_lowest_priority_then_newest():
    # team-a runs its 8 plus three borrowers on team-b's share; team-b's job needs 4 GPUs.
    jobs = (
        running(10, "team-a", ["n0"] * 8),
        running(11, "team-a", ["n1"] * 4, borrowing=True, priority=5, started=NOW - 30),
        running(12, "team-a", ["n1"] * 2, borrowing=True, started=NOW - 40),
        running(13, "team-a", ["n1"] * 2, borrowing=True, started=NOW - 20),
    )
    snapshot = Snapshot(
        NOW,
        (pending(1, "team-b", 4),),
        running=jobs,
        quotas=quotas({"team-a": 8, "team-b": 8}, 16, jobs),
        nodes=gpu_nodes(2, 8, jobs),
    )
    result = plan(snapshot, "priority")
    assert result.admitted == ()
    assert {(p.victim, p.preemptor, p.cause) for p in result.preemptions} == {(13, 1, RECLAIM), (12, 1, RECLAIM)}
    assert result.pending[1].reason is Reason.PREEMPTING
    assert sorted(result.pending[1].detail["victims"]) == [12, 13]
    # Next cycle, the victims in their grace period: nothing more is preempted, it still waits for them.
    leaving = tuple(replace(j, preempted_for=1 if j.id in (12, 13) else None) for j in jobs)
    again = plan(Snapshot(NOW + 2, snapshot.pending, running=leaving, quotas=snapshot.quotas, nodes=snapshot.nodes))
    assert again.preemptions == ()
    assert again.pending[1].reason is Reason.PREEMPTING


def test_reclaim_leaves_jobs_within_their_guarantee_and_namespaces_at_it_alone():
    # team-a's borrower 11 took 4 while team-a was short; team-a is at its guarantee now.
    jobs = (running(10, "team-a", ["n0"] * 4), running(11, "team-a", ["n0"] * 4, borrowing=True))
    jobs += (running(12, "team-b", ["n1"] * 8),)
    snapshot = Snapshot(
        NOW,
        (pending(1, "team-b", 4),),  # beyond team-b's own 8: it would borrow, so it reclaims nothing
        running=jobs,
        quotas=quotas({"team-a": 8, "team-b": 8}, 16, jobs),
        nodes=gpu_nodes(2, 8, jobs),
    )
    result = plan(snapshot, "priority")
    assert result.preemptions == ()
    assert result.pending[1].reason is Reason.CANNOT_BORROW


def test_a_job_preempted_too_often_is_no_longer_a_victim():
    jobs = (running(10, "team-a", ["n0"] * 8), running(11, "team-a", ["n1"] * 8, borrowing=True, preemptions=3))
    world = dict(running=jobs, quotas=quotas({"team-a": 8, "team-b": 8}, 16, jobs), nodes=gpu_nodes(2, 8, jobs))
    limited = plan(Snapshot(NOW, (pending(1, "team-b", 2),), preemption_limit=3, **world))
    assert limited.preemptions == ()
    unlimited = plan(Snapshot(NOW, (pending(1, "team-b", 2),), preemption_limit=4, **world))
    assert [p.victim for p in unlimited.preemptions] == [11]


def test_within_a_namespace_a_higher_priority_preempts_lower_only_where_the_policy_says():
    jobs = (running(10, "team-a", ["n0"] * 4, priority=1), running(11, "team-a", ["n0"] * 4, priority=5))
    world = dict(
        running=jobs,
        quotas={"team-a": NamespaceQuota("team-a", {GPU: 8}, {GPU: 8})},
        nodes=gpu_nodes(1, 8, jobs),
    )
    urgent = (pending(1, "team-a", 4, priority=10), pending(2, "team-a", 4, priority=1))
    off = plan(Snapshot(NOW, urgent, **world), "priority")
    assert off.preemptions == ()
    from queueing import get_policy

    on = plan(Snapshot(NOW, urgent, **world), get_policy("priority", preempt_lower_priority=True))
    assert [(p.victim, p.preemptor, p.cause) for p in on.preemptions] == [(10, 1, PRIORITY)]
    # Job 2 (priority 1) outranks nobody: 10 has priority 1 too.
    assert on.pending[2].reason is not Reason.PREEMPTING


def test_a_preempted_job_says_for_whom_and_what_it_waits_for_now():
    jobs = (running(10, "team-a", ["n0"] * 8),)
    snapshot = Snapshot(
        NOW,
        (pending(1, "team-a", 8, preempted_by=7),),
        running=jobs,
        quotas={"team-a": NamespaceQuota("team-a", {GPU: 8}, {GPU: 8})},
        nodes=gpu_nodes(1, 8, jobs),
    )
    status = plan(snapshot, "priority").pending[1]
    assert status.reason is Reason.PREEMPTED
    assert status.detail["preemptor"] == 7 and status.detail["waits_for"] == "QuotaExceeded"
    assert status.message.startswith("preempted to make room for job 7; back in its place, quota")


def test_choose_victims_returns_a_minimal_set_in_candidate_order():
    jobs = [running(i, "team-a", ["n0"] * size) for i, size in enumerate([1, 1, 4, 2], start=1)]

    def fits(chosen):
        return sum(len(job.placements) for job in chosen) >= 4

    chosen = choose_victims(jobs, fits)
    assert [job.id for job in chosen] == [3]  # 1, 1, 4 sufficed; 1 and 1 were not needed
    assert choose_victims(jobs[:2], fits) is None
    order = victim_order(
        [
            running(1, "a", ["n0"], priority=2, started=5),
            running(2, "a", ["n0"], started=3),
            running(3, "a", ["n0"], started=9),
        ],
        10.0,
    )
    assert [job.id for job in order] == [3, 2, 1]  # without checkpoints: the most recent loses least


# -- properties over random snapshots ------------------------------------------------------------


@st.composite
def elastic_worlds(draw):
    """A cohort of GPU-only namespaces whose guarantees add up to at most the cluster, the
    cluster as every namespace's ceiling, running jobs (some borrowing), and waiting jobs."""
    node_count = draw(st.integers(1, 4))
    node_gpus = draw(st.sampled_from([4, 8]))
    capacity = node_count * node_gpus
    names = ["team-a", "team-b", "team-c"][: draw(st.integers(2, 3))]
    shares = draw(st.lists(st.integers(0, capacity), min_size=len(names), max_size=len(names)))
    while sum(shares) > capacity:
        shares[shares.index(max(shares))] -= 1
    guarantees = dict(zip(names, shares, strict=True))
    free = {f"n{i}": node_gpus for i in range(node_count)}
    jobs = []
    own = dict.fromkeys(names, 0)
    next_id = 100
    for _ in range(draw(st.integers(0, 8))):
        namespace = draw(st.sampled_from(names))
        size = draw(st.integers(1, 4))
        if sum(free.values()) < size:
            break
        placements = []
        for _ in range(size):
            node = next(name for name, gpus in free.items() if gpus > 0)
            free[node] -= 1
            placements.append(node)
        borrowing = own[namespace] + size > guarantees[namespace]
        own[namespace] += size
        jobs.append(
            running(
                next_id,
                namespace,
                placements,
                priority=draw(st.integers(0, 2)),
                borrowing=borrowing,
                started=NOW - draw(st.integers(1, 1000)),
                preemptions=draw(st.integers(0, 3)),
                # (issue 48) how it checkpoints, and a minimum run time it may still be inside
                checkpoint_every_s=draw(st.sampled_from([None, 60.0, 300.0])),
                checkpoint_on_notice_s=draw(st.sampled_from([None, None, 30.0])),
                checkpointed_at=NOW - draw(st.sampled_from([2000, 500, 10])),
                min_runtime_s=draw(st.sampled_from([0.0, 0.0, 400.0])),
            )
        )
        next_id += 1
    waiting = tuple(
        pending(
            i,
            draw(st.sampled_from(names)),
            draw(st.integers(1, 6)),
            priority=draw(st.integers(0, 3)),
            submitted=NOW - draw(st.integers(1, 1000)),
        )
        for i in range(1, draw(st.integers(1, 6)) + 1)
    )
    return Snapshot(
        NOW,
        waiting,
        running=tuple(jobs),
        quotas=quotas(guarantees, capacity, jobs),
        nodes=gpu_nodes(node_count, node_gpus, jobs),
        preemption_limit=draw(st.sampled_from([None, 1, 3])),
    )


def _policy(draw_within: bool):
    from queueing import get_policy

    return get_policy("priority", preempt_lower_priority=draw_within)


def _marked(snapshot: Snapshot, result) -> Snapshot:
    """The world one cycle later, nothing else having changed: the plan's admissions run,
    its victims are in their grace period."""
    leaving = {p.victim: p.preemptor for p in result.preemptions}
    jobs = [replace(j, preempted_for=leaving.get(j.id, j.preempted_for)) for j in snapshot.running]
    waiting = {job.id: job for job in snapshot.pending}
    for admission in result.admissions:
        job = waiting.pop(admission.job_id)
        jobs.append(
            RunningJob(
                job.id,
                job.namespace,
                job.workload,
                snapshot.now,
                priority=job.priority,
                borrowing=admission.borrowing,
                placements=admission.placement,
            )
        )
    base = {name: quota.guaranteed[GPU] for name, quota in snapshot.quotas.items()}
    ceiling = next(iter(snapshot.quotas.values())).hard[GPU]
    gpus = snapshot.nodes[0].allocatable["nvidia.com/gpu"]
    return Snapshot(
        snapshot.now,
        tuple(waiting.values()),
        running=tuple(jobs),
        quotas=quotas(base, ceiling, jobs),
        nodes=gpu_nodes(len(snapshot.nodes), gpus, jobs),
        preemption_limit=snapshot.preemption_limit,
    )


@SETTINGS
@given(elastic_worlds(), st.booleans())
def test_preemption_rules_hold_on_random_worlds(snapshot, within):
    result = plan(snapshot, _policy(within))
    by_id = {job.id: job for job in snapshot.running}
    waiting = {job.id: job for job in snapshot.pending}
    guaranteed = {name: quota.guaranteed[GPU] for name, quota in snapshot.quotas.items()}
    own = {name: quota.used[GPU] for name, quota in snapshot.quotas.items()}
    victims = [p.victim for p in result.preemptions]
    assert len(victims) == len(set(victims))  # nobody preempted twice
    for preemption in result.preemptions:
        victim, preemptor = by_id[preemption.victim], waiting[preemption.preemptor]
        assert preemption.preemptor not in result.admitted
        assert result.pending[preemption.preemptor].reason is Reason.PREEMPTING
        # The limit: a job preempted that often is no victim; nor one inside its minimum run time.
        assert snapshot.preemption_limit is None or victim.preemptions < snapshot.preemption_limit
        assert snapshot.now - victim.started_at >= victim.min_runtime_s
        if preemption.cause == PRIORITY:
            # Nothing is preempted for a job of lower or equal priority of its namespace.
            assert within and victim.namespace == preemptor.namespace and victim.priority < preemptor.priority
        else:
            assert preemption.cause == RECLAIM
            # Reclaim takes only borrowers, of other namespaces above their guarantee,
            # for a job that fits its own guarantee.
            assert victim.borrowing and victim.namespace != preemptor.namespace
            assert own[victim.namespace] > guaranteed[victim.namespace]
            assert own[preemptor.namespace] + preemptor.demand[GPU] <= guaranteed[preemptor.namespace]
    # No partial gang: every admission places every pod.
    for admission in result.admissions:
        job = waiting[admission.job_id]
        assert admission.placement is not None and len(admission.placement) == job.demand["pods"]
    # No preemption cycle: planning the world again and again, each plan applied (its jobs
    # start, its victims are in their grace period, nothing else changes) comes to rest,
    # and no job is preempted twice.
    world, preempted = snapshot, {p.victim for p in result.preemptions}
    for _ in range(8):
        world = _marked(world, result)
        leaving = {job.id for job in world.running if job.preempted_for is not None}
        result = plan(world, _policy(within))
        new = {p.victim for p in result.preemptions} - leaving
        assert not new & preempted
        preempted |= new
        if not new and not result.admissions:
            break
    else:
        raise AssertionError("planning an unchanged world does not come to rest")


@SETTINGS
@given(elastic_worlds())
def test_no_proper_subset_of_the_victims_would_have_sufficed(snapshot):
    """With one waiting job and one GPU per pod, "fits" is arithmetic: free GPUs plus the
    victims' GPUs cover its demand."""
    job = snapshot.pending[0]
    single = Snapshot(
        snapshot.now,
        (job,),
        running=snapshot.running,
        quotas=snapshot.quotas,
        nodes=snapshot.nodes,
        preemption_limit=snapshot.preemption_limit,
    )
    result = plan(single, "priority")
    if not result.preemptions:
        return
    free = sum(node.allocatable["nvidia.com/gpu"] - node.allocated["nvidia.com/gpu"] for node in single.nodes)
    sizes = {j.id: len(j.placements) for j in single.running}
    chosen = [p.victim for p in result.preemptions]
    need = job.demand[GPU]
    assert free + sum(sizes[v] for v in chosen) >= need
    for left_out in chosen:
        assert free + sum(sizes[v] for v in chosen if v != left_out) < need


@SETTINGS
@given(elastic_worlds())
def test_borrowers_stay_within_the_ceiling_and_what_the_cohort_lends(snapshot):
    result = plan(snapshot, "priority")
    waiting = {job.id: job for job in snapshot.pending}
    usage = {name: quota.used[GPU] for name, quota in snapshot.quotas.items()}
    for admission in result.admissions:
        job = waiting[admission.job_id]
        guaranteed = snapshot.quotas[job.namespace].guaranteed[GPU]
        assert admission.borrowing == (usage[job.namespace] + job.demand[GPU] > guaranteed)
        usage[job.namespace] += job.demand[GPU]
        assert usage[job.namespace] <= snapshot.quotas[job.namespace].hard[GPU]
    # The cohort as a whole never uses more than its guarantees add up to, unless it already did.
    total_guaranteed = sum(quota.guaranteed[GPU] for quota in snapshot.quotas.values())
    before = sum(quota.used[GPU] for quota in snapshot.quotas.values())
    borrowed_now = sum(waiting[a.job_id].demand[GPU] for a in result.admissions if a.borrowing)
    if borrowed_now:
        assert sum(usage.values()) <= max(total_guaranteed, before)


# -- sequences of cycles -----------------------------------------------------------------------


class World:
    """GPU-only nodes, one cohort, jobs arriving over time; each cycle applies the plan:
    admissions start at once on their placement, victims leave when their grace ends."""

    def __init__(self, seed: int, grace: float = 60.0, tick: float = 10.0):
        rng = random.Random(seed)
        self.rng, self.grace, self.tick = rng, grace, tick
        self.node_count, self.node_gpus = rng.choice([(2, 8), (3, 4), (4, 8)])
        capacity = self.node_count * self.node_gpus
        names = ["team-a", "team-b", "team-c"]
        cuts = sorted(rng.randint(0, capacity) for _ in range(2))
        self.guarantees = dict(zip(names, [cuts[0], cuts[1] - cuts[0], capacity - cuts[1]], strict=True))
        self.capacity = capacity
        self.now = NOW
        self.pending: dict[int, PendingJob] = {}
        self.running: dict[int, dict] = {}
        self.next_id = 1
        self.waits: list[tuple[int, float, float]] = []  # (job, first claimed at, started at)
        self.claimed_at: dict[int, float] = {}
        self.preempted = 0
        self.preemptions_of: dict[int, int] = {}
        # Preemptors one of whose victims ended on its own before its grace period was over:
        # the planner cannot tell whose room that was, and the earliest preemptor in the
        # queue takes it, so a later one may have to preempt again (once more a grace period).
        self.disturbed: set[int] = set()

    def arrive(self) -> None:
        for _ in range(self.rng.randint(0, 3)):
            namespace = self.rng.choice(list(self.guarantees))
            job = pending(self.next_id, namespace, self.rng.randint(1, 6), submitted=self.now)
            self.pending[job.id] = job
            self.next_id += 1

    def own(self, namespace: str) -> int:
        return sum(len(r["placements"]) for r in self.running.values() if r["job"].namespace == namespace)

    def snapshot(self) -> Snapshot:
        jobs = tuple(
            RunningJob(
                job_id,
                r["job"].namespace,
                r["job"].workload,
                r["started"],
                borrowing=r["borrowing"],
                placements=tuple(("Worker", i, node) for i, node in enumerate(r["placements"])),
                preemptions=r["preemptions"],
                preempted_for=r["for"],
            )
            for job_id, r in self.running.items()
        )
        return Snapshot(
            self.now,
            tuple(self.pending.values()),
            running=jobs,
            quotas=quotas(self.guarantees, self.capacity, jobs),
            nodes=gpu_nodes(self.node_count, self.node_gpus, jobs),
        )

    def within_guarantee(self) -> set[int]:
        """Waiting jobs that fit their namespace's guarantee, counting the jobs ahead of
        them in its queue (submission order) that fit too."""
        fits = set()
        claims = {name: self.own(name) for name in self.guarantees}
        for job in sorted(self.pending.values(), key=lambda j: (j.submitted_at, j.id)):
            if claims[job.namespace] + job.demand[GPU] <= self.guarantees[job.namespace]:
                claims[job.namespace] += job.demand[GPU]
                fits.add(job.id)
        return fits

    def cycle(self) -> None:
        # Victims whose grace has ended leave and wait again, in their old place.
        for job_id, r in list(self.running.items()):
            if r["for"] is not None and r["leave_at"] <= self.now:
                del self.running[job_id]
                old = r["job"]
                self.pending[job_id] = pending(
                    job_id, old.namespace, old.demand[GPU], submitted=old.submitted_at, preempted_by=r["for"]
                )
                r["preemptions"] += 1
                self.preemptions_of[job_id] = r["preemptions"]
                self.preempted += 1
            elif r["ends"] <= self.now:
                del self.running[job_id]
                if r["for"] is not None:  # a victim ending on its own in its grace period
                    self.disturbed.add(r["for"])
        # A job fits its guarantee from the first cycle it does until it starts; an older job
        # of its own namespace taking that share first ends it (that wait is not on borrowers).
        within = self.within_guarantee()
        for job_id in list(self.claimed_at):
            if job_id not in within:
                del self.claimed_at[job_id]
        for job_id in within:
            self.claimed_at.setdefault(job_id, self.now)
        result = plan(self.snapshot(), "priority")
        for job_id, status in result.pending.items():  # (the dispatcher keeps each job's reason)
            job = self.pending[job_id]
            if job.preempting != (status.reason is Reason.PREEMPTING):
                self.pending[job_id] = PendingJob(
                    job.id,
                    job.namespace,
                    job.priority,
                    job.submitted_at,
                    job.workload,
                    preempted_by=job.preempted_by,
                    preempting=status.reason is Reason.PREEMPTING,
                )
        for admission in result.admissions:
            job = self.pending.pop(admission.job_id)
            self.running[job.id] = {
                "job": job,
                "placements": [node for _, _, node in admission.placement],
                "borrowing": admission.borrowing,
                "started": self.now,
                "ends": self.now + self.rng.randint(30, 400),
                "preemptions": self.preemptions_of.get(job.id, 0),
                "for": None,
                "leave_at": None,
            }
            if job.id in self.claimed_at:
                self.waits.append((job.id, self.claimed_at.pop(job.id), self.now))
            else:
                self.claimed_at.pop(job.id, None)
        # Nothing runs on room that is not free yet (victims in their grace period still run).
        on_node: dict[str, int] = {}
        for r in self.running.values():
            for node in r["placements"]:
                on_node[node] = on_node.get(node, 0) + 1
        assert all(count <= self.node_gpus for count in on_node.values()), on_node
        for preemption in result.preemptions:
            victim = self.running[preemption.victim]
            if victim["for"] is None:
                victim["for"], victim["leave_at"] = preemption.preemptor, self.now + self.grace
            else:  # spare (its preemptor started or cannot use it now): for another, at the same time
                victim["for"] = preemption.preemptor
        self.now += self.tick


# QUEUEING_SEQUENCES=6000 for a long hunt: of 6,000 worlds (about 115,000 waits checked) one
# wait, in world 4384, ran a grace period over: a job counted on room another job's victim
# leaves beyond that job's need, and that victim's grace period ended after its own victim's.
@pytest.mark.parametrize("seed", range(int(os.environ.get("QUEUEING_SEQUENCES", 100))))
def test_a_job_within_its_guarantee_never_waits_on_borrowers_longer_than_grace_plus_one_cycle(seed):
    world = World(seed)
    for step in range(60):
        if step < 40:
            world.arrive()
        world.cycle()
    assert world.waits, "no job within its guarantee ever waited: the world tests nothing"
    for job_id, claimed, started in world.waits:
        if job_id not in world.disturbed:
            assert started - claimed <= world.grace + world.tick, (job_id, claimed, started)
