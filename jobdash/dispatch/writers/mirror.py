"""Phase 14, mirror: every Queued job has its QueuedJob object in the cluster
(jobdash.io/v1alpha1), saying what its page says: position, reason, message and start
range, so that `kubectl get queuedjobs` shows the queue. The leader alone writes them.

Each cycle, in this order and at most `limit` cluster writes in all (positions move
every cycle; the rest waits for the next one):
1. objects of jobs no longer Queued are deleted (their rows first);
2. a Queued job whose object jobdash made (a QueuedMirror row) is gone, or being
   deleted, was deleted by someone else: confirmed with the API server (the watch cache
   may lag behind our own create), then the job is cancelled;
3. Queued jobs without an object get one, the front of the queue first (then its row);
   an object found without its row (a leader stopped in between, or a new leader) is
   adopted, never made twice;
4. objects whose status differs from the job's are patched, the front first; beyond the
   first FRONT jobs, a change of place, start range or message alone (not of reason) waits for the next round of
   moves (every MOVES_INTERVAL_S; the objects written longest ago first, as many as the
   cycle's writes allow), so a busy queue does not rewrite every object each cycle.
Without the QueuedJob CRD in the cluster the phase does nothing.
"""

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction

from jobdash import logs
from jobdash.cluster import gateway as gw
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import Job, QueuedMirror, State
from queueing.validation import dns1123_subdomain_problem

log = logging.getLogger(__name__)
QUEUED_STATE = str(State.QUEUED)
API_VERSION = f"{gw.QUEUED_GROUP}/{gw.QUEUED_VERSION}"  # the QueuedJob's
# One job starting moves every place behind it: places, start ranges and messages that only
# moved are rewritten every cycle for the first FRONT jobs, beyond them every MOVES_INTERVAL_S.
FRONT = 25
MOVES_INTERVAL_S = 10.0
REFUSED_PAUSE_S = 60.0  # a cycle whose writes the cluster refused for good pauses the mirror
MOVING = ("position", "likelyStart", "lateBound", "message")  # the message says the free room, the start


@dataclass(frozen=True)
class Waiting:
    """A Queued job as the mirror reads it."""

    id: int
    namespace: str
    name: str
    api_version: str
    kind: str
    position: int | None
    reason: str
    message: str
    eta: datetime | None
    eta_late: datetime | None
    mirror: str | None  # the name of the QueuedJob jobdash made for it, if it made one

    @property
    def status(self) -> dict[str, Any]:
        return {
            "state": QUEUED_STATE,
            "position": self.position,
            "reason": self.reason or None,
            "message": self.message or None,
            "likelyStart": _instant(self.eta),
            "lateBound": _instant(self.eta_late),
        }

    def entry(self, name: str) -> gw.QueuedEntry:
        return gw.QueuedEntry(self.id, self.namespace, name, self.api_version, self.kind, self.name, self.status)


def _instant(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _differs(current: dict[str, Any] | Any, wanted: dict[str, Any]) -> bool:
    return dict(current) != {k: v for k, v in wanted.items() if v is not None}


def _front_first(job: Waiting) -> tuple[bool, int, int]:
    return (job.position is None, job.position or 0, job.id)


def waiting_jobs() -> list[Waiting]:
    fields = ("id", "namespace__name", "name", "api_version", "kind", "position", "reason", "message", "eta")
    rows = Job.objects.filter(state=State.QUEUED).values_list(*fields, "eta_late", "queued_mirror__name")
    return sorted((Waiting(*row) for row in rows), key=_front_first)


def object_name(job: Waiting, taken: set[tuple[str, str]]) -> str:
    """The job's object's name, unless another QueuedJob of the namespace has it (a job
    of that name that left the queue a moment ago): then `job-<id>`."""
    if (job.namespace, job.name) not in taken and dns1123_subdomain_problem(job.name) is None:
        return job.name
    return f"job-{job.id}"


def _sort_out(
    objects: list[gw.QueuedObject], queued: dict[int, Waiting]
) -> tuple[dict[int, gw.QueuedObject], list[gw.QueuedObject], set[int]]:
    """jobdash's objects: each Queued job's own (the one its row names, else the first),
    the leftovers to delete (of jobs gone from the queue, or a second one of a job), and
    the jobs whose object is being deleted."""
    ours: dict[int, gw.QueuedObject] = {}
    deleting: set[int] = set()
    for obj in objects:
        job = queued.get(obj.job_id) if obj.job_id is not None else None
        if job is not None and obj.deleting:
            deleting.add(job.id)
        elif job is not None and (job.id not in ours or obj.name == job.mirror):
            ours[job.id] = obj
    leftovers = [
        obj for obj in objects if obj.job_id is not None and not obj.deleting and ours.get(obj.job_id) is not obj
    ]
    return ours, leftovers, deleting


def _moved_only(current: Any, wanted: dict[str, Any]) -> bool:
    """Only its place, start range or the message's details changed (what moves for the
    whole queue when one job starts), not what it waits for (its reason)."""
    now = {k: v for k, v in dict(current).items() if k not in MOVING}
    return now == {k: v for k, v in wanted.items() if v is not None and k not in MOVING}


def _written_order(obj: gw.QueuedObject) -> tuple[int, str]:
    """Objects written longest ago first: a resourceVersion is the store's write counter
    (etcd's revision), opaque to clients but in practice a growing integer."""
    version = obj.resource_version
    return (len(version), version) if version.isdigit() else (0, "")


_COUNTED = ("created", "updated", "deleted", "adopted", "cancelled", "deferred", "later", "failed", "refused")
Write = tuple[str, Callable[[], Any]]  # what it counts as, and the request


def sync(
    gateway: gw.ClusterGateway,
    *,
    term: int | None,
    limit: int,
    pool: ThreadPoolExecutor,
    moves_due: bool = True,
) -> dict[str, int]:
    """`moves_due`: a round of moves, the places and start ranges that only moved beyond
    the FRONT of the queue (the caller says so every MOVES_INTERVAL_S)."""
    objects = gateway.queued_objects()
    if objects is None:
        return {}
    counts = dict.fromkeys(_COUNTED, 0)
    waiting = waiting_jobs()
    queued = {job.id: job for job in waiting}
    ours, leftovers, deleting = _sort_out(objects, queued)
    writes: list[Write] = []

    # 1. the rows of jobs that left the queue go before their objects
    QueuedMirror.objects.exclude(job__state=State.QUEUED).delete()
    for obj in leftovers[:limit]:
        writes.append(("deleted", partial(gateway.delete_queued, obj.namespace, obj.name, obj.resource_version, term)))
    # 2. made by jobdash, gone now: someone left the queue
    counts["cancelled"] = _cancel_gone(gateway, waiting, ours, deleting, limit, term)
    # 3. new ones, and objects found without their row
    created: list[tuple[Waiting, gw.QueuedObject]] = []
    adopted = [job for job in waiting if job.mirror is None and job.id in ours]
    taken = {(obj.namespace, obj.name) for obj in objects}
    for job in waiting:
        if job.mirror is None and job.id not in ours:
            if len(writes) >= limit:
                counts["deferred"] += 1
                continue
            name = object_name(job, taken)
            taken.add((job.namespace, name))
            writes.append(("created", partial(_create, gateway, job, name, term, created)))
    # 4. what changed, the front of the queue first
    deferred, counts["later"] = _changed(gateway, waiting, ours, writes, limit, term, moves_due)
    counts["deferred"] += deferred

    _send(writes, pool, counts)
    rows = [QueuedMirror(job_id=job.id, name=obj.name) for job, obj in created]
    rows += [QueuedMirror(job_id=job.id, name=ours[job.id].name) for job in adopted]
    counts["adopted"] = len(adopted)
    QueuedMirror.objects.bulk_create(rows, ignore_conflicts=True)
    return {k: v for k, v in counts.items() if v}


def _cancel_gone(
    gateway: gw.ClusterGateway,
    waiting: list[Waiting],
    ours: dict[int, gw.QueuedObject],
    deleting: set[int],
    limit: int,
    term: int | None,
) -> int:
    """Step 2: the jobs whose object jobdash made is gone or being deleted are cancelled
    (at most `limit` objects confirmed gone with the API server a pass)."""
    cancelled = checks = 0
    for job in waiting:
        if job.mirror is not None and job.id not in ours and checks < limit:
            checks += job.id not in deleting
            if job.id in deleting or gateway.queued_gone(job.namespace, job.mirror):
                cancelled += _cancel(job, term)
            # (else the watch cache has not seen our create yet)
    return cancelled


def _changed(
    gateway: gw.ClusterGateway,
    waiting: list[Waiting],
    ours: dict[int, gw.QueuedObject],
    writes: list[Write],
    limit: int,
    term: int | None,
    moves_due: bool,
) -> tuple[int, int]:
    """Step 4: objects whose status differs, the front of the queue first; places that only
    moved, beyond the front, in a round of moves, the longest unwritten first. Returns the
    writes deferred to the next cycle and the moves left for a later round."""
    deferred = 0
    moved: list[tuple[Waiting, gw.QueuedObject]] = []
    for job in waiting:
        mine = ours.get(job.id)
        if mine is None or not _differs(mine.status, job.status):
            continue
        if (job.position or 0) > FRONT and _moved_only(mine.status, job.status):
            moved.append((job, mine))
        elif len(writes) < limit:
            writes.append(("updated", partial(gateway.update_queued, mine.namespace, mine.name, job.status, term)))
        else:
            deferred += 1
    if moves_due:
        moved.sort(key=lambda pair: _written_order(pair[1]))
        room = max(0, limit - len(writes))
        for job, mine in moved[:room]:
            writes.append(("updated", partial(gateway.update_queued, mine.namespace, mine.name, job.status, term)))
        moved = moved[room:]
    return deferred, len(moved)


def _send(writes: list[Write], pool: ThreadPoolExecutor, counts: dict[str, int]) -> None:
    """The writes, from the pool; each counted by its outcome, the failures logged in one line."""
    futures = [(what, pool.submit(write)) for what, write in writes]
    errors: list[str] = []
    for what, future in futures:
        try:
            future.result()
            counts[what] += 1
        except gw.AlreadyExists as error:  # the name is another job's: the next cycle picks job-<id>
            log.info("queued object: %s", error)
        except (gw.Transient, gw.Fenced, gw.Conflict) as error:  # the next cycle (or leader) tries again
            counts["failed"] += 1
            errors.append(f"{what}: {error}")
        except gw.GatewayError as error:  # forbidden, invalid, no such namespace: not by retrying
            counts["refused"] += 1
            errors.append(f"{what}: {error}")
    if errors:  # one line a cycle, not one a job
        log.warning("queued objects: %d writes failed, the first: %s", len(errors), errors[0])


def _create(
    gateway: gw.ClusterGateway,
    job: Waiting,
    name: str,
    term: int | None,
    created: list[tuple[Waiting, gw.QueuedObject]],
) -> None:
    created.append((job, gateway.create_queued(job.entry(name), term)))


def _cancel(job: Waiting, term: int | None) -> int:
    with transaction.atomic():
        transitions.hold_term(term)
        cancelled = services.job_cancel_queued_object_deleted(
            job_id=job.id, namespace=job.namespace, name=job.mirror or ""
        )
    if cancelled:
        log.info("job %s cancelled: its QueuedJob was deleted", job.id, extra=logs.job(job.id, job.namespace))
    return int(cancelled)


def writes(counts: dict[str, int]) -> int:
    """The requests a sync's counts stand for (what the write budget is charged)."""
    return sum(counts.get(what, 0) for what in ("created", "updated", "deleted", "failed", "refused", "cancelled"))
