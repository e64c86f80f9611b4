"""`make run`'s cluster (kubesim, in-process) starts empty on every start: what jobdash
recorded of the last one's objects is void, and reading their absence as news would be
wrong. Released and Running jobs lost their runs with the old cluster: they are queued
again, keeping their place in the queue (their submission time), with an event that says
why, instead of failing as "deleted outside jobdash". The QueuedJob objects the mirror had
made went with it too: their rows are forgotten, so that the mirror makes them anew
instead of cancelling every waiting job as if its owner had deleted its QueuedJob."""

from django.db import transaction

from .models import Job, QueuedMirror, State
from .services import compare_and_set

IN_FLIGHT = (State.RELEASED, State.RUNNING)
WHY = "queued again: the embedded cluster started anew (make run was restarted) and its run was lost with the old one"


def adopt_empty_cluster(actor: str = "make run") -> tuple[int, int]:
    """(jobs queued again, QueuedJob records forgotten); for an embedded cluster that is new."""
    with transaction.atomic():
        forgotten, _ = QueuedMirror.objects.all().delete()
        requeued = 0
        for job_id in Job.objects.filter(state__in=IN_FLIGHT).values_list("pk", flat=True):
            requeued += compare_and_set(
                job_id, from_states=IN_FLIGHT, to_state=State.QUEUED, event="Requeued", note=WHY, actor=actor
            )
    return requeued, forgotten
