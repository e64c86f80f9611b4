"""The Released and Running jobs as one cycle sees them: read once, by the snapshot phase,
and handed as frozen ActiveJobs to the tracker, preemption and publish, so that no phase
rebuilds a job's cluster key, gang or times from a row of its own."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobdash.cluster.gateway import ObjectKey
from jobdash.dispatch.state.cycle_cache import values_with_epochs
from jobdash.jobs.models import Job, State
from queueing import Workload
from queueing.cards import CardPlacement

Placement = tuple[tuple[str, int, str], ...]


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
)
_TIMES = ("released_at", "started_at", "requeue_requested_at", "eta_first", "eta_first_late", "preempt_at")


def card_placement(data: Any) -> CardPlacement:
    """Job.cards as the planner's tuples."""
    return tuple((role, int(index), tuple(int(card) for card in cards)) for role, index, cards in data or ())


def cards_column(cards: CardPlacement) -> list | None:
    """card_placement's inverse: Job.cards as stored, None for a job with no pod on a shared card."""
    return [[role, index, list(chosen)] for role, index, chosen in cards] or None


def placement_column(placement: Placement | None) -> list | None:
    """Job.placement as stored: None with node fit off (and for no pods)."""
    return [list(slot) for slot in placement] if placement else None


def read_active(known: Mapping[int, Workload]) -> list[ActiveJob]:
    """The Released and Running jobs, in one query (and one more for the workloads not in
    `known`, those parsed already)."""
    rows = values_with_epochs(Job.objects.filter(state__in=(State.RELEASED, State.RUNNING)), _FIELDS, _TIMES)
    missing = [row["id"] for row in rows if row["id"] not in known]
    parsed = dict(known)
    if missing:
        for job_id, data in Job.objects.filter(pk__in=missing).values_list("id", "workload"):
            parsed[job_id] = Workload.from_json(data)
    return [
        ActiveJob(
            id=row["id"],
            key=(row["kind_key"], row["namespace__name"], row["name"]),
            kind=row["kind"],
            state=row["state"],
            # (an elastic job admitted or resized to fewer pods runs that many)
            workload=parsed[row["id"]].with_counts(row["scale"]) if row["scale"] else parsed[row["id"]],
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
        )
        for row in rows
    ]
