"""The Released and Running jobs as one cycle sees them: kept between cycles by the leader's
cache (kept_active: a job's row is read again only when it changed), cloned by the snapshot
phase and handed as frozen ActiveJobs to the tracker, preemption and publish, so that no
phase rebuilds a job's cluster key, gang or times from a row of its own."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from jobdash.cluster.gateway import ObjectKey
from jobdash.dispatch.state.cycle_cache import CycleCache, Feed, values_with_epochs
from jobdash.dispatch.writers import bulk
from jobdash.jobs.models import Job, State
from queueing import Workload
from queueing.cards import CardPlacement

Placement = tuple[tuple[str, int, str], ...]
ACTIVE = (State.RELEASED, State.RUNNING)


@dataclass(frozen=True, slots=True)
class ActiveJob:
    id: int
    key: ObjectKey  # (kind key, namespace, name): its object in the cluster
    kind: str  # as users write it (the manifest's kind): metrics' label, messages
    state: str  # Released | Running
    workload: Workload
    placement: Placement = ()  # (role, index, node) the planner chose for each pod; () with node fit off
    cards: CardPlacement = ()  # (role, index, cards) of its pods on GPUs shared by memory
    shrink_to: Mapping[str, int] | None = None  # an elastic job giving back pods: what it keeps
    object_uid: str = ""  # "" until its creation is recorded
    attempts: int = 0
    preemptions: int = 0
    priority: int = 0
    borrowing: bool = False
    preempted_for: int | None = None  # the job it leaves for, in its grace period
    preempt_at: float | None = None  # the end of that grace period
    submitted_by_name: str = ""
    predicted_duration_s: float | None = None
    predicted_p90_s: float | None = None
    prediction_source: str = ""
    # seconds since the epoch
    released_at: float | None = None
    started_at: float | None = None
    requeue_requested_at: float | None = None
    eta_first: float | None = None
    eta_first_late: float | None = None
    # Workflows (issue 36): its options (queueing.job_options.JobOptions.to_json) and retries made.
    options: Mapping[str, Any] = field(default_factory=dict)
    retries: int = 0
    # Checkpoints (issue 48): as it declares them, and its last one reported (epoch seconds).
    checkpoint_every_s: float | None = None
    checkpoint_on_notice_s: float | None = None
    min_runtime_s: float | None = None
    last_checkpoint_at: float | None = None
    moved_at: float | None = None  # when defragmentation last moved it
    cluster: str = ""  # the cluster it was released to (issue 49); "": the one cluster

    @property
    def kind_key(self) -> str:
        return self.key[0]

    @property
    def namespace(self) -> str:
        return self.key[1]

    @property
    def name(self) -> str:
        return self.key[2]

    @property
    def gang(self) -> int:
        """Its pods: all of them run before it counts as Running."""
        return self.workload.pods


_FIELDS = (
    "id",
    "kind_key",
    "namespace__name",
    "name",
    "kind",
    "state",
    "placement",
    "cards",
    "scale",
    "shrink_to",
    "object_uid",
    "attempts",
    "preemptions",
    "priority",
    "borrowing",
    "preempted_for_id",
    "submitted_by_name",
    "predicted_duration_s",
    "predicted_p90_s",
    "prediction_source",
    "options",
    "retries",
    "checkpoint_every_s",
    "checkpoint_on_notice_s",
    "min_runtime_s",
    "cluster",
)
_TIMES = (
    "released_at",
    "started_at",
    "requeue_requested_at",
    "eta_first",
    "eta_first_late",
    "preempt_at",
    "last_checkpoint_at",
    "moved_at",
)


def card_placement(data: Any) -> CardPlacement:
    """Job.cards as the planner's tuples."""
    return tuple((role, int(index), tuple(int(card) for card in cards)) for role, index, cards in data or ())


def cards_column(cards: CardPlacement) -> list | None:
    """card_placement's inverse: Job.cards as stored, None for a job with no pod on a shared card."""
    return [[role, index, list(chosen)] for role, index, chosen in cards] or None


def placement_column(placement: Placement | None) -> list | None:
    """Job.placement as stored: None with node fit off (and for no pods)."""
    return [list(slot) for slot in placement] if placement else None


def _made(row: Mapping[str, Any], parsed: Workload) -> ActiveJob:
    """`parsed`: the job's workload as submitted (a row's scale is applied here)."""
    return ActiveJob(
        id=row["id"],
        key=(row["kind_key"], row["namespace__name"], row["name"]),
        kind=row["kind"],
        state=row["state"],
        # (an elastic job admitted or resized to fewer pods runs that many)
        workload=parsed.with_counts(row["scale"]) if row["scale"] else parsed,
        placement=tuple((role, int(index), node) for role, index, node in row["placement"] or ()),
        cards=card_placement(row["cards"]),
        shrink_to=row["shrink_to"],
        object_uid=row["object_uid"],
        attempts=row["attempts"],
        preemptions=row["preemptions"],
        priority=row["priority"],
        borrowing=row["borrowing"],
        preempted_for=row["preempted_for_id"],
        preempt_at=row["preempt_at"],
        submitted_by_name=row["submitted_by_name"],
        predicted_duration_s=row["predicted_duration_s"],
        predicted_p90_s=row["predicted_p90_s"],
        prediction_source=row["prediction_source"],
        released_at=row["released_at"],
        started_at=row["started_at"],
        requeue_requested_at=row["requeue_requested_at"],
        eta_first=row["eta_first"],
        eta_first_late=row["eta_first_late"],
        options=row["options"] or {},
        retries=row["retries"],
        checkpoint_every_s=row["checkpoint_every_s"],
        checkpoint_on_notice_s=row["checkpoint_on_notice_s"],
        min_runtime_s=row["min_runtime_s"],
        last_checkpoint_at=row["last_checkpoint_at"],
        moved_at=row["moved_at"],
        cluster=row["cluster"],
    )


def _read(rows: QuerySet, known: Mapping[int, Workload]) -> list[tuple[ActiveJob, Workload]]:
    """The ActiveJobs of `rows` (Released and Running only), each with its workload as
    submitted; one query, and one more for the workloads not in `known` (parsed already)."""
    read = values_with_epochs(rows.filter(state__in=ACTIVE), _FIELDS, _TIMES)
    missing = [row["id"] for row in read if row["id"] not in known]
    parsed = dict(known)
    if missing:
        for job_id, data in Job.objects.filter(pk__in=missing).values_list("id", "workload"):
            parsed[job_id] = Workload.from_json(data)
    return [(_made(row, parsed[row["id"]]), parsed[row["id"]]) for row in read]


def read_active(known: Mapping[int, Workload]) -> list[ActiveJob]:
    """The Released and Running jobs, read now (the cycle's come from kept_active)."""
    return [job for job, _parsed in _read(Job.objects.all(), known)]


def kept_active(cache: CycleCache, feed: Feed) -> list[ActiveJob]:
    """The Released and Running jobs through the cache (CycleCache.active), from this
    cycle's feed: a row whose version the cache holds keeps its ActiveJob (the very object),
    a row written since is read again (only those rows), a row that left Released and
    Running is dropped. A full feed names every active row: the rest (deleted outright) go.
    Workloads are parsed once a job: kept, or handed over by the queue (CycleCache.forget)."""
    kept = cache.active
    stale: dict[int, str] = {}
    if feed.full:
        named = {}
        for job_id, version, namespace, state in feed.seen:
            if state in ACTIVE:
                named[job_id] = version
                entry = kept.get(job_id)
                # (a renamed namespace changes no job row: its name is compared here)
                if entry is None or entry[0] != version or entry[1].namespace != namespace:
                    stale[job_id] = version
        for job_id in kept.keys() - named.keys():
            del kept[job_id]
    else:
        for job_id, version, _namespace, state in feed.seen:
            if state not in ACTIVE:
                kept.pop(job_id, None)
            elif (kept.get(job_id) or ("",))[0] != version:
                stale[job_id] = version
    if stale:
        known = {}
        for job_id in stale:
            entry = kept.pop(job_id, None)
            parsed = entry[2] if entry is not None else cache.workloads.get(job_id)
            if parsed is not None:
                known[job_id] = parsed
        # A row that left Released and Running between the feed and this read is not read:
        # it stays dropped. One read since the feed may be newer than the feed's version:
        # then the next feed names it again, and it is read again.
        for job, parsed in _read(Job.objects.filter(bulk.pk_among(list(stale))), known):
            kept[job.id] = (stale[job.id], job, parsed)
    return [entry[1] for entry in kept.values()]
