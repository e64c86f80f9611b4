"""An edit of a queued job's manifest: its object, held suspended in the cluster, was edited
(the admission webhook, suspend mode), and the job must ask for what the object now asks.

Validated exactly as a submission is (submission.manifest_check, the priority rules), then
stored with its demand in one transaction. Its place in the queue is its submission time:
kept when no ResourceQuota key of its demand grew, else it goes to the back (the edit is
a new submission). Its run-time prediction is dropped, so the leader predicts again from
the new shape (and, seeing the row's prediction change, reads its new workload), and the
fence's claim counter is bumped, so a cycle that planned from the old demand claims
nothing (transitions.StaleSnapshot) and the next one plans again.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

import queueing
from queueing.demand_change import grew

from . import cluster_port
from .exceptions import Conflict, InvalidInput
from .models import Fence, Job, JobEvent, State
from .priority import pod_priority_class_names, resolve_priority
from .signals import send_queue_changed
from .submission import manifest_check


@dataclass(frozen=True)
class QueuedEdit:
    job: Job
    grew: bool  # some quota key of its demand grew: it went to the back of the queue


def job_update_queued_manifest(
    *, job_id: int, manifest: str, edited_by: str, note: str = "", dry_run: bool = False
) -> QueuedEdit:
    """Store `manifest` as Queued job `job_id`'s, with its workload and priority. Raises
    InvalidInput (nothing written) when it is no valid job or names another job, Forbidden
    when its priority class is above its namespace's limit, ClusterUnavailable when what it
    refers to cannot be read now, Conflict when the job is not Queued. `note`: what changed,
    for its event. With `dry_run` everything is checked and nothing written."""
    job = Job.objects.select_related("namespace").get(pk=job_id)
    parsed, workload = manifest_check(manifest, namespace=job.namespace.name)
    if (workload.name, workload.namespace or job.namespace.name) != (job.name, job.namespace.name):
        raise InvalidInput.at("metadata", f"names {workload.namespace}/{workload.name}, not the job's {job}")
    if (workload.api_version, workload.kind) != (job.api_version, job.kind):
        raise InvalidInput.at("kind", f"is {workload.kind} ({workload.api_version}); the job is a {job.kind}")
    priority, priority_class = job.priority, job.priority_class
    if pod_priority_class_names(parsed) != pod_priority_class_names(job.parsed):
        # The classes it names changed: chosen again, within the namespace's limit.
        priority, priority_class = resolve_priority(None, job.namespace, parsed)
    bigger = grew(queueing.Workload.from_json(job.workload), workload)
    if dry_run:
        return QueuedEdit(job, bigger)
    now = timezone.now()
    with transaction.atomic():
        fields = dict(
            manifest=manifest,
            parsed=parsed,
            workload=workload.to_json(),
            priority=priority,
            priority_class=priority_class,
            predicted_duration_s=None,
            predicted_p90_s=None,
            predicted_tail_s=None,
            prediction_source="",
        )
        if bigger:
            fields.update(submitted_at=now, position=None)
        if not Job.objects.filter(pk=job.pk, state=State.QUEUED).update(**fields):
            state = Job.objects.filter(pk=job.pk).values_list("state", flat=True).first()
            raise Conflict(f"job {job.pk} is {state}; only a Queued job's manifest can change")
        place = "to the back of the queue: its demand grew" if bigger else "keeping its place in the queue"
        message = f"its {job.kind} was edited by {edited_by}" + (f": {note}" if note else "") + f"; {place}"
        JobEvent.objects.create(job=job, type="Edited", message=message, actor=edited_by)
        Fence.objects.filter(id=1).update(claims=F("claims") + 1)
        transaction.on_commit(send_queue_changed)
    job.refresh_from_db(from_queryset=Job.objects.select_related("namespace"))
    return QueuedEdit(job, bigger)


class EditRuntimes:
    """What the jobs compared by an edit refer to (a TrainJob's runtime), read from the
    cluster when first asked, once per source; one that cannot be read now reads as
    missing (the comparison then says the job's demand cannot be read)."""

    def __init__(self) -> None:
        self._source: queueing.workload.RuntimeSource | None = None

    def runtime(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        if self._source is None:
            self._source = cluster_port.runtime_source()
        try:
            return self._source.runtime(kind, namespace, name)
        except cluster_port.RuntimeUnreadable:
            return None
