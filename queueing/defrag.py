"""Defragmentation (issue 48): move running jobs that checkpoint, so that a waiting gang fits.

A gang waits for nodes (NoNodeFits) while enough GPUs are free in the cluster, only scattered:
no few nodes hold its pods.  Moving a few running jobs joins the scattered GPUs.  KAI-Scheduler's
consolidation does this by evicting and restarting jobs with no regard for their checkpoints, so a
job may lose hours of work to let another start.  Here a move is planned only when it costs
little and is sure to work:

- only jobs that checkpoint move (a declared period, a checkpoint on notice, or one reported):
  each loses at most the work since its last checkpoint (lost_work.py), and the movers of one
  plan lose at most ``DefragRules.limit_gpu_s`` GPU-seconds together;
- a job moves at most once per ``DefragRules.window_s`` (``RunningJob.moved_at``), is not
  leaving already (a preemption's or shrink's victim), may be taken back at all
  (``preemptible``) and is past its minimum run time (lost_work.protected);
- a move is not a preemption: the mover comes back at once, on other nodes.  So a plan holds
  only when, at once, the waiting gang fits with the movers' pods gone and every mover's whole
  gang fits again on what is left, each placed by the pool's own rules (NodePool.place, or the
  topology its workload asks for: node selectors, taints, affinity, domains); a mover is never
  split, nor left without a place.  A gang short of GPUs in total is preemption's case, not
  this one's (moves do not add capacity);
- few movers: candidates (jobs whose leaving would open a node for a pod of the gang: no
  chains of moves) in order of the fewest GPU-seconds lost (then the fewest GPUs), the
  shortest run of them that works, then every mover it can do without put back (as
  preemption.choose_victims does), at most ``max_movers`` of them and at most
  ``max_candidates`` candidates looked at, so the cost is bounded inside a planning cycle
  (each trial counts GPU slots first, so a hopeless one costs no placement).

Pure: ``plan_moves`` works on a copy of the pool it is given (``own_pool``), which it leaves as
it was; ``scattered`` is the cheap test a planner asks first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .cards import CardPod, SharedCards
from .fit import NodeFailure, NodePool
from .lost_work import gpus_held, protected, seconds_lost
from .node_views import placing_order, view
from .snapshot import Node, PendingJob, PodGroup, RunningJob
from .topology import Topology
from .topology_request import TopologyRequest, request_of

Requests = tuple[tuple[str, int], ...]
Placed = list[tuple[int, int]]  # (pod group number, node number) per pod


@dataclass(frozen=True)
class Move:
    """Move running job ``job`` (of ``namespace``) to make room for waiting job ``for_job``:
    ``to`` is its new placement as (role, index, node) per pod, like RunningJob.placements (a
    pod that stays on its node keeps its index); ``lost_s`` and ``lost_gpu_s`` the work it
    redoes, in seconds and GPU-seconds, if it stops now (lost_work.py)."""

    job: int
    namespace: str
    for_job: int
    to: tuple[tuple[str, int, str], ...]
    lost_s: float
    lost_gpu_s: float


@dataclass(frozen=True)
class DefragRules:
    """``limit_gpu_s``: the most GPU-seconds the movers for one waiting gang may lose together;
    ``window_s``: a job moved less than this ago does not move again; ``max_movers``: the most
    jobs moved for one gang; ``max_candidates``: the most candidates looked at (the cost)."""

    limit_gpu_s: float
    window_s: float
    max_movers: int = 4
    max_candidates: int = 32


def is_gpu(resource: str) -> bool:
    """A device counted as GPUs: every resource named ".../gpu" (as usage.resources counts)."""
    return resource.endswith("/gpu")


def checkpoints(job: RunningJob) -> bool:
    """Whether the job saves its work: a period declared, a checkpoint on notice, or one reported.
    (A period of 0 or less declares none: lost_work ignores it.)"""
    every = job.checkpoint_every_s
    return (
        (every is not None and every > 0) or job.checkpoint_on_notice_s is not None or job.checkpointed_at is not None
    )


def movable(job: RunningJob, now: float, window_s: float) -> bool:
    """Rule 1: it checkpoints, may be taken back, is not leaving (preempted or shrinking), is past
    its minimum run time and was not moved within ``window_s``."""
    return (
        checkpoints(job)
        and job.preemptible
        and job.preempted_for is None
        and job.shrinking_for is None
        and not protected(job, now)
        and (job.moved_at is None or now - job.moved_at >= window_s)
    )


def own_pool(pool: NodePool) -> NodePool:
    """A pool of its own with ``pool``'s nodes as ``pool`` has them now (what the cycle charged
    included, reservations as charges), for trials that must not touch ``pool``.  A node the
    cycle has not changed is its very Node object (its derived view is cached); a changed one is
    a Node whose allocated makes the free amounts ``pool`` has, its shared cards as ``pool``
    left them."""
    nodes: list[Node] = []
    for number, node in enumerate(pool.nodes):
        free = pool.free[number]
        if free is view(node).free:
            nodes.append(node)
            continue
        capacity = pool.capacity[number]
        allocated = {name: capacity.get(name, 0) - amount for name, amount in free.items()}
        cards = node.cards
        left = pool.cards.free.get(number)
        if cards is not None and left is not None:
            used = (total - remaining for total, remaining in zip(cards.memory, left, strict=True))
            pods = tuple(CardPod(memory, card) for card, memory in enumerate(used) if memory > 0)
            cards = SharedCards(cards.memory, pods, cards.model)
        nodes.append(replace(node, allocated=allocated, cards=cards))
    return NodePool(nodes, strategy=pool.strategy)


def _gpus(totals: Mapping[str, int]) -> dict[str, int]:
    return {name: amount for name, amount in totals.items() if is_gpu(name) and amount > 0}


def scattered(pool: NodePool, gang: tuple[PodGroup, ...]) -> bool:
    """The cheap test before plan_moves: the gang asks for GPUs, the pool has enough of each
    free in total, and they are not on few enough nodes: counting GPUs alone, its pods (the
    largest first, each group on the nodes it may use, tightest first) do not all find a node.
    False when moves cannot help (not enough in total) or GPUs are not what it waits for.  Reads
    the pool (its memo of the nodes each kind of pod may use aside)."""
    totals: dict[str, int] = {}
    for group in gang:
        for name, amount in group.requests:
            if is_gpu(name) and amount > 0:
                totals[name] = totals.get(name, 0) + amount * group.count
    if not totals or any(pool.totals.get(name, 0) < amount for name, amount in totals.items()):
        return False
    asking = [group for group in gang if any(is_gpu(name) and amount > 0 for name, amount in group.requests)]
    if len(asking) == 1:  # (the common gang: its GPU pods alike, so the order of nodes does not matter)
        group = asking[0]
        asks = [(name, amount) for name, amount in group.requests if is_gpu(name) and amount > 0]
        left = group.count
        for node in pool.eligible(group.constraints).nodes:
            left -= min(max(pool.free[node].get(name, 0), 0) // amount for name, amount in asks)
            if left <= 0:
                return False
        return True
    taken: dict[int, dict[str, int]] = {}  # GPUs this count has given pods, per node
    for number in placing_order(gang):
        group = gang[number]
        asks = [(name, amount) for name, amount in group.requests if is_gpu(name) and amount > 0]
        if not asks:
            continue
        primary = asks[0][0]

        def room(node: int, asks: list[tuple[str, int]] = asks) -> int:
            took = taken.get(node, {})
            return min(max(pool.free[node].get(name, 0) - took.get(name, 0), 0) // amount for name, amount in asks)

        left = group.count
        nodes = pool.eligible(group.constraints).nodes
        for node in sorted(nodes, key=lambda n: (pool.free[n].get(primary, 0) - taken.get(n, {}).get(primary, 0), n)):
            pods = min(room(node), left)
            if pods:
                took = taken.setdefault(node, {})
                for name, amount in asks:
                    took[name] = took.get(name, 0) + pods * amount
                left -= pods
                if not left:
                    break
        if left:
            return True
    return False


@dataclass(frozen=True)
class _Candidate:
    job: RunningJob
    pods: tuple[tuple[int, Requests], ...]  # its pods as (node number, requests)
    request: TopologyRequest | None
    lost_s: float
    lost_gpu_s: float
    gpus: float


class _Trials:
    """Trial placements on a pool of defrag's own, each undone before the next."""

    def __init__(self, pool: NodePool, levels: Sequence[str]):
        self.pool = pool
        self.topology = Topology(pool, levels)
        self.numbers = {pool.names[number]: number for number in pool.schedulable}
        self._base: dict[tuple[str, int], int] = {}  # (GPU resource, pod size) -> _slots
        self.checks = 0

    def _place(
        self, gang: tuple[PodGroup, ...], totals: Mapping[str, int], request: TopologyRequest | None
    ) -> Placed | None:
        if request is None:
            placed = self.pool.place(gang, totals)
        else:
            placed = self.topology.place(gang, totals, request)
        return None if isinstance(placed, NodeFailure) else placed

    def candidate(self, job: RunningJob, now: float) -> _Candidate | None:
        """The job as a mover, or None: it holds no GPUs, or some of its pods are on no
        schedulable node it is known to be on (what moving it frees is not known)."""
        gpus = gpus_held(job)
        if gpus <= 0:
            return None
        requests = {group.role: group.requests for group in job.gang}
        counts = {group.role: group.count for group in job.gang}
        placed = dict.fromkeys(counts, 0)
        pods = []
        for role, _, node in job.placements:
            number = self.numbers.get(node)
            if number is None or role not in requests:
                return None
            pods.append((number, requests[role]))
            placed[role] += 1
        if placed != counts:
            return None
        lost_s = seconds_lost(job, now)  # (GPU-seconds: lost_work.gpu_seconds_lost, its GPUs found once)
        return _Candidate(job, tuple(pods), request_of(job.workload), lost_s, lost_s * gpus, gpus)

    def _slots(self, resource: str, size: int) -> int:
        """How many pods of ``size`` of the GPU ``resource`` the nodes hold, counted node by node
        (the pool as it is between trials)."""
        key = (resource, size)
        found = self._base.get(key)
        if found is None:
            free = self.pool.free
            found = self._base[key] = sum(max(free[n].get(resource, 0), 0) // size for n in self.pool.schedulable)
        return found

    def _room(self, gangs: Sequence[tuple[PodGroup, ...]], freed: Sequence[tuple[int, Requests]]) -> bool:
        """Whether these gangs' GPU pods could all have room with the ``freed`` pods gone, by
        counting alone: for each GPU resource and each size ``t`` a pod asks, the pods asking at
        least ``t`` are no more than the nodes hold pods of ``t`` (a node with ``f`` free holds
        ``f // t``).  Needed for any placement, so a trial that fails it fails anyway; it costs
        no placement (a gang of many pods fails only at its last pod)."""
        asked: dict[str, list[int]] = {}
        for gang in gangs:
            for group in gang:
                for name, amount in group.requests:
                    if is_gpu(name) and amount > 0:
                        asked.setdefault(name, []).extend([amount] * group.count)
        gained: dict[int, dict[str, int]] = {}
        for number, requests in freed:
            for name, amount in requests:
                if is_gpu(name):
                    more = gained.setdefault(number, {})
                    more[name] = more.get(name, 0) + amount
        free = self.pool.free
        for name, sizes in asked.items():
            for size in set(sizes):
                slots = self._slots(name, size)
                for number, more in gained.items():
                    if more.get(name):
                        now = free[number].get(name, 0)
                        slots += max(now + more[name], 0) // size - max(now, 0) // size
                if sum(1 for amount in sizes if amount >= size) > slots:
                    return False
        return True

    def fits(self, waiting: PendingJob, movers: Sequence[_Candidate]) -> bool:
        """Whether the waiting gang fits with the movers' pods gone (the movers not placed again)."""
        self.checks += 1
        freed = [pod for mover in movers for pod in mover.pods]
        if not self._room([waiting.gang], freed):
            return False
        self.pool.free_pods(freed)
        placed = self._place(waiting.gang, waiting.totals, waiting.topology)
        if placed is not None:
            self.pool.unplace(waiting.gang, placed)
        self.pool.charge_pods(freed)
        return placed is not None

    def moves(self, waiting: PendingJob, movers: Sequence[_Candidate]) -> dict[int, Placed] | None:
        """Each mover's new placement (by job id) when, with the movers' pods gone, the waiting
        gang fits and then every mover's whole gang (the largest first) fits on what is left;
        else None.  The pool is left as it was."""
        self.checks += 1
        freed = [pod for mover in movers for pod in mover.pods]
        if not self._room([waiting.gang, *(mover.job.gang for mover in movers)], freed):
            return None
        self.pool.free_pods(freed)
        done: list[tuple[tuple[PodGroup, ...], Placed]] = []
        found: dict[int, Placed] = {}
        placed = self._place(waiting.gang, waiting.totals, waiting.topology)
        fits = placed is not None
        if placed is not None:
            done.append((waiting.gang, placed))
            for mover in sorted(movers, key=lambda m: -m.gpus):  # (stable: candidate order among equals)
                job = mover.job
                again = self._place(job.gang, job.totals, mover.request)
                if again is None:
                    fits = False
                    break
                done.append((job.gang, again))
                found[job.id] = again
        for gang, undo in reversed(done):
            self.pool.unplace(gang, undo)
        self.pool.charge_pods(freed)
        return found if fits else None


def plan_moves(
    pool: NodePool,
    waiting: PendingJob,
    running: Sequence[RunningJob],
    now: float,
    rules: DefragRules,
    levels: Sequence[str] = (),
) -> list[Move] | None:
    """The moves that let ``waiting`` fit on ``pool`` (as the cycle has it: left untouched), in
    candidate order; None when it fits already, when the pool lacks what it needs in total (no
    move adds capacity), or when no set of movers within the rules works.  ``levels``: the
    snapshot's topology levels, for gangs that prefer a domain (topology.py)."""
    if not _gpus(waiting.totals):
        return None  # GPUs are what defragmentation joins
    if any(pool.totals.get(name, 0) < amount for name, amount in waiting.totals.items()):
        return None
    trials = _Trials(own_pool(pool), levels)
    if trials.fits(waiting, []):
        return None
    chosen = _choose(trials, waiting, _candidates(trials, waiting, running, now, rules))
    while chosen is not None:
        placed = trials.moves(waiting, chosen)
        assert placed is not None  # (_choose and _put_back checked this very set)
        to = {m.job.id: _new_placement(m.job, placed[m.job.id], trials.pool.names) for m in chosen}
        moving = [m for m in chosen if to[m.job.id] != tuple(sorted(m.job.placements))]
        if len(moving) == len(chosen):
            break
        # One that lands where it was does not move: the others, if they do without it (rare:
        # the trial places the waiting gang with its pods gone).  If not, nothing this time.
        chosen = _put_back(trials, waiting, moving) if moving and trials.moves(waiting, moving) is not None else None
    if chosen is None or len(chosen) > rules.max_movers:
        return None
    return [Move(m.job.id, m.job.namespace, waiting.id, to[m.job.id], m.lost_s, m.lost_gpu_s) for m in chosen]


def try_moves(
    pool: NodePool, waiting: PendingJob, movers: Sequence[RunningJob], now: float, levels: Sequence[str] = ()
) -> dict[int, tuple[tuple[str, int, str], ...]] | None:
    """The check plan_moves makes of a set of movers, on its own copy of ``pool``: each mover's
    new placement (by job id) when, with the movers' pods gone, ``waiting`` fits and then every
    mover fits again, whole; None if not, or if a mover holds no GPUs or is not known to be on
    the pool's schedulable nodes.  (Rule 1 and the limits are not asked: a caller that keeps a
    plan across cycles, while its movers checkpoint, can tell whether it still holds.)"""
    trials = _Trials(own_pool(pool), levels)
    found = [trials.candidate(job, now) for job in movers]
    candidates = [candidate for candidate in found if candidate is not None]
    if len(candidates) != len(found):
        return None
    placed = trials.moves(waiting, candidates)
    if placed is None:
        return None
    return {c.job.id: _new_placement(c.job, placed[c.job.id], trials.pool.names) for c in candidates}


def _candidates(
    trials: _Trials, waiting: PendingJob, running: Sequence[RunningJob], now: float, rules: DefragRules
) -> list[_Candidate]:
    """The movable jobs holding GPUs that free room the waiting gang can use, the fewest
    GPU-seconds lost first, then the fewest GPUs, seconds lost and id: of the first
    ``max_candidates``, those that together lose no more than the limit.

    Room it can use: some pod of the job is on a node where a pod of the waiting gang (of a
    group that may use the node) would fit once every movable job there had left.  A job
    elsewhere could only make way for another mover (a chain of moves), and taking such jobs
    first, as the cheapest, would crowd out those that open a node within ``max_candidates``."""
    pool = trials.pool
    movers = []
    leaving: dict[int, dict[str, int]] = {}  # per node, what every movable job there frees
    for job in running:
        if movable(job, now, rules.window_s) and (candidate := trials.candidate(job, now)) is not None:
            movers.append(candidate)
            for number, requests in candidate.pods:
                freed = leaving.setdefault(number, {})
                for name, amount in requests:
                    freed[name] = freed.get(name, 0) + amount
    opened: set[int] = set()
    for group in waiting.gang:
        eligible = set(pool.eligible(group.constraints).nodes)
        for number, freed in leaving.items():
            free = pool.free[number]
            if number in eligible and all(free.get(r, 0) + freed.get(r, 0) >= a for r, a in group.requests):
                opened.add(number)
    found = [candidate for candidate in movers if any(number in opened for number, _ in candidate.pods)]
    found.sort(key=lambda c: (c.lost_gpu_s, c.gpus, c.lost_s, c.job.id))
    # The first candidates, taken while what they lose together stays within the limit (in
    # this order, once one would pass it every later one would too).
    taken: list[_Candidate] = []
    spent = 0.0
    for candidate in found[: max(rules.max_candidates, 0)]:
        if spent + candidate.lost_gpu_s > rules.limit_gpu_s:
            break
        taken.append(candidate)
        spent += candidate.lost_gpu_s
    return taken


def _choose(trials: _Trials, waiting: PendingJob, candidates: list[_Candidate]) -> list[_Candidate] | None:
    """The movers, in candidate order, or None: the shortest run of the candidates (already
    within the limit) with which the waiting gang fits (by bisection: more room never makes a
    gang fit less), then longer runs until every mover fits again too; then every mover the
    others can do without put back (_put_back)."""
    if not candidates or not trials.fits(waiting, candidates):
        return None
    low, high = 1, len(candidates)
    while low < high:
        middle = (low + high) // 2
        if trials.fits(waiting, candidates[:middle]):
            high = middle
        else:
            low = middle + 1
    # (Not bisection from here: a longer run frees more room but has more movers to place again.)
    for length in range(high, len(candidates) + 1):
        if trials.moves(waiting, candidates[:length]) is not None:
            return _put_back(trials, waiting, candidates[:length])
    return None


def _put_back(trials: _Trials, waiting: PendingJob, chosen: list[_Candidate]) -> list[_Candidate]:
    """Every mover the others can do without put back, until none can be (the last taken
    first, as the least suitable), as preemption.choose_victims does with victims."""
    putting_back = True
    while putting_back:
        putting_back = False
        for mover in reversed(chosen):
            rest = [other for other in chosen if other is not mover]
            if rest and trials.moves(waiting, rest) is not None:
                chosen, putting_back = rest, True
                break
    return chosen


def _new_placement(job: RunningJob, placed: Placed, names: Sequence[str]) -> tuple[tuple[str, int, str], ...]:
    """A mover's new placement as (role, index, node), sorted: a pod on a node it already ran on
    keeps its index there; the others take the indexes left, in order."""
    nodes: dict[str, Counter[str]] = {}
    for group_number, number in placed:
        nodes.setdefault(job.gang[group_number].role, Counter())[names[number]] += 1
    result = []
    for role, left in nodes.items():
        free_indexes = []
        for _, index, node in sorted((p for p in job.placements if p[0] == role), key=lambda p: p[1]):
            if left[node] > 0:
                left[node] -= 1
                result.append((role, index, node))
            else:
                free_indexes.append(index)
        result += [(role, index, node) for index, node in zip(free_indexes, sorted(left.elements()), strict=True)]
    return tuple(sorted(result))
