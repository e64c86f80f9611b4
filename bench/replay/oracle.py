"""``sjf-oracle``: shortest job first with the true durations.  A reference bound for the
replay, not a product policy: no real queue knows how long a job will run.

Non-preemptive like the Helios study's SJF: jobs are considered shortest first
(ties by submission), every job that fits starts, none reserves anything (so long
jobs can starve: a bound on average delay, not a fair policy).  The replay sets
``PendingJob.expected_duration`` to the trace's duration for this policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from queueing.policy import Policy, by_submission
from queueing.snapshot import PendingJob


@dataclass(frozen=True, kw_only=True)
class OracleSjfPolicy(Policy):
    name: str = "sjf-oracle"

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        ordered = by_submission(jobs)
        ordered.sort(key=lambda job: job.expected_duration if job.expected_duration is not None else float("inf"))
        return ordered
