"""The start-time forecast as it would be if every job's run time were known: the yardstick
the likely start's error is held to (issue 38: within 1.2 x of this forecast's error).

The same snapshot and policy as the cycle's own forecast, with each waiting job's expected
duration its true one and each running job's likely end the end its true duration gives
(a job suspended before runs what it has not run yet). Nothing it plans is carried out.
With ``running_known=False`` only the waiting jobs' run times are known and the running
jobs' ends are the cycle's own (the predictor's likely ends): what the sjf-oracle run's
forecast knows.
"""

from __future__ import annotations

import dataclasses

from queueing import Snapshot, plan
from queueing.policy import Policy

from .records import JobRecord


def true_duration_etas(
    snapshot: Snapshot, policy: Policy, records: dict[int, JobRecord], horizon_s: float, *, running_known: bool = True
) -> dict[int, float]:
    """Job id -> the start the forecast gives it knowing every run time (jobs with one)."""
    replace = dataclasses.replace
    pending = tuple(
        replace(job, expected_duration=records[job.id].job.duration) if job.id in records else job
        for job in snapshot.pending
    )
    running = []
    for job in snapshot.running:
        rec = records.get(job.id)
        if rec is None or not running_known:
            running.append(job)
            continue
        left = max(rec.job.duration - rec.run_s, 0.0)
        running.append(replace(job, likely_end=job.started_at + left))
    known = replace(snapshot, pending=pending, running=tuple(running))
    result = plan(known, policy, eta_horizon_s=horizon_s, forecasts=True)
    return {job_id: status.eta for job_id, status in result.pending.items() if status.eta is not None}
