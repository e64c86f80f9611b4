"""A QueuedJob's DELETE (`kubectl delete queuedjob`, through the ValidatingWebhookConfiguration
of deploy/base/queuedjobs.yaml): the job leaves the queue, cancelled in the name of who
deleted it, by the rule of any cancel: its owner may, anyone else needs the admin role in the
namespace (or staff); a refused delete says why. Without the webhook registered the
dispatcher's mirror finds the object gone and cancels the job itself, saying "deleted from
the cluster" (it cannot know who)."""

from collections.abc import Iterable

from jobdash.cluster.gateway import JOB_ID_LABEL
from jobdash.jobs import services
from jobdash.jobs.exceptions import NotMember

from .decision import ALLOW, Decision, refused
from .review import AdmissionRequest


def decide(request: AdmissionRequest, *, own_identities: Iterable[str]) -> Decision:
    # jobdash deletes the QueuedJobs of jobs that left the queue (and a second one of a job).
    if request.operation != "DELETE" or request.username in own_identities:
        return ALLOW
    labels = ((request.old_object or {}).get("metadata") or {}).get("labels") or {}
    job_id = str(labels.get(JOB_ID_LABEL, ""))
    if not job_id.isdigit():
        return ALLOW
    subject = f"QueuedJob {request.namespace}/{request.name}"
    try:
        services.job_cancel_queued_object_deleted(
            job_id=int(job_id),
            namespace=request.namespace,
            name=request.name,
            deleted_by=request.username or "system:anonymous",
            groups=request.groups,
            dry_run=request.dry_run,
        )
    except NotMember as error:
        return refused(
            403, f"jobdash refuses to delete {subject}: deleting it cancels its job, and {error}", "Forbidden"
        )
    return ALLOW
