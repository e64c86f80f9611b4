"""A QueuedJob's DELETE (`kubectl delete queuedjob`, through the ValidatingWebhookConfiguration
of deploy/base/queuedjobs.yaml): the job leaves the queue, cancelled in the name of who
deleted it. Always allowed: the webhook only learns who, before the object is gone. Without
the webhook (or when it cannot be reached: failurePolicy Ignore) the dispatcher's mirror
finds the object gone and cancels the job itself, saying "deleted from the cluster"."""

from collections.abc import Iterable

from jobdash.cluster.gateway import JOB_ID_LABEL
from jobdash.jobs import services

from .decision import ALLOW, Decision
from .review import AdmissionRequest


def decide(request: AdmissionRequest, *, own_identities: Iterable[str]) -> Decision:
    # jobdash deletes the QueuedJobs of jobs that left the queue (and a second one of a job).
    if request.operation != "DELETE" or request.dry_run or request.username in own_identities:
        return ALLOW
    labels = ((request.old_object or {}).get("metadata") or {}).get("labels") or {}
    job_id = str(labels.get(JOB_ID_LABEL, ""))
    if job_id.isdigit():
        services.job_cancel_queued_object_deleted(
            job_id=int(job_id), namespace=request.namespace, name=request.name, deleted_by=request.username
        )
    return ALLOW
