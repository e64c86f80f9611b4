"""On every leadership start: make the database and the cluster agree before the first cycle.

- Released in the database, no TFJob of ours in the cluster: the release was interrupted
  (crash after the claim) -> send it again (idempotent);
- a running (not suspended) TFJob labelled with a job id whose job is still Queued: the create happened but the
  claim did not stick -> mark it Released, so it is never created twice.
Nothing is created twice: the TFJob's name is the job's and create is idempotent for it.
"""

from jobdash.cluster import gateway as gw
from jobdash.jobs.models import Job, State

from . import release, transitions


def reconcile(
    gateway: gw.ClusterGateway, *, term: int, mode: str, backoff_seconds: float, concurrency: int = 8
) -> dict[str, int]:
    # Suspended TFJobs do not run: in unsuspend mode a taken-back job keeps its labelled,
    # suspended TFJob while it waits in the queue again.
    ours = {t.job_id: t for t in gateway.tfjobs() if t.job_id is not None and not t.deleting and not t.suspended}
    counts = {"resent": 0, "adopted": 0}

    released = list(Job.objects.filter(state=State.RELEASED).values_list("id", "tfjob_uid"))
    transitions.created_many({job_id: ours[job_id].uid for job_id, uid in released if job_id in ours and not uid})
    resend = [job_id for job_id, _ in released if job_id not in ours]
    release.send_all(gateway, resend, mode=mode, concurrency=concurrency, backoff_seconds=backoff_seconds)
    counts["resent"] = len(resend)

    queued = Job.objects.filter(pk__in=ours, state=State.QUEUED).values_list("id", flat=True)
    for job_id in queued:
        if transitions.mark_released(job_id, term, "found its TFJob in the cluster at leadership start"):
            transitions.created(job_id, ours[job_id].uid)
            counts["adopted"] += 1
    return counts
