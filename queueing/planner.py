"""One admission cycle: from a snapshot, which jobs to release now, and why every other job waits.

``plan(snapshot, policy)`` runs in numbered phases (after Kueue's
``schedule()``), over one ``CycleState`` (cycle_state.py):

1. state      - free quota per namespace, free node capacity; admitted gangs that lost
                nodes to failures placed again first (replacement.py)
2. order      - the policy's queue order, namespace overrides in their places
3. admit      - each job in turn (fair_share.py takes turns by share): 3a holds,
                3b quota, 3c gang placement on nodes, 3d admitted; else a reason
                (an elastic job down to its minimum if need be: elastic_jobs.py)
4. preempt    - victims for jobs that reclaim a guarantee or outrank (preemptor.py;
                elastic jobs' extra pods first: shrink.py); 4b moves that join scattered
                GPUs for a gang (defrag.py, when on); running elastic jobs grow
5. positions  - each waiting job's place in its namespace's queue (waiting_statuses.py)
6. estimates  - start times played forward (eta.py), every waiting job's status
7. the plan

Every job leaves phase 3 either admitted with a placement or with a reason from
``reasons.Reason``.  The plan is a pure function of the snapshot and the policy:
the same input gives the same plan.
"""

from __future__ import annotations

import gc

from . import elastic_jobs
from .backfill import CycleBackfill
from .clusters import ClusterPlan
from .cycle_state import CycleState, NamespaceState, namespace_states
from .decisions import Admission, Plan, Resize
from .elastic import ElasticQuotas
from .elastic_jobs import elastic_key
from .eta import forecast
from .fair_share import FairShare
from .fit import NodePool
from .gang_placement import GangPlacement, pod_names
from .holds import Holds, forecast_dependents
from .policies import DEFAULT_POLICY, get_policy, namespace_overrides, queue_order
from .policy import Policy
from .preemptor import Preemptor
from .quota_fit import quota_check
from .reasons import Outcome, PendingStatus, Reason, never_fits_nodes
from .replacement import Replaced, replace
from .shrink import leaving_pods
from .snapshot import PendingJob, RunningJob, Snapshot
from .tide import Bar, Tide
from .topology import Topology
from .waiting_statuses import Queues, positions, statuses

# Compared by identity in the loops that run once per queued job: hashing an
# Enum member calls Python code, an identity test does not.
_NEVER_QUOTA, _NEVER_NODES = Reason.NEVER_FITS_QUOTA, Reason.NEVER_FITS_NODES
# Outcomes that depend only on the job's shape and the capacity left.
_CAPACITY = frozenset(
    {
        Reason.QUOTA_EXCEEDED,
        Reason.RESERVED_FOR_OLDER_JOB,
        Reason.NO_NODE_FITS,
        Reason.NO_DOMAIN_FITS,
        Reason.NEVER_FITS_QUOTA,
        Reason.NEVER_FITS_NODES,
    }
)
# (CannotBorrow is not among them: it depends on whether the job claimed its guarantee.)


# Like Slurm's backfill window (bf_window, one day by default): a start
# further out than this gets no estimate, only a note saying so.  Beyond a
# day, durations are guesses compounded over thousands of jobs, and
# simulating them is most of a large cycle's cost.
DEFAULT_ETA_HORIZON_S = 86_400.0


def plan(
    snapshot: Snapshot,
    policy: Policy | str | None = None,
    *,
    strategy: str = "best",
    eta_horizon_s: float | None = DEFAULT_ETA_HORIZON_S,
    forecasts: bool = True,
) -> Plan:
    """Decide one cycle.  ``policy``: a Policy, a policy name, or None for the default;
    ``strategy``: node packing (best, first, worst); ``eta_horizon_s``: None for no limit;
    ``forecasts=False``: no start-time forecast (every status's eta None, no note), for a
    caller that shows forecasts less often than it plans (the forecast plays the whole
    queue forward and is most of a large cycle's cost)."""
    if policy is None or isinstance(policy, str):
        policy = get_policy(policy or DEFAULT_POLICY)
    # A large cycle allocates a few hundred thousand small, acyclic objects;
    # with a 100k-job snapshot alive, the cyclic collector's full passes over
    # it cost about a tenth of the cycle and can free nothing the cycle made.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Planner(snapshot, policy, strategy, eta_horizon_s, forecasts).run()
    finally:
        if collecting:
            gc.enable()


class _Planner:
    """One plan() call: its phases in order (run), over one CycleState shared with the
    Preemptor (phase 4 and the holds of jobs waiting for victims)."""

    def __init__(
        self, snapshot: Snapshot, policy: Policy, strategy: str, eta_horizon_s: float | None, forecasts: bool = True
    ):
        self.eta_horizon_s = eta_horizon_s
        self.forecasts = forecasts
        self.overrides = namespace_overrides(snapshot.policies, policy)
        self.now = snapshot.now
        self.state = CycleState(
            snapshot=snapshot,
            policy=policy,
            node_fit=snapshot.node_fit and policy.node_fit,
            strategy=strategy,
            namespaces={},
            pool=NodePool(snapshot.nodes, snapshot.in_flight, strategy),
            elastic=ElasticQuotas(snapshot),
            stats={
                "jobs": len(snapshot.pending),
                "node_reservations": 0,
                "quota_reservations": 0,
                "backfill_shadows": 0,
                "backfilled": 0,
                "preemptions": 0,
            },
        )
        if snapshot.lent and self.state.node_fit:  # (without lent pools: no work per job)
            self.state.tide = Tide(snapshot.lent, self.state.pool.names, snapshot.now)
        if len(snapshot.clusters) > 1:  # (one cluster: no work per job)
            in_flight = [(job.cluster, job.namespace, job.outstanding) for job in snapshot.in_flight]
            self.state.clusters = ClusterPlan(snapshot.clusters, self.state.pool, in_flight)
        self.preemptor = Preemptor(self.state)
        self.gangs = GangPlacement(
            self.state.pool, Topology(self.state.pool, snapshot.topology_levels), self.now, self.state.clusters
        )
        self.fair_share = FairShare(self.state)
        self.admissions: list[Admission] = []
        self.admitted_jobs: list[PendingJob] = []
        self.backfill = CycleBackfill(snapshot)  # heads' shadow reservations, per namespace
        self.probing = False  # an elastic job's smaller gangs tried (elastic_jobs.admit)
        self.holds = Holds(snapshot.groups, snapshot.budgets)  # dependencies, arrays' limits, budgets

    def run(self) -> Plan:
        state = self.state
        # 1. State: free quota per namespace after in-flight reservations, free node capacity;
        # admitted gangs that lost nodes to failures placed again first.
        replaced = self._state()
        # 2. Order: the policy's queue order (each namespace's queue is this order restricted to it).
        ordered = queue_order(state.snapshot.pending, state.policy, self.overrides, self.now)
        # 3. Admit, recording a reason for every job that is not admitted.
        by_rank = self._admit(ordered)
        # 4. Preempt: make room for waiting jobs that reclaim a guarantee or outrank their namespace's.
        self.preemptor.preempt()
        # 4b. Move running jobs that checkpoint, to join scattered GPUs for a waiting gang (defrag.py).
        self.preemptor.defragment()
        # Running elastic jobs grow into what nothing waiting could use (elastic_jobs.grow).
        resizes = elastic_jobs.grow(state)
        # 5. Queue positions.
        waiting, queues = positions(state, by_rank)
        # 6. Estimated start times, and every waiting job's status.
        starts, notes, otherwise = self._estimate(queues) if self.forecasts else ({}, {}, "")
        found = statuses(waiting, starts, notes, otherwise)
        # 7. The plan.
        return self._plan(found, replaced, resizes)

    # -- 1. state ------------------------------------------------------------------------

    def _state(self) -> Replaced:
        state = self.state
        state.namespaces.update(namespace_states(state.snapshot, state.policy, self.overrides))
        self.holds.hold_namespaces(state.namespaces)  # (past their budget: held as a whole)
        self.cluster_max = state.pool.cluster_max  # the most of each resource one pod takes on one empty node
        self.largest = state.pool.largest  # and the node that has it
        # Gangs admitted before that lost nodes to failures take new ones before anyone else.
        return replace(state.pool, state.snapshot.replacements, state.clusters)

    # -- 3. admission --------------------------------------------------------------------

    def _admit(self, ordered: list[PendingJob]) -> bool:
        """Every job in its turn: admitted, or recorded with its reason.  Whether they were
        recorded out of queue order (several passes, or preemptors first)."""
        state = self.state
        # With elastic quota, jobs within their guarantee go first (their claims), borrowers after them.
        passes = self._claims_first(ordered) if state.elastic.active else [ordered]
        leaving = self._leaving()
        # Preemptors go first, in queue order: jobs with victims in their grace period (which,
        # if they cannot start yet, hold the room they will start on: _consider_holding) and
        # jobs whose victims have just left.  (Which jobs waited for victims is what their last
        # status said: a job's old victims may still be queued long after it started, and been
        # preempted since itself.)
        freed_for = {job.id for job in ordered if job.preempting and job.id not in leaving}
        ahead: list[PendingJob] = []
        if freed_for or leaving:
            ahead, passes = self._preemptors_first(ordered, passes, freed_for, leaving)
        passes = self.holds.last(passes)  # (past their budget: after everyone else)
        ranks = {id(job): rank for rank, job in enumerate(ordered)} if len(passes) > 1 or freed_for or leaving else None
        consider, record = self._consider_holding if leaving else self._consider, self._record
        for job in ahead:
            outcome = consider(job)
            if outcome is not None:
                record(ranks[id(job)] if ranks is not None else 0, job, outcome)
        for jobs in passes:
            if state.policy.fair_share:
                self.fair_share.admit(jobs, ranks, consider, record)
            else:
                for rank, job in enumerate(jobs):
                    outcome = consider(job)
                    if outcome is not None:
                        record(rank if ranks is None else ranks[id(job)], job, outcome)
        return ranks is not None

    def _claims_first(self, ordered: list[PendingJob]) -> list[list[PendingJob]]:
        """Elastic quota's two passes: the jobs within their namespace's guarantee (its
        claims) and those of namespaces without one, then the borrowers."""
        elastic = self.state.elastic
        strict = {name: ns.policy.strict for name, ns in self.state.namespaces.items()}
        elastic.claim(ordered, self.now, strict)
        members, claimed = elastic.members, elastic.claimed
        first = [job for job in ordered if job.namespace not in members or job.id in claimed]
        return [first, [job for job in ordered if job.namespace in members and job.id not in claimed]]

    def _leaving(self) -> dict[int, list[RunningJob]]:
        """The preemptors whose victims (whole jobs, or elastic jobs' extra pods) are in their
        grace period, with those victims.  Such a job, when its turn comes and it cannot
        start yet, holds what it will start on: the victims' room and the free capacity it
        needs (_consider_holding)."""
        leaving = self.state.leaving
        for running in self.state.snapshot.running:
            if running.preempted_for is not None:
                leaving.setdefault(running.preempted_for, []).append(running)
            elif running.shrinking_for is not None and (pods := leaving_pods(running)) is not None:
                leaving.setdefault(running.shrinking_for, []).append(pods)
        if leaving:
            self.preemptor.foresee()
        return leaving

    @staticmethod
    def _preemptors_first(
        ordered: list[PendingJob],
        passes: list[list[PendingJob]],
        freed_for: set[int],
        leaving: dict[int, list[RunningJob]],
    ) -> tuple[list[PendingJob], list[list[PendingJob]]]:
        """The preemptors ahead of every pass, and the passes without them.  Those whose victims
        have just left (or ended on their own: ``freed_for``) go before those still waiting for
        theirs: the room that has just been freed is theirs.  Victims, while their preemptor
        still waits, come last in their pass: the room they left is their preemptor's first."""
        ahead = [job for job in ordered if job.id in freed_for]
        ahead += [job for job in ordered if job.id in leaving and job.id not in freed_for]
        waiting_ids = {job.id for job in ordered}
        first_ids = {job.id for job in ahead}
        return ahead, [
            [job for job in jobs if job.id not in first_ids and job.preempted_by not in waiting_ids]
            + [job for job in jobs if job.id not in first_ids and job.preempted_by in waiting_ids]
            for jobs in passes
        ]

    def _record(self, rank: int, job: PendingJob, outcome: Outcome) -> None:
        """A job that waits; its position comes in phase 5."""
        self.state.waiting.append((rank, job, outcome))

    def _consider_holding(self, job: PendingJob) -> Outcome | None:
        """A job whose victims are leaving waits for them and holds the room they leave,
        even if it could start now: starting early, it would take room that later
        preemptors were promised (the room its victims leave beyond its needs)."""
        if job.id in self.state.leaving and not (job.backoff_until is not None and job.backoff_until > self.now):
            held = self.preemptor.wait_for_victims(job)
            if held is not None:
                return held
        return self._consider(job)

    def _consider(self, job: PendingJob) -> Outcome | None:
        """Admit ``job`` (return None) or say why not; checks run cheapest first."""
        namespace = self.state.namespaces[job.namespace]
        # Capacity only shrinks during a cycle, so a job shaped like one that
        # already failed for capacity in this namespace fails the same way.
        request = job.topology
        shape: tuple[object, ...] = (id(job.demand), id(job.gang))
        if request is not None:  # (placed by its own rule: unlike jobs of its shape without one)
            shape = (*shape, request)
        if job.clusters is not None and self.state.clusters is not None:  # (the same for its cluster wish)
            shape = (*shape, job.clusters)
        bar = self.state.tide.barred(job) if self.state.tide is not None else None
        if bar is not None:  # (kept off some lent nodes: unlike jobs of its shape that may use them)
            shape = (*shape, bar.key)
        elastic = job.elastic
        if elastic:  # (admitted down to its minimum: unlike jobs of its shape with another)
            shape = (*shape, elastic_key(job.workload))
        failed = namespace.failed.get(shape)
        if failed is not None and (failed[0] is _NEVER_QUOTA or failed[0] is _NEVER_NODES):
            return failed
        # 3a. Lifecycle and policy holds that do not depend on capacity.
        if job.backoff_until is not None and job.backoff_until > self.now:
            return Reason.BACKING_OFF, {"until": job.backoff_until, "attempts": job.attempts}
        if job.pods_created is not None:
            return Reason.WAITING_FOR_PODS, {"created": job.pods_created, "total": job.workload.pods}
        if job.in_workflow and (held := self.holds.held(job)) is not None:
            return held
        if namespace.blocked_by is not None:
            return namespace.held_back  # the same for every job behind the head: built once
        if failed is not None:
            return failed
        if elastic:  # (a smaller gang has the same bound: the same lent nodes are barred)
            outcome = elastic_jobs.admit(job, lambda smaller: self._try(smaller, namespace, bar), self)
        else:
            outcome = self._try(job, namespace, bar)
        if outcome is not None and outcome[0] in _CAPACITY and "shadow_start" not in outcome[1]:
            # (A backfill refusal depends on the job's own estimate, not only its shape.)
            # Kept with the shape's objects, so their ids stay theirs while the entry lives.
            namespace.failed[shape] = outcome
            self.state.keep_alive.append((job.demand, job.gang))
        elif outcome is None and job.group is not None:
            self.holds.admit(job)
        return outcome

    def _try(self, job: PendingJob, namespace: NamespaceState, bar: Bar | None) -> Outcome | None:
        # 3b. Quota.
        short = None
        hard, free = namespace.hard, namespace.free
        if hard is not None and free is not None:  # (both or neither: whether it has a ResourceQuota)
            never, short = quota_check(job.demand, hard, free)
            if never is not None:
                return Reason.NEVER_FITS_QUOTA, {
                    "resource": never,
                    "needed": job.demand[never],
                    "hard": hard[never],
                }
        if self.state.node_fit:
            never_nodes = never_fits_nodes(job.gang, self.cluster_max, self.largest)
            if never_nodes is not None:
                return never_nodes
        if short is not None:
            outcome = self._quota_outcome(job, namespace, short)  # before the head's own hold changes free
            self._head_waits(job, namespace, nodes=False)
            return outcome
        shadow = self.backfill.shadows.get(job.namespace) if self.backfill.shadows else None
        if shadow is not None:  # behind a head's shadow: only if it does not delay the head
            backfill = shadow.allows(
                self.now, self.backfill.duration(job, namespace.policy.unknown_duration_s), job.demand
            )
            if backfill is None:
                key = next(
                    (key for key, amount in shadow.extra.items() if job.demand.get(key, 0) > amount),
                    next(iter(shadow.extra), ""),
                )
                return Reason.RESERVED_FOR_OLDER_JOB, {
                    "reserved_for": shadow.head,
                    "resource": key,
                    "shadow_start": shadow.start,
                }
        if namespace.policy.one_at_a_time and (namespace.in_flight is not None or namespace.admitted):
            if namespace.held_back is None:  # the same for every job of the namespace: built once
                namespace.held_back = Reason.WAITING_FOR_IN_FLIGHT, {"in_flight": namespace.in_flight}
            return namespace.held_back
        if self.state.elastic.active:
            cannot_borrow = self.state.elastic.check(job)
            if cannot_borrow is not None:
                if namespace.policy.strict and not namespace.head_seen and not self.probing:
                    namespace.head_seen = True
                    namespace.blocked_by = job.id
                    namespace.held_back = Reason.BLOCKED_BY_QUEUE_HEAD, {"head": job.id}
                return cannot_borrow
        # 3c. Gang placement on nodes (in one cluster, with several: clusters.py).
        placement = None
        cluster = self.gangs.quota_only_cluster(job) if self.state.clusters and not self.state.node_fit else ""
        if not isinstance(cluster, str):
            return cluster
        if self.state.node_fit:
            placed = self.gangs.place(job, bar)
            if not isinstance(placed, list):
                if placed[0] is not _NEVER_NODES:
                    self._head_waits(job, namespace, nodes=True, within=None if bar is None else bar.allowed)
                return placed
            if self.state.future is not None:  # what starts now is gone from the room holds count on too
                self.state.future.charge_pods((node, job.gang[group_number].requests) for group_number, node in placed)
            placement = pod_names(job, placed, self.state.pool.names)
            self.state.pool.cards.record(job.id, job.gang, placed)
            if self.state.clusters is not None:
                cluster = self.state.clusters.cluster_of(placement)
        # 3d. Admit: charge the quota; the pool has already charged the nodes.
        if shadow is not None and backfill is not None:  # (backfill is set whenever shadow is)
            shadow.take(backfill, job.demand)
            self.state.stats["backfilled"] += 1
        self._admitted(job, namespace, placement, cluster)
        return None

    def _admitted(
        self,
        job: PendingJob,
        namespace: NamespaceState,
        placement: tuple[tuple[str, int, str], ...] | None,
        cluster: str = "",
    ) -> None:
        if cluster and self.state.clusters is not None:
            self.state.clusters.charge(cluster, job.namespace, job.demand)
        if namespace.free is not None:
            free = namespace.free
            for key in free:
                free[key] -= job.demand.get(key, 0)
        namespace.admitted.append(job)
        borrowing = self.state.elastic.admit(job) if self.state.elastic.active else False
        borrowing = borrowing or job.namespace in self.holds.borrow_only
        self.admissions.append(Admission(job.id, job.namespace, placement, borrowing, cluster=cluster))
        self.admitted_jobs.append(job)

    def _quota_outcome(self, job: PendingJob, namespace: NamespaceState, short: str) -> Outcome:
        demand, hard, free, held = job.demand, namespace.hard, namespace.free, namespace.held
        assert hard is not None and free is not None  # short of quota: the namespace has one
        if held and not quota_check(demand, hard, {key: free[key] + held.get(key, 0) for key in free})[1]:
            return Reason.RESERVED_FOR_OLDER_JOB, {"reserved_for": namespace.reserved_for, "resource": short}
        return Reason.QUOTA_EXCEEDED, {
            "resource": short,
            "needed": demand[short],
            "free": free[short],
            "hard": hard[short],
        }

    def _head_waits(
        self, job: PendingJob, namespace: NamespaceState, nodes: bool, within: frozenset[int] | None = None
    ) -> None:
        """The first job of a namespace that cannot start: strict order blocks behind it,
        and if it has waited too long it reserves what it needs (on nodes ``within``)."""
        if namespace.head_seen or self.probing:
            return
        namespace.head_seen = True
        policy = namespace.policy
        if policy.strict:
            namespace.blocked_by = job.id
            namespace.held_back = Reason.BLOCKED_BY_QUEUE_HEAD, {"head": job.id}
        waited = self.now - job.submitted_at
        hold = False  # past hold_after_s: the shadow gives way to an outright hold
        if not nodes and namespace.free is not None and policy.backfill:
            hold_after = policy.hold_after_s
            if hold_after is None or waited < hold_after:
                # Short of quota: a shadow reservation that later jobs may backfill around.
                if (
                    self.backfill.reserve(job, namespace.free, namespace.admitted, policy.unknown_duration_s)
                    is not None
                ):
                    namespace.reserved_for = job.id
                    self.state.stats["backfill_shadows"] += 1
                    return
                # No expected end makes room for it: the rule for every head, below.
            else:
                hold = True
        after = policy.reservation_after_s
        if not hold and (after is None or waited < after):
            return
        namespace.reserved_for = job.id
        if namespace.free is not None:
            self.state.stats["quota_reservations"] += 1
            for key in namespace.free:
                amount = job.demand.get(key, 0)
                if amount:
                    namespace.free[key] -= amount
                    namespace.held[key] = namespace.held.get(key, 0) + amount
        # Node reservations hold capacity every namespace shares: the global policy caps them.
        if nodes and self.state.stats["node_reservations"] < self.state.policy.max_reservations:
            if self.state.pool.reserve(job.id, job.gang, within):
                self.state.stats["node_reservations"] += 1

    # -- 6. estimated start times ----------------------------------------------------------

    def _estimate(self, queues: Queues) -> tuple[dict[int, float], dict[int, str], str]:
        """Play the queues forward from the capacity this plan leaves."""
        snapshot, admitted, estimate = self.state.snapshot, self.admitted_jobs, self.backfill.estimate
        quota_free, cluster_free = self.state.left_free(admitted)
        starts, notes, otherwise = forecast(
            snapshot, queues, admitted, quota_free, cluster_free, self.eta_horizon_s, estimate
        )
        found, waits = forecast_dependents(
            snapshot,
            self.holds.dependents,
            admitted,
            starts,
            lambda j: estimate(j.workload, j.namespace, j.expected_duration),
        )
        return {**starts, **found}, {**notes, **waits}, otherwise

    # -- 7. the plan ---------------------------------------------------------------------

    def _plan(self, statuses: dict[int, PendingStatus], replaced: Replaced, resizes: dict[int, Resize]) -> Plan:
        state = self.state
        stats = state.stats
        stats.update(state.pool.stats, admitted=len(self.admissions), preemptions=len(state.preemptions))
        return Plan(
            tuple(self.admissions),
            statuses,
            state.policy.name,
            stats,
            tuple(state.preemptions),
            replaced.placements,
            replaced.evicted,
            state.pool.cards.placements,
            resizes,
        )
