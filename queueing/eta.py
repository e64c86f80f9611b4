"""When will a pending job start?  Durations, and the plan played forward.

Durations: a job's ``jobdash.io/expected-duration`` annotation, else the
median of its namespace's recent runs of the same shape, else unknown.

The estimate replays the future at the level of totals, not nodes: running,
in-flight and just-admitted jobs end at their expected end and give back
their quota and node resources; waiting jobs start, each namespace strictly
in queue order, and across namespaces the better-ranked job gets freed
cluster capacity first.  A job that ran with no known duration holds its
resources for ever, and a job that only such resources could fit gets no
estimate (``None``) with a note saying so.  A running job's end is its
``likely_end`` (what the caller's predictor expects given how long it has run);
without one, its expected end, and for a job already past that, as long again as
it has run (the median of a heavy tail).  Node fragmentation and
backfilling are not modelled: the figure is a forecast, not a promise.

Two bounds keep it cheap on 100k-job queues: time moves in steps of 1% of
the distance from now (at least a minute), and nothing is started past the
horizon (``planner.DEFAULT_ETA_HORIZON_S``, a day); later jobs get a note.
"""

from __future__ import annotations

import heapq
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, MutableSequence, Sequence
from operator import add, le, sub
from typing import Any, NamedTuple, Protocol

from .snapshot import InFlightJob, PendingJob, Snapshot
from .workload import Workload

DURATION_ANNOTATION = "jobdash.io/expected-duration"
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}

MIN_STEP = 60.0
STEP_FRACTION = 0.01
NO_END_KNOWN = "no running job has an expected end, so nothing is known to free up"
HELD_BY_UNKNOWN = "needs capacity held by jobs with no duration estimate"


def parse_duration(text: str) -> float | None:
    """'5400', '90m', '1h30m', '2d', '1h30m0s' -> seconds; None if not a duration."""
    text = text.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        position, seconds = 0, 0.0
        for match in _DURATION_PART.finditer(text):
            if match.start() != position:
                return None
            seconds += float(match[1]) * _UNIT_SECONDS[match[2]]
            position = match.end()
        if position != len(text):
            return None
    return seconds if seconds > 0 and seconds == seconds and seconds != float("inf") else None


def shape_key(workload: Workload) -> str:
    """What makes two jobs 'similar' for duration history: kind, pods and GPUs."""
    gpus = sum(amount for name, amount in workload.requests.items() if name.endswith("/gpu"))
    return f"{workload.kind}/{workload.pods}p/{gpus}gpu"


def duration_of(
    workload: Workload,
    namespace: str,
    declared: float | None = None,
    history: Mapping[tuple[str, str], Sequence[float]] | None = None,
) -> tuple[float | None, str]:
    """(seconds or None, where the figure comes from: declared | annotation | history | unknown)."""
    if declared is not None and declared > 0:
        return float(declared), "declared"
    text = workload.annotations.get(DURATION_ANNOTATION)
    if text:
        seconds = parse_duration(text)
        if seconds is not None:
            return seconds, "annotation"
    if history:
        recent = history.get((namespace, shape_key(workload)))
        if recent:
            return float(statistics.median(recent)), "history"
    return None, "unknown"


class Occupant(NamedTuple):
    """Something holding capacity now that gives it back at ``end`` (None: unknown)."""

    namespace: str
    quota: tuple[int, ...] | None  # aligned with its namespace's quota keys; None: no quota
    cluster: tuple[int, ...]  # aligned with the cluster's resource names
    end: float | None


# A waiting job, as a plain tuple because there can be 100k of them:
# (job id, rank in the global order, quota vector or None, cluster vector,
#  duration or None, earliest start).  Queues list them in namespace order.
Waiter = tuple[int, int, "tuple[int, ...] | None", "tuple[int, ...]", "float | None", float]
Prepare = Callable[[str, Any], Waiter]


class Estimate(Protocol):
    """Expected seconds of a job of ``workload`` in ``namespace`` (``declared``: the job's own figure)."""

    def __call__(self, workload: Workload, namespace: str, declared: float | None = None) -> float | None: ...


def _as_is(namespace: str, entry: Waiter) -> Waiter:
    return entry


# A moment the replay acts at: (time, sequence, namespace, quota and cluster vectors given
# back).  Without vectors it is a wake-up: the namespace's head waits out its backoff.
_Event = tuple[float, int, str, "tuple[int, ...] | None", "tuple[int, ...] | None"]


class _Replay:
    """The queue played forward (``estimate_starts``): what is free now and once every known
    end has come, the ends and wake-ups still to come, and how far each queue has started."""

    __slots__ = (
        "queues",
        "qfree",
        "cfree",
        "qlast",
        "clast",
        "events",
        "sequence",
        "known_ends",
        "now",
        "horizon",
        "last_start",
        "prepare",
        "ready",
        "woken",
        "heads",
        "starts",
        "notes",
        "cluster_waiting",
        "parked",
        "cut_off",
    )

    def __init__(
        self,
        now: float,
        queues: Mapping[str, MutableSequence[Any]],
        quota_free: Mapping[str, list[int]],
        cluster_free: list[int],
        occupants: Iterable[Occupant],
        horizon: float | None,
        prepare: Prepare | None,
    ) -> None:
        self.queues = queues
        self.qfree = {ns: list(free) for ns, free in quota_free.items()}
        self.cfree = list(cluster_free)
        # What is free once every job with a known end has ended (always >= free);
        # a waiter needing more never starts here, and must not block anyone.
        self.qlast = {ns: list(free) for ns, free in quota_free.items()}
        self.clast = list(cluster_free)
        self.events: list[_Event] = []
        self.now, self.horizon = now, horizon
        self._schedule_ends(occupants)
        # Per queue, how many entries are Waiters already: all of them without ``prepare``.
        self.ready = dict.fromkeys(queues, 0)
        if prepare is None:
            self.ready = {ns: len(queue) for ns, queue in queues.items()}
            prepare = _as_is
        self.prepare = prepare
        self.woken: set[str] = set()  # namespaces with a wake-up queued for their head's backoff
        self._wake_heads()
        heapq.heapify(self.events)
        self.sequence = len(self.events)
        self.known_ends = any(event[4] is not None for event in self.events)
        self.last_start = float("inf") if horizon is None else now + horizon
        self.heads = dict.fromkeys(queues, 0)
        self.starts: dict[int, float] = {}
        self.notes: dict[int, str] = {}
        self.cluster_waiting: list[tuple[int, str]] = []  # (rank, namespace) of heads short of cluster capacity
        self.parked: set[str] = set()
        self.cut_off: list[int] = []  # jobs started whose end lies past the horizon

    def _schedule_ends(self, occupants: Iterable[Occupant]) -> None:
        """Each known end an event, and what it gives back counted in ``qlast``/``clast``."""
        for occupant in occupants:
            if occupant.end is not None:
                self.events.append(
                    (
                        max(occupant.end, self.now),
                        len(self.events),
                        occupant.namespace,
                        occupant.quota,
                        occupant.cluster,
                    )
                )
                if occupant.quota is not None and occupant.namespace in self.qlast:
                    last = self.qlast[occupant.namespace]
                    last[:] = map(add, last, occupant.quota)
                self.clast[:] = map(add, self.clast, occupant.cluster)

    def _wake_heads(self) -> None:
        """A wake-up at the end of each head's backoff (the head made a Waiter to read it)."""
        for ns, queue in self.queues.items():
            if queue and not self.ready[ns]:
                queue[0] = self.prepare(ns, queue[0])
                self.ready[ns] = 1
            if queue and queue[0][5] > self.now:
                self.woken.add(ns)
                self.events.append((queue[0][5], len(self.events), ns, None, None))

    def advance(self, ns: str, t: float) -> None:
        """Start the namespace's heads while they fit; park the first that does not."""
        # Locals: this loop runs once per job the replay reaches.
        queue = self.queues[ns]
        free = self.qfree.get(ns)
        last = self.qlast[ns] if free is not None else []  # (the same namespaces have both)
        cfree, clast, cluster_waiting = self.cfree, self.clast, self.cluster_waiting
        starts, notes, events, prepare = self.starts, self.notes, self.events, self.prepare
        head, end, prepared = self.heads[ns], len(queue), self.ready[ns]
        while head < end:
            if head == prepared:
                queue[head] = prepare(ns, queue[head])
                prepared = self.ready[ns] = head + 1
            job_id, rank, quota, cluster, duration, not_before = queue[head]
            if free is not None and not all(map(le, quota, free)):
                if all(map(le, quota, last)):
                    break  # retried when this namespace gives quota back
                notes[job_id] = HELD_BY_UNKNOWN
                head += 1
                continue
            if not_before > t:
                if ns not in self.woken:
                    self.woken.add(ns)
                    heapq.heappush(events, (not_before, self.sequence, ns, None, None))
                    self.sequence += 1
                break
            if (cluster_waiting and cluster_waiting[0][0] < rank) or not all(map(le, cluster, cfree)):
                if not all(map(le, cluster, clast)):
                    notes[job_id] = HELD_BY_UNKNOWN
                    head += 1
                    continue
                self.parked.add(ns)
                heapq.heappush(cluster_waiting, (rank, ns))
                break
            starts[job_id] = t
            if free is not None:
                free[:] = map(sub, free, quota)
            cfree[:] = map(sub, cfree, cluster)
            if duration is None:
                if free is not None:
                    last[:] = map(sub, last, quota)
                clast[:] = map(sub, clast, cluster)
            elif t + duration <= self.last_start:
                heapq.heappush(events, (t + duration, self.sequence, ns, quota, cluster))
                self.sequence += 1
            else:  # an end past the horizon changes nothing within it
                self.cut_off.append(job_id)
            head += 1
        self.heads[ns] = head

    def unpark(self, t: float) -> None:
        """Freed cluster capacity goes to the parked heads in rank order."""
        cluster_waiting, queues, heads = self.cluster_waiting, self.queues, self.heads
        while cluster_waiting:
            ns = cluster_waiting[0][1]
            cluster = queues[ns][heads[ns]][3]
            if not all(map(le, cluster, self.cfree)) and all(map(le, cluster, self.clast)):
                return
            heapq.heappop(cluster_waiting)
            self.parked.discard(ns)
            self.advance(ns, t)

    def run(self) -> None:
        """Nothing more starts now (this cycle's plan has decided that).  Time advances in
        steps: every end within a step is applied, then queues move once, at the step's last
        end.  A step spans 1% of the time from now (at least a minute), so near estimates are
        exact to the minute and far ones to the percent, and a deep queue costs little per
        event."""
        events, now, last_start = self.events, self.now, self.last_start
        touched: set[str] = set(self.queues)  # every queue gets its first chance at the first end
        while events and events[0][0] <= last_start:
            step_end = events[0][0]
            step_end = min(step_end + max(MIN_STEP, STEP_FRACTION * (step_end - now)), last_start)
            while events and events[0][0] <= step_end:
                t, _, ns, quota, cluster = heapq.heappop(events)
                if cluster is None:
                    self.woken.discard(ns)
                else:
                    if quota is not None:
                        free = self.qfree.get(ns)
                        if free is not None:
                            free[:] = map(add, free, quota)
                    self.cfree[:] = map(add, self.cfree, cluster)
                touched.add(ns)
            for ns in sorted(touched.difference(self.parked)):
                if ns in self.heads:
                    self.advance(ns, t)
            touched.clear()
            if self.cluster_waiting:
                self.unpark(t)

    def otherwise(self) -> str:
        """The note for every job the replay never reached."""
        if self.horizon is not None and (self.events or self.cut_off):
            return f"not expected to start within {self.horizon / 3600:g} h"
        return HELD_BY_UNKNOWN if self.known_ends else NO_END_KNOWN


def estimate_starts(
    now: float,
    queues: Mapping[str, MutableSequence[Any]],
    quota_free: Mapping[str, list[int]],
    cluster_free: list[int],
    occupants: Iterable[Occupant],
    horizon: float | None = None,
    prepare: Prepare | None = None,
) -> tuple[dict[int, float], dict[int, str], str]:
    """Start times, notes for jobs the replay gave up on, and the note for every
    other job (those it never reached).

    Vectors are tuples aligned with one key order: per namespace for quota
    (only namespaces with a quota appear in ``quota_free``), one for the
    cluster.  Nothing is started later than ``now + horizon``.  Queue entries
    are Waiters, or anything ``prepare(namespace, entry)`` turns into one when
    the replay first reaches it: past the horizon most entries never are.
    """
    replay = _Replay(now, queues, quota_free, cluster_free, occupants, horizon, prepare)
    replay.run()
    return replay.starts, replay.notes, replay.otherwise()


class _Vectors:
    """Demand and totals as the replay's vectors (``vectors.of``), aligned with ``resources``
    (the cluster's) and ``quota_keys`` (each namespace's constrained keys).  Jobs of one
    shape share their demand and totals objects: each is converted once, keyed by id."""

    __slots__ = ("resources", "quota_keys", "cluster", "quota")

    def __init__(self, quota_free: Mapping[str, Mapping[str, int]], cluster_free: Mapping[str, int]) -> None:
        self.resources = sorted(cluster_free)
        self.quota_keys = {name: tuple(free) for name, free in quota_free.items()}
        self.cluster: dict[int, tuple[int, ...]] = {}
        self.quota: dict[str, dict[int, tuple[int, ...]]] = {name: {} for name in self.quota_keys}

    def of(
        self, namespace: str, demand: Mapping[str, int], totals: Mapping[str, int]
    ) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
        cluster = self.cluster.get(id(totals))
        if cluster is None:
            cluster = self.cluster[id(totals)] = tuple([totals.get(name, 0) for name in self.resources])
        keys = self.quota_keys.get(namespace)
        if keys is None:
            return None, cluster
        quota = self.quota[namespace].get(id(demand))
        if quota is None:
            quota = self.quota[namespace][id(demand)] = tuple([demand.get(key, 0) for key in keys])
        return quota, cluster


def _preparer(now: float, expected: Estimate, vectors: _Vectors) -> Prepare:
    """A waiting (rank, job) as the replay's Waiter, made when the replay reaches it."""
    cluster_vectors, quota_vectors = vectors.cluster, vectors.quota

    def prepare(namespace: str, entry: tuple[int, PendingJob]) -> Waiter:
        rank, job = entry
        duration = job.expected_duration
        if duration is None:
            duration = expected(job.workload, namespace)
        # vectors.of(), inlined for the common case: both already converted.
        cluster = cluster_vectors.get(id(job.totals))
        cache = quota_vectors.get(namespace)
        quota = None if cache is None else cache.get(id(job.demand))
        if cluster is None or (cache is not None and quota is None):
            quota, cluster = vectors.of(namespace, job.demand, job.totals)
        return job.id, rank, quota, cluster, duration, job.backoff_until or now

    return prepare


def _occupants(
    snapshot: Snapshot, admitted: Sequence[PendingJob], expected: Estimate, vectors: _Vectors
) -> list[Occupant]:
    """Running, in-flight and just-admitted jobs, each ending when it is expected to."""
    now = snapshot.now
    occupants = []
    for job in snapshot.running:
        end = job.likely_end
        if end is None:
            end = job.expected_end
            if end is None:
                duration = expected(job.workload, job.namespace)
                end = None if duration is None else job.started_at + duration
            if end is not None and end <= now:
                # Past its estimate: one of the long runs.  The median of a heavy tail
                # is as long again as it has lasted, not "any moment now".
                end = now + max(now - job.started_at, MIN_STEP)
        occupants.append(Occupant(job.namespace, *vectors.of(job.namespace, job.demand, job.totals), end))
    starting: list[InFlightJob | PendingJob] = [*snapshot.in_flight, *admitted]
    for started in starting:
        duration = expected(started.workload, started.namespace, started.expected_duration)
        occupants.append(
            Occupant(
                started.namespace,
                *vectors.of(started.namespace, started.demand, started.totals),
                None if duration is None else now + duration,
            )
        )
    return occupants


def forecast(
    snapshot: Snapshot,
    queues: Mapping[str, list[tuple[int, PendingJob]]],
    admitted: Sequence[PendingJob],
    quota_free: Mapping[str, Mapping[str, int]],
    cluster_free: Mapping[str, int],
    horizon: float | None,
    estimate: Estimate | None = None,
) -> tuple[dict[int, float], dict[int, str], str]:
    """``estimate_starts`` for a planned cycle.  ``queues``: per namespace, the
    waiting jobs as (rank, job) in queue order (converted in place as the
    replay reaches them); ``admitted``: this cycle's admissions, which start
    now; ``quota_free`` (constrained keys only) and ``cluster_free``: what
    this plan leaves; ``estimate(workload, namespace, declared=None)``: expected
    seconds (the planner passes its cycle's cache; default ``duration_of``)."""
    history = snapshot.history

    def from_history(workload: Workload, namespace: str, declared: float | None = None) -> float | None:
        return duration_of(workload, namespace, declared, history)[0]

    expected: Estimate = from_history if estimate is None else estimate
    vectors = _Vectors(quota_free, cluster_free)
    occupants = _occupants(snapshot, admitted, expected, vectors)
    return estimate_starts(
        snapshot.now,
        queues,
        {name: [free[key] for key in vectors.quota_keys[name]] for name, free in quota_free.items()},
        [cluster_free[name] for name in vectors.resources],
        occupants,
        horizon,
        _preparer(snapshot.now, expected, vectors),
    )
