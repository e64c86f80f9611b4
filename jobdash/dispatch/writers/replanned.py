"""Back to the queue because of where a job was, not what it did: its node failed, its
cluster was lost, its held object is in another cluster (issue 49). Each under the fence,
through transitions' one compare-and-set, at once and without counting an attempt."""

from datetime import datetime

from django.db import transaction
from django.db.models import Model

from jobdash.dispatch.writers.transitions import _back_to_queue
from jobdash.jobs.models import LostWork, State


def cluster_lost(
    job_id: int,
    *,
    from_state: str,
    note: str,
    left: Model,
    lost: LostWork | None = None,
    term: int | None = None,
    now: datetime | None = None,
) -> bool:
    """A job whose cluster was lost long enough (issue 49): Released or Running -> Queued at
    once, its cluster forgotten, and `left` (its copy there, a clusters.LeftCopy: deleted when
    the cluster answers again) saved with the change, as `lost` (the work it loses) is."""
    with transaction.atomic():
        changed = _back_to_queue(
            job_id,
            term,
            from_states=(from_state,),
            note=note,
            backoff_until=None,
            reason="ClusterLost",
            event="ClusterLost",
            lost=lost,
            now=now,
            cluster="",
        )
        if changed:
            left.save()
        return changed


def held_elsewhere(job_id: int, cluster: str, *, term: int | None = None, now: datetime | None = None) -> bool:
    """Released to a cluster, its held object found in another (created there with kubectl,
    several clusters): Released -> Queued at once, to be planned in `cluster` (Job.cluster
    is where a queued job whose object exists must go back: cycle_cache)."""
    return _back_to_queue(
        job_id,
        term,
        from_states=(State.RELEASED,),
        note=f"its object is held in cluster {cluster}: planned again there",
        backoff_until=None,
        now=now,
        cluster=cluster,
    )


def node_failed(job_id: int, *, note: str, term: int | None = None, now: datetime | None = None) -> bool:
    """A gang whose pods lost their nodes and find no others: Released or Running -> Queued,
    at once and without counting an attempt (the job did nothing wrong)."""
    return _back_to_queue(
        job_id,
        term,
        from_states=(State.RELEASED, State.RUNNING),
        note=note,
        backoff_until=None,
        reason="NodeFailed",
        now=now,
        cluster="",
    )
