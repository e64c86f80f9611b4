"""Counting the work jobdash throws away (issue 48): what a running job loses when it is
stopped to make room (preempted, its lent nodes reclaimed, moved), measured as the planner
measured it when it chose the victim (queueing.lost_work), written with the stop itself."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from jobdash.jobs.models import LostWork
from queueing.lost_work import last_saved, redone_s
from queueing.usage import resources, scaled_requests

Cause = LostWork.Cause

# What stopped() reads of a Job row (QuerySet.values()).
JOB_FIELDS = (
    "id",
    "namespace__name",
    "submitted_by_name",
    "kind",
    "priority_class",
    "borrowing",
    "cluster",
    "workload",
    "scale",
    "started_at",
    "checkpoint_every_s",
    "checkpoint_on_notice_s",
    "last_checkpoint_at",
)


def _epoch(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


def stopped(job: Mapping[str, Any], cause: str, now: datetime) -> LostWork:
    """The (unsaved) row for stopping `job` (a row of JOB_FIELDS) at `now`."""
    start = _epoch(job["started_at"]) or now.timestamp()
    every, reported = job["checkpoint_every_s"], _epoch(job["last_checkpoint_at"])
    on_notice = job["checkpoint_on_notice_s"] is not None
    seconds = redone_s(start, now.timestamp(), every, reported, on_notice)
    gpus = resources(scaled_requests(job["workload"] or {}, job["scale"]))[0]
    saved = now.timestamp() if on_notice else last_saved(start, now.timestamp(), every, reported)
    return LostWork(
        job_id=job["id"],
        at=now,
        cause=cause,
        namespace=job["namespace__name"],
        user=job["submitted_by_name"] or "",
        kind=job["kind"] or "",
        priority_class=job["priority_class"] or "",
        borrowed=bool(job["borrowing"]),
        cluster=job.get("cluster") or "",
        seconds=seconds,
        gpu_s=seconds * gpus,
        checkpointed_at=None if saved is None else datetime.fromtimestamp(saved, UTC),
    )
