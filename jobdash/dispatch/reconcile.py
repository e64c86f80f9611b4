"""Make the database and the cluster agree: at every leadership start, and continuously.

- Released in the database, no object of ours in the cluster: the release was interrupted
  (a crash or a database error after the claim) -> send it again (idempotent), without a
  start timeout and without counting an attempt. Every cycle does this for claims older
  than a few seconds (resend_stranded: one query on the Released rows without a uid).
- a running (not suspended) object labelled with a job id whose job is still Queued: the
  create happened but the claim did not stick -> mark it Released, so it is never created
  twice (every few cycles and at leadership start: it reads every object of ours).
- objects of Cancelled jobs are removed by the tracker on every pass.
Nothing is created twice: the object's name is the job's and create is idempotent for it.
"""

from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

from django.utils import timezone

from jobdash.cluster import gateway as gw
from jobdash.dispatch.writers import bulk, release, transitions
from jobdash.jobs.models import Job, State


def _stranded(min_age_s: float, now: datetime, frozen: Collection[str] = ()) -> list[int]:
    """Released jobs without a recorded object, claimed at least `min_age_s` ago (none to a
    lost cluster: `frozen`, whose jobs wait for its return or their replanning)."""
    cutoff = now - timedelta(seconds=min_age_s)
    rows = Job.objects.filter(state=State.RELEASED, object_uid="", released_at__lte=cutoff)
    if frozen:
        rows = rows.exclude(cluster__in=frozen)
    return list(rows.values_list("id", flat=True))


def _frozen(gateway: gw.ClusterGateway) -> frozenset[str]:
    """The lost clusters (several clusters only: jobdash.cluster.multi)."""
    return getattr(gateway, "frozen", frozenset())


def resend_stranded(
    gateway: gw.ClusterGateway,
    *,
    term: int | None,
    mode: str,
    backoff_seconds: float,
    concurrency: int = 8,
    min_age_s: float = 0.0,
    now: datetime | None = None,
    pin: bool = False,
) -> dict[str, int]:
    now = now or timezone.now()
    stranded = _stranded(min_age_s, now, _frozen(gateway))
    if not stranded:
        return {}
    # An object that exists (the create landed, its uid was never recorded) is recorded;
    # the others are sent again.
    found = {}
    rows = Job.objects.filter(pk__in=stranded).values_list("id", "kind_key", "namespace__name", "name")
    for job_id, kind_key, namespace, name in rows:
        info = gateway.job_object((kind_key, namespace, name))
        if info is not None and info.job_id == job_id and not info.deleting:
            found[job_id] = info.uid
    transitions.created_many(found)
    resend = [job_id for job_id in stranded if job_id not in found]
    counts = release.start_sending(
        gateway,
        resend,
        mode=mode,
        concurrency=concurrency,
        backoff_seconds=backoff_seconds,
        term=term,
        now=now,
        pin=pin,
    ).finish()
    return {"recorded": len(found), "resent": len(resend), **counts}


def reconcile(
    gateway: gw.ClusterGateway,
    *,
    term: int,
    mode: str,
    backoff_seconds: float,
    concurrency: int = 8,
    min_age_s: float = 0.0,
    settled: Collection[int] = (),
    active: Collection[int] = (),
    now: datetime | None = None,
    pin: bool = False,
) -> dict[str, int]:
    """`settled`: jobs the tracker saw finished (Dispatcher.sweep.settled); `active`: jobs
    Released or Running at its last pass (which runs just before). Their objects are not
    asked about, so a pass asks the database about the objects of other jobs, not about every
    object the cluster keeps. (Should a settled job be queued again, an operator's requeue of
    a failed one, its release meets its own object and takes it: creates are idempotent by
    job id.)"""
    counts = {"resent": 0, "adopted": 0}
    live = gateway.live_job_ids()

    now = now or timezone.now()
    cutoff = now - timedelta(seconds=min_age_s)
    released_rows = Job.objects.filter(state=State.RELEASED)
    if frozen := _frozen(gateway):
        released_rows = released_rows.exclude(cluster__in=frozen)
    released = list(released_rows.values_list("id", "object_uid", "released_at"))
    found = _running_objects(gateway, [job_id for job_id, _, _ in released if job_id in live])
    transitions.created_many({job_id: found[job_id].uid for job_id, uid, _ in released if job_id in found and not uid})
    resend = [job_id for job_id, _, at in released if job_id not in found and (at is None or at <= cutoff)]
    release.start_sending(
        gateway,
        resend,
        mode=mode,
        concurrency=concurrency,
        backoff_seconds=backoff_seconds,
        term=term,
        now=now,
        pin=pin,
    ).finish()
    counts["resent"] = len(resend)

    # (A preempted job's object is ours to resume: the watch cache may not show it suspended yet.)
    queued = (
        Job.objects.filter(
            bulk.pk_among(live.difference(settled, active)), state=State.QUEUED, preempted_by__isnull=True
        )
        .order_by()
        .values_list("id", flat=True)
    )
    adoptable = _running_objects(gateway, queued)
    for job_id, info in adoptable.items():
        if transitions.mark_released(job_id, term, "found its object in the cluster, its job still Queued", now):
            transitions.created(job_id, info.uid)
            counts["adopted"] += 1
    return counts


def _running_objects(gateway: gw.ClusterGateway, job_ids: Iterable[int]) -> dict[int, gw.JobObject]:
    """The objects of these jobs that may run. Suspended objects do not: in unsuspend mode
    a taken-back job keeps its labelled, suspended object while it waits in the queue again."""
    return {job_id: o for job_id, o in gateway.job_objects_of(job_ids).items() if not o.suspended}
