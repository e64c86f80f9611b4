"""Phase 4 of a plan and the holds around it: preemption (see planner.py).

With jobs leaving (victims in their grace period) the cycle keeps a second view of the
nodes, ``future``: the nodes as they will be once each job waiting for its victims has them
gone and holds its room there (the room they leave beyond its need goes to later
preemptors).  Jobs that start now take room in both views, and ``pool`` never has more
than ``future``.  The victims themselves are chosen by preemption.py.
"""

from __future__ import annotations

from collections.abc import Callable

from . import defrag, shrink
from .cycle_state import CycleState
from .fit import NodeFailure, NodePool
from .lost_work import gpu_seconds_lost, last_checkpoint, losing, protected
from .preemption import MOVE, PRIORITY, RECLAIM, Preemption, victim_order
from .quota_fit import quota_check
from .reasons import Outcome, Reason
from .snapshot import Node, PendingJob, RunningJob

# Waiting for room on the nodes: kept off lent nodes it would fit with is waiting for room on the others.
_NODES = frozenset({Reason.NO_NODE_FITS, Reason.OUTLASTS_LENT_POOL})
# Gangs given moves in one cycle (defragment): each plan costs placements, and a gang not
# served this cycle is the next one's.
MOVE_PLANS_PER_CYCLE = 2
# ... and searched for at most this many (each copies the pool): a long queue of gangs that no
# move helps costs a cycle no more than this.
MOVE_SEARCHES_PER_CYCLE = 8


class Preemptor:
    """Phase 4 of a plan, and the holds of the jobs waiting for victims (after Kueue's
    ``preemption.Preemptor``): who is preempted for whom, with the cycle's state
    (CycleState) it reads and charges."""

    def __init__(self, state: CycleState):
        self.state = state
        self.node_number: dict[str, int] = {}  # schedulable node name -> its number in the pool
        self.reassigned: set[int] = set()  # spare victims taken over by another preemptor

    def foresee(self) -> None:
        if self.state.node_fit:  # (a job's own victims leave its room in it when it holds)
            self.state.future = NodePool(self.state.snapshot.nodes, self.state.snapshot.in_flight, self.state.strategy)

    def _pods(self, victims: list[RunningJob]) -> list[tuple[int, tuple[tuple[str, int], ...]]]:
        """The victims' pods as (node number, requests), on schedulable nodes."""
        if not self.node_number:
            self.node_number = {self.state.pool.names[number]: number for number in self.state.pool.schedulable}
        pods = []
        for victim in victims:
            requests = {group.role: group.requests for group in victim.gang}
            for role, _, node in victim.placements:
                number = self.node_number.get(node)
                if number is not None and role in requests:
                    pods.append((number, requests[role]))
        return pods

    def preempt(self) -> None:
        """For each waiting job in turn (those within their guarantee first): a job that
        reclaims its guarantee from borrowers, or outranks jobs of its own namespace,
        gets the fewest victims that let it fit (preemption.py), counting its victims
        already leaving as gone; so an unchanged world preempts nothing more."""
        elastic = self.state.elastic
        by_priority = any(ns.policy.preempt_lower_priority for ns in self.state.namespaces.values())
        if not (elastic.active or by_priority) or not self.state.waiting:
            return
        candidates = self._candidates()
        # Jobs whose extra pods may go first (shrink.py): partly leaving ones keep their counts.
        shrinkable = [job for job in candidates if job.elastic and job.preempted_for is None]
        shrinking = {job.id: dict(job.counts) for job in self.state.snapshot.running if job.shrinking_for is not None}
        if self.state.future is None:  # nothing is leaving: the nodes as they are are the future
            self.state.future = self.state.pool
        taken: set[int] = set()
        # A search that failed fails again for a job of the same shape, namespace and
        # priority: room and candidates only shrink during the phase.
        failed: set[tuple[str, int, int, str, bool, tuple[int, ...] | None]] = set()
        for _, job, outcome in self.state.waiting:
            if job.id in self.state.preempting:  # holding room its victims leave
                continue
            pools = self._pools(job, outcome[0], candidates, shrinkable, taken)
            if pools is None:
                continue
            cause, pool, extras = pools

            def fits(victims: list[RunningJob], job: PendingJob = job) -> bool:
                return self.fits_after(job, victims, commit=False)

            # (A job with victims of its own leaving is unlike the others of its shape; so is
            # one kept off other lent nodes.)
            bar = self.state.tide.barred(job) if self.state.tide is not None else None
            shape = (job.namespace, id(job.gang), job.priority, cause, elastic.is_claimed(job), bar and bar.key)
            alike = job.id not in self.state.leaving
            if alike and shape in failed:
                continue
            found = shrink.choose(extras, pool, fits, self._may_take(cause), self._lost)
            if found is None:
                if alike:
                    failed.add(shape)
                    self.state.keep_alive.append(job.gang)
                continue
            chosen, keep = found
            self._take(job, cause, chosen, keep, shrinking, taken)

    def defragment(self) -> None:
        """Phase 4b: moves (defrag.py), with the snapshot's rules.  Each waiting gang, in queue
        order, that waits for nodes while enough GPUs are free, only scattered, gets the
        fewest running jobs that checkpoint to move so that it fits and each of them fits
        again at once; they are its victims (cause MOVE: told, they checkpoint and leave,
        then are placed again, after it), it holds the room they leave.  At most
        MOVE_PLANS_PER_CYCLE gangs a cycle (of MOVE_SEARCHES_PER_CYCLE searched), and no job is
        moved for two."""
        rules = self.state.snapshot.defrag
        if rules is None or not self.state.node_fit or not self.state.waiting:
            return
        if self.state.clusters is not None:  # (moves plan on one cluster's nodes: not yet with several)
            return
        snapshot, now = self.state.snapshot, self.state.snapshot.now
        taken = {preemption.victim for preemption in self.state.preemptions}
        running = {job.id: job for job in snapshot.running if job.id not in taken}
        if not any(defrag.movable(job, now, rules.window_s) for job in running.values()):
            return  # (nothing may move: no search at all)
        plans = tries = 0
        for _, job, outcome in self.state.waiting:
            if plans >= MOVE_PLANS_PER_CYCLE or tries >= MOVE_SEARCHES_PER_CYCLE:
                break
            if outcome[0] is not Reason.NO_NODE_FITS or job.id in self.state.preempting:
                continue
            future = self.state.future or self.state.pool
            if not defrag.scattered(future, job.gang):
                continue
            tries += 1
            moves = defrag.plan_moves(future, job, list(running.values()), now, rules, snapshot.topology_levels)
            if not moves:
                continue
            movers = [running[move.job] for move in moves]
            self.state.future = future
            if not self.fits_after(job, movers, commit=True, come_back=True):
                continue
            for move, mover in zip(moves, movers, strict=True):
                del running[move.job]
                self.state.preemptions.append(
                    Preemption(
                        move.job,
                        move.namespace,
                        job.id,
                        MOVE,
                        {},
                        move.lost_s,
                        move.lost_gpu_s,
                        last_checkpoint(mover, now),
                    )
                )
            self.state.preempting[job.id] = Reason.PREEMPTING, {"victims": [move.job for move in moves]}
            plans += 1

    def _candidates(self) -> list[RunningJob]:
        """Who may be preempted, in victim order: first the spare victims, those leaving for a
        job that started, is gone, or cannot use them now (it holds nothing): they leave
        anyway, so they are the first victims for anyone else (their preemptor changes, not
        their time); then the running jobs no one preempts yet, within the preemption limit and
        past their minimum run time (lost_work.protected)."""
        limit, now = self.state.snapshot.preemption_limit, self.state.snapshot.now
        spare = victim_order(
            (
                victim
                for preemptor, victims in self.state.leaving.items()
                if preemptor not in self.state.preempting
                for victim in victims
            ),
            now,
        )
        return spare + victim_order(
            (
                job
                for job in self.state.snapshot.running
                if job.preempted_for is None
                and job.shrinking_for is None
                and job.preemptible
                and (limit is None or job.preemptions < limit)
                and not protected(job, now)
            ),
            now,
        )

    def _pools(
        self,
        job: PendingJob,
        reason: Reason,
        candidates: list[RunningJob],
        shrinkable: list[RunningJob],
        taken: set[int],
    ) -> tuple[str, list[RunningJob], list[RunningJob]] | None:
        """Why ``job`` may preempt (RECLAIM or PRIORITY), the jobs it may preempt and those whose
        extra pods it may take; None if it may preempt no one.  Reclaim: a job within its
        guarantee, waiting for nodes, from other namespaces' borrowers of its cohort.
        Priority: in its own namespace, from jobs of lower priority (extra pods: of no higher)."""
        elastic = self.state.elastic
        namespace = self.state.namespaces[job.namespace]
        if elastic.is_claimed(job) and reason in _NODES and self.state.node_fit:
            cohort = elastic.cohort_of(job.namespace)
            pool = [
                victim
                for victim in candidates
                if victim.borrowing
                and victim.id not in taken
                and victim.namespace != job.namespace
                and elastic.cohort_of(victim.namespace) == cohort
            ]
            lenders = {victim.id for victim in pool}
            return RECLAIM, pool, [victim for victim in shrinkable if victim.id in lenders]
        if namespace.policy.preempt_lower_priority and (
            reason == Reason.QUOTA_EXCEEDED or reason in _NODES or reason == Reason.CANNOT_BORROW
        ):
            pool = [
                victim
                for victim in candidates
                if victim.namespace == job.namespace and victim.priority < job.priority and victim.id not in taken
            ]
            extras = [
                victim
                for victim in shrinkable
                if victim.namespace == job.namespace and victim.priority <= job.priority and victim.id not in taken
            ]
            return PRIORITY, pool, extras
        return None

    def _take(
        self,
        job: PendingJob,
        cause: str,
        chosen: list[RunningJob],
        keep: dict[int, dict[str, int]],
        shrinking: dict[int, dict[str, int]],
        taken: set[int],
    ) -> None:
        """``job`` preempts ``chosen`` (shrinking those in ``keep`` to their counts there) and
        holds the room they and its victims already leaving make."""
        self.fits_after(job, chosen, commit=True)
        now = self.state.snapshot.now
        taken.update(victim.id for victim in self.state.leaving.get(job.id, ()))  # what it counts on
        for victim in chosen:
            taken.add(victim.id)
            if victim.preempted_for is not None or victim.shrinking_for is not None:
                self.reassigned.add(victim.id)
            shrink_to = keep.get(victim.id) or shrinking.get(victim.id, {})
            self.state.preemptions.append(
                Preemption(victim.id, victim.namespace, job.id, cause, shrink_to, *losing(victim, shrink_to, now))
            )
        chosen_ids = {victim.id for victim in chosen}
        victims = [
            v for v in self.state.leaving.get(job.id, ()) if v.id not in self.reassigned and v.id not in chosen_ids
        ]
        victims += chosen
        self.state.preempting[job.id] = Reason.PREEMPTING, {"victims": [victim.id for victim in victims]}

    def _lost(self, job: RunningJob) -> float:
        """What preempting it now loses, in GPU-seconds (lost_work.py), for the exchange of
        a costly victim (preemption.choose_victims)."""
        return gpu_seconds_lost(job, self.state.snapshot.now)

    def _may_take(self, cause: str) -> Callable[[RunningJob, list[RunningJob]], bool]:
        return self.state.elastic.may_take if cause == RECLAIM else _always

    def wait_for_victims(self, job: PendingJob) -> Outcome | None:
        """The Preempting outcome of a job that fits once what is leaving has left, holding
        that room (no later job in the cycle takes it), else None."""
        if not self.fits_after(job, [], commit=True):
            return None
        outcome: Outcome = Reason.PREEMPTING, {"victims": [victim.id for victim in self.state.leaving[job.id]]}
        self.state.preempting[job.id] = outcome
        return outcome

    def _place_preferring(
        self,
        future: NodePool,
        pods: list[tuple[int, tuple[tuple[str, int], ...]]],
        job: PendingJob,
        within: frozenset[int] | None,
    ) -> list[tuple[int, int]] | None:
        """``job``'s gang on ``future`` as it is now (on nodes ``within``), on the nodes ``pods``
        leave first: so that a hold takes no more of what is free now than it must.  None if
        it does not fit."""
        first = list(dict.fromkeys(number for number, _ in pods))
        numbers = first + [number for number in future.schedulable if number not in set(first)]
        if within is not None:
            numbers = [number for number in numbers if number in within]
        nodes = [
            Node(
                future.names[n],
                future.free[n],
                {},
                self.state.snapshot.nodes[n].labels,
                self.state.snapshot.nodes[n].taints,
            )
            for n in numbers
        ]
        placed = NodePool(nodes, strategy="first").place(job.gang, job.totals)
        if isinstance(placed, NodeFailure):
            return None
        return [(group, numbers[index]) for group, index in placed]

    def fits_after(self, job: PendingJob, victims: list[RunningJob], commit: bool, come_back: bool = False) -> bool:
        """Whether ``job`` fits its quota, its elastic share and the nodes once its leaving
        victims and ``victims`` have left (on nodes, also in room others' victims leave
        beyond what their preemptors hold); with ``commit``, hold that room for it.
        ``come_back``: ``victims`` are moved, not preempted: they leave nodes, not quota."""
        namespace = self.state.namespaces[job.namespace]
        chosen = {victim.id for victim in victims}
        mine = [v for v in self.state.leaving.get(job.id, ()) if v.id not in self.reassigned and v.id not in chosen]
        gone = [*mine, *victims]
        own = [victim for victim in (mine if come_back else gone) if victim.namespace == job.namespace]
        if namespace.free is not None and namespace.hard is not None:
            free = dict(namespace.free)
            for key in free:
                free[key] += self._freed(job.namespace, key, own)
            if quota_check(job.demand, namespace.hard, free)[1] is not None:
                return False
        if self.state.elastic.active and self.state.elastic.check(job, without=own) is not None:
            return False
        if self.state.node_fit:
            future = self.state.future
            assert future is not None  # (set whenever something leaves, and by _preempt)
            pods = self._pods(gone)
            tide = self.state.tide
            bar = tide.barred(job) if tide is not None else None  # lent nodes it may not use
            within = None if bar is None else bar.allowed
            if not commit:
                if not any(
                    not isinstance(future.place_freeing(job.gang, job.totals, pods, False, nodes), NodeFailure)
                    for nodes in self._within_a_cluster(job, within)
                ):
                    return False
            else:
                future.free_pods(pods)
                placed = next(
                    (
                        found
                        for nodes in self._within_a_cluster(job, within)
                        if (found := self._place_preferring(future, pods, job, nodes)) is not None
                    ),
                    None,
                )
                if placed is None:
                    future.charge_pods(pods)
                    return False
                future.charge_pods((number, job.gang[group].requests) for group, number in placed)
                if future is not self.state.pool:
                    self.state.pool.cap_at(future, (number for _, number in placed))
        if commit:  # a hold: what its own namespace's victims free is its; beyond that, free quota now
            if namespace.free is not None:
                for key in namespace.free:
                    freed = self._freed(job.namespace, key, own)
                    namespace.free[key] -= max(job.demand.get(key, 0) - freed, 0)
            if self.state.elastic.active:
                self.state.elastic.admit(job, without=own)
        return True

    def _within_a_cluster(self, job: PendingJob, within: frozenset[int] | None) -> list[frozenset[int] | None]:
        """Where the gang may be placed, one cluster at a time (clusters.py); one cluster: `within`."""
        clusters = self.state.clusters
        if clusters is None:
            return [within]
        found = clusters.candidates(job.namespace, job.demand, job.totals, job.clusters)
        if not isinstance(found, list):
            return []
        return [nodes if within is None else nodes & within for _, nodes in found]

    def _freed(self, namespace: str, key: str, victims: list[RunningJob]) -> int:
        """The quota ``victims`` of ``namespace`` give back: their demand, but never more than
        the namespace used at the snapshot (a victim whose pods have already ended, its end not
        yet recorded, counts in neither: crediting it again let the victims that had left take
        back the room their preemptor was holding)."""
        freed = sum(victim.demand.get(key, 0) for victim in victims)
        quota = self.state.snapshot.quotas.get(namespace)
        return freed if quota is None else min(freed, quota.used.get(key, 0))


def _always(job: RunningJob, chosen: list[RunningJob]) -> bool:
    return True
