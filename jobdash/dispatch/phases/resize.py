"""Elastic jobs change size through their operator's own scaling path (the adapter's
scale_patch: the operator makes or removes the pods, the job's workers join or leave).

- grow (phase 7): the plan's resizes: a running elastic job takes capacity nothing waiting
  can use; its new pods come gated and are sent to their planned nodes (phase 12).
- shrink, in preemption's two steps: the plan's partial victims are told they give back
  their extra pods at the end of the grace period (mark), and then scaled down, the
  highest-numbered pods going (apply, in the tracker's pass beside preempt.evict). The job
  runs on throughout: shrinking is taken before any whole job is preempted.
"""

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.utils import timezone

from jobdash import logs
from jobdash.cluster import gateway as gw
from jobdash.cluster import kinds
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import Job, State
from queueing import capabilities
from queueing.decisions import Resize
from queueing.preemption import Preemption

log = logging.getLogger(__name__)


def _scale(gateway: gw.ClusterGateway, key: gw.ObjectKey, counts: Mapping[str, int], term: int | None) -> None:
    adapter = kinds.adapter(key[0])
    gateway.update_job_object(key, lambda obj: capabilities.scaled(adapter, obj, counts), term)


def _words(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {role}" for role, count in sorted(counts.items()))


def grow(
    gateway: gw.ClusterGateway, resizes: Mapping[int, Resize], active: Iterable[ActiveJob], *, term: int | None
) -> int:
    jobs = {job.id: job for job in active}
    grown = 0
    for job_id, resize in resizes.items():
        job = jobs.get(job_id)
        if job is None or job.state != State.RUNNING:
            continue
        placement = [list(slot) for slot in (*job.placement, *(resize.placement or ()))] or None
        note = f"grows to {_words(resize.counts)} into capacity nothing waiting can use"
        if not transitions.resized(job_id, resize.counts, placement, note, term):
            continue
        try:
            _scale(gateway, job.key, resize.counts, term)
            grown += 1
        except gw.GatewayError as error:  # its pods stay as they are; the next plan sees its size
            log.warning("growing job %s: %s", job_id, error, extra=logs.job(job_id, job.namespace))
    return grown


def mark(
    preemptions: Iterable[Preemption], active: Iterable[ActiveJob], *, grace_s: float, term: int | None, now: datetime
) -> int:
    """The partial victims told (preempt.mark tells the whole ones)."""
    jobs = {job.id: job for job in active}
    leave_at = now + timedelta(seconds=grace_s)
    marked = 0
    for preemption in preemptions:
        victim = jobs.get(preemption.victim)
        if not preemption.shrink_to or victim is None:
            continue
        note = (
            f"gives back its extra pods at {leave_at:%H:%M:%S} to make room for job {preemption.preemptor}, "
            f"keeping {_words(preemption.shrink_to)}: it runs on"
        )
        preemptor_note = f"job {victim.id} ({victim.namespace}/{victim.name}) shrinks to make room for it"
        marked += transitions.preempting(
            victim.id, preemption.preemptor, leave_at=leave_at, note=note, preemptor_note=preemptor_note, term=term,
            shrink_to=preemption.shrink_to,
        )  # fmt: skip
    return marked


def apply(gateway: gw.ClusterGateway, *, term: int | None, now: datetime | None = None) -> int:
    """Partial victims whose grace period is over: scaled down to what they keep."""
    now = now or timezone.now()
    due = Job.objects.filter(state=State.RUNNING, preempt_at__lte=now, shrink_to__isnull=False).values(
        "id", "kind_key", "namespace__name", "name", "shrink_to", "placement"
    )
    shrunk = 0
    for row in due:
        keep: dict[str, int] = row["shrink_to"] or {}
        # the highest-numbered pods of each role go (the operator removes those)
        placement = [slot for slot in row["placement"] or () if slot[1] < keep.get(slot[0], slot[1] + 1)] or None
        note = f"gave back its extra pods: runs {_words(keep)}"
        if not transitions.resized(row["id"], keep, placement, note, term, event="Shrunk"):
            continue
        key = (row["kind_key"], row["namespace__name"], row["name"])
        try:
            _scale(gateway, key, keep, term)
            shrunk += 1
        except gw.GatewayError as error:
            log.warning("shrinking job %s: %s", row["id"], error, extra=logs.job(row["id"], row["namespace__name"]))
    return shrunk
