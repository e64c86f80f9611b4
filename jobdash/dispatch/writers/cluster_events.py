"""Phase 15, events: each state change of a job is a Kubernetes Event (core/v1), so that
`kubectl get events` tells a job's story in the words of its page.

State changes happen in web processes too (a cancel from the UI), which do not talk to the
cluster: a database trigger puts every JobEvent of a state change in the EventOutbox in
its own transaction (migration 0015). The leader sends the oldest `limit` of them each
cycle and deletes what it sent; a leader that stops between the two leaves the rows to the
next, whose resend has the same Event name (already there: nothing to do). So nothing is
lost across a leader change, and nothing is sent twice.

An Event is on the job's object if it exists in the cluster, else on its QueuedJob (an
Event may name an object gone since, as the API server's own do). A Released event
waits (at most RELEASE_WAIT_S) for the object its release is creating.
"""

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from jobdash.cluster import gateway as gw
from jobdash.dispatch.writers.mirror import API_VERSION as QUEUED_API_VERSION
from jobdash.jobs.models import EventOutbox

log = logging.getLogger(__name__)
RELEASE_WAIT_S = 30.0
STALE_S = 3600.0
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# JobEvent type -> (Event reason, Event type). The outbox holds only these (models.CLUSTER_EVENT_TYPES).
REASONS: dict[str, tuple[str, str]] = {
    "Submitted": ("Queued", "Normal"),
    "Requeued": ("Queued", "Warning"),
    "Released": ("Released", "Normal"),
    "Running": ("Running", "Normal"),
    "Preempted": ("Preempted", "Warning"),
    "Succeeded": ("Succeeded", "Normal"),
    "Failed": ("Failed", "Warning"),
    "Cancelled": ("Cancelled", "Warning"),
    "Refused": ("Refused", "Warning"),
}
HAS_OBJECT = ("Released", "Running", "Succeeded", "Failed")  # where a job's object may exist


@dataclass(frozen=True)
class Pending:
    """One outbox row with what its Event needs."""

    id: int
    event_id: int
    type: str
    message: str
    at: datetime
    job_id: int
    namespace: str
    name: str
    api_version: str
    kind: str
    kind_key: str
    object_uid: str
    state: str
    mirror: str | None


def pending(limit: int) -> list[Pending]:
    fields = ("id", "event_id", "event__type", "event__message", "event__created_at", "event__job_id")
    job = ("namespace__name", "name", "api_version", "kind", "kind_key", "object_uid", "state", "queued_mirror__name")
    rows = EventOutbox.objects.order_by("id").values_list(*fields, *(f"event__job__{f}" for f in job))[:limit]
    return [Pending(*row) for row in rows]


def involved(
    gateway: gw.ClusterGateway, row: Pending, objects: dict[int, gw.JobObject], mirrors: dict[int, gw.QueuedObject]
) -> dict[str, str] | None:
    """What the Event is about; None: not yet (a release whose object is on its way)."""
    obj = objects.get(row.job_id) or _held(gateway, row)
    if obj is not None:
        return _ref(row.api_version, row.kind, row.namespace, obj.name, obj.uid)
    if row.object_uid and row.state in HAS_OBJECT:
        return _ref(row.api_version, row.kind, row.namespace, row.name, row.object_uid)
    if row.type == "Released" and row.state == "Released":
        if timezone.now() - row.at < timedelta(seconds=RELEASE_WAIT_S):
            return None
    mirror = mirrors.get(row.job_id)
    if mirror is not None:
        return _ref(QUEUED_API_VERSION, "QueuedJob", row.namespace, mirror.name, mirror.uid)
    if row.state == "Queued" and timezone.now() - row.at < timedelta(seconds=RELEASE_WAIT_S):
        # Its QueuedJob is being made, or on its way through the watch: an Event without the
        # object's uid is one `kubectl describe` does not show.
        return None
    return _ref(QUEUED_API_VERSION, "QueuedJob", row.namespace, row.mirror or row.name, "")


def _held(gateway: gw.ClusterGateway, row: Pending) -> gw.JobObject | None:
    """A Queued job's object held in the cluster (webhook mode suspend): not yet labelled
    with the job's id, found by its key; one carrying another job's id is not this job's."""
    if row.state != "Queued":
        return None
    obj = gateway.job_object((row.kind_key, row.namespace, row.name))
    return obj if obj is not None and not obj.deleting and obj.job_id in (None, row.job_id) else None


def _ref(api_version: str, kind: str, namespace: str, name: str, uid: str) -> dict[str, str]:
    ref = {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name}
    if uid:
        ref["uid"] = uid
    return ref


def event_name(about: str, row: Pending) -> str:
    """As the API server's recorders name Events (the object's name and the time in hex
    nanoseconds: a namespace's Events list in time order), made of the JobEvent alone (its
    time, its id in the nanoseconds below the database's microseconds), so that a resend is
    the same Event."""
    micros = (row.at - EPOCH) // timedelta(microseconds=1)
    stamp = micros * 1000 + row.event_id % 1000
    return f"{about}.{stamp:x}"


def event_of(row: Pending, about: dict[str, str]) -> gw.ClusterEvent:
    reason, type_ = REASONS[row.type]
    return gw.ClusterEvent(
        namespace=row.namespace,
        name=event_name(about["name"], row),
        involved=about,
        reason=reason,
        message=row.message,
        type=type_,
        at=row.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def send(gateway: gw.ClusterGateway, *, limit: int, pool: ThreadPoolExecutor) -> dict[str, int]:
    rows = pending(limit)
    if not rows:
        return {}
    if timezone.now() - rows[0].at > timedelta(seconds=STALE_S):
        # A cluster that refused them for an hour (unreachable): old news, not sent late.
        dropped = EventOutbox.objects.filter(event__created_at__lt=timezone.now() - timedelta(seconds=STALE_S))
        log.warning("events: %d older than %.0f s dropped unsent", dropped.delete()[0], STALE_S)
        rows = pending(limit)
    objects = gateway.job_objects_of({row.job_id for row in rows})
    mirrors = {obj.job_id: obj for obj in gateway.queued_objects() or [] if obj.job_id is not None}
    done: list[int] = []
    counts = {"sent": 0, "waiting": 0, "kept": 0, "dropped": 0}
    errors: list[str] = []
    sending = []
    for row in rows:
        if row.type not in REASONS:
            done.append(row.id)
            continue
        about = involved(gateway, row, objects, mirrors)
        if about is None:
            counts["waiting"] += 1
            continue
        sending.append((row, pool.submit(gateway.record_event, event_of(row, about))))
    for row, future in sending:
        try:
            future.result()
            counts["sent"] += 1
            done.append(row.id)
        except (gw.Transient, gw.Fenced) as error:  # kept for the next cycle, or the next leader
            counts["kept"] += 1
            errors.append(f"{row.type} of job {row.job_id}: {error}")
        except gw.GatewayError as error:  # refused for good (its namespace is gone, ...): dropped
            counts["dropped"] += 1
            errors.append(f"{row.type} of job {row.job_id}: {error}")
            done.append(row.id)
    if errors:  # one line a cycle, not one an event
        log.warning("events: %d not sent (%d dropped), the first: %s", len(errors), counts["dropped"], errors[0])
    EventOutbox.objects.filter(id__in=done).delete()
    return {k: v for k, v in counts.items() if v}


def writes(counts: dict[str, int]) -> int:
    """The requests a send's counts stand for (what the write budget is charged)."""
    return counts.get("sent", 0) + counts.get("dropped", 0)
