"""The one way the webhook queues a job: a job's create (decide.py) and a pod's (pods.py) both
submit through services.job_submit_or_find, so both answer its refusals alike."""

from __future__ import annotations

from collections.abc import Callable

from jobdash.jobs import services
from jobdash.jobs.exceptions import ClusterUnavailable, Forbidden, InvalidInput
from jobdash.jobs.models import Job, Source

from .decision import ALLOW, Decision, service_refusal
from .review import AdmissionRequest


def submit(
    request: AdmissionRequest, namespace: str, name: str, manifest: Callable[[], str], subject: str
) -> tuple[Job | None, bool] | Decision:
    """`(job, created)`: the active job named `name` in `namespace`, or a new Queued one from
    `manifest()` (job None on a dry run of a new one). Found by name, not made again, because
    Katib retries a refused create until it succeeds and every retry must land on the job the
    first attempt made; `manifest` is called only for a new job, so a retry costs one query.
    Else the answer: a namespace jobdash does not manage passes, and what the service refuses
    to store is refused naming `subject`."""
    try:
        return services.job_submit_or_find(
            namespace=namespace,
            name=name,
            manifest=manifest,
            source=Source.WEBHOOK,
            submitted_by_name=request.username or "system:anonymous",
            submitted_by_groups=request.groups,
            dry_run=request.dry_run,
        )
    except services.NamespaceNotManaged:
        return ALLOW
    except (InvalidInput, Forbidden, ClusterUnavailable) as error:
        return service_refusal(error, f"jobdash cannot queue {subject}")
