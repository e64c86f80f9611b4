"""``shortest``: the job expected to need the least GPU time first, with no oracle.

Helios' QSSF idea (Hu et al., SC'21) with what jobdash knows: a job's expected
duration is the caller's estimate in ``PendingJob.expected_duration`` (the
dispatcher fills it when it first sees the job, from ``eta.duration_of``: the
median of the namespace's recent runs of the same shape, i.e. kind, pods and
GPUs), else the job's ``jobdash.io/expected-duration`` annotation, else
``unknown_duration_s``.  Jobs are ordered by expected service (duration x GPUs,
or x pods for CPU-only jobs; ``by_service=False``: duration alone), ties by
submission, so within a namespace and job size the order stays FIFO.

Nothing starves: a job that has waited ``promote_after_s`` goes ahead of every
job that has not, oldest first; and as with ``priority`` the head of a namespace
that has waited ``reservation_after_s`` reserves what it needs.  Otherwise the
mechanics are ``priority``'s: every job that fits is admitted (best effort),
with node fit, no strict head-of-line blocking.

bench/results/trace_replay.md measures it on two months of the Philly trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from .eta import duration_of
from .policy import Policy, by_submission
from .snapshot import PendingJob


@dataclass(frozen=True, kw_only=True)
class ShortestFirstPolicy(Policy):
    name: str = "shortest"
    promote_after_s: float = 6 * 3600.0
    unknown_duration_s: float = 3600.0
    by_service: bool = True
    reservation_after_s: float | None = 3600.0
    max_reservations: int = 8
    uses_duration_estimate: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.promote_after_s < 0 or self.unknown_duration_s <= 0:
            raise ValueError("promote_after_s must be >= 0 and unknown_duration_s > 0")

    def expected_duration(self, job: PendingJob) -> float:
        seconds, _ = duration_of(job.workload, job.namespace, job.expected_duration)
        return self.unknown_duration_s if seconds is None else seconds

    def expected_service(self, job: PendingJob) -> float:
        """Expected duration x size (GPUs, else pods): the resource-time the job will hold."""
        duration = self.expected_duration(job)
        if not self.by_service:
            return duration
        totals = job.totals
        gpus = sum(amount for name, amount in totals.items() if name.endswith("/gpu"))
        return duration * (gpus or totals.get("pods", 1) or 1)

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        ordered = by_submission(jobs)
        after = self.promote_after_s
        promoted = [job for job in ordered if now - job.submitted_at >= after]
        rest = [job for job in ordered if now - job.submitted_at < after]
        # Jobs of one shape and namespace share the estimate: compute it once per (shape, estimate).
        services: dict[tuple[int, str, float | None], float] = {}
        keys: list[float] = []
        for job in rest:
            key = (id(job.workload), job.namespace, job.expected_duration)
            service = services.get(key)
            if service is None:
                service = services[key] = self.expected_service(job)
            keys.append(service)
        ranked = [
            job for _, job in sorted(zip(keys, rest, strict=False), key=_first)
        ]  # stable: ties stay in submit order
        return promoted + ranked


def _first(pair: tuple[float, PendingJob]) -> float:
    return pair[0]
