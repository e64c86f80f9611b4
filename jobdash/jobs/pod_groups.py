"""The members of a pod job's group (queueing/kinds/pod.py) as the webhook admits them: a
group takes no more pods than its count. Re-exported by services.py."""

from django.db import transaction

from queueing.kinds.pod import COUNT_PATH

from .exceptions import InvalidInput
from .models import Job, PodGroupMember, State


def pod_group_join(*, job_id: int, pod: str, total: int) -> int:
    """Admit pod `pod` into the group of Queued job `job_id`; returns how many members it has
    now. The same pod again (a retried create) is no new member. Raises InvalidInput (at the
    count annotation) when the group has all its members already, or when it left Queued."""
    with transaction.atomic():
        # The job row locked: two members arriving at once are counted one after the other.
        job = Job.objects.select_for_update().only("id", "name", "state").get(pk=job_id)
        members = list(PodGroupMember.objects.filter(job_id=job_id).values_list("name", flat=True))
        if pod in members:
            return len(members)
        if job.state != State.QUEUED:
            raise InvalidInput.at(
                COUNT_PATH, f"pod group {job.name!r} was admitted already (jobdash job #{job_id}, {job.state})"
            )
        if len(members) >= total:
            shown = ", ".join(sorted(members)[:5]) + (", ..." if len(members) > 5 else "")
            raise InvalidInput.at(
                COUNT_PATH,
                f"pod group {job.name!r} has all its {total} pods already ({shown}): this one would be one more",
            )
        PodGroupMember.objects.create(job_id=job_id, name=pod)
        return len(members) + 1
