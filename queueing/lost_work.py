"""What stopping a running job now throws away (issue 48): the work since its last checkpoint.

A job says how it checkpoints (``RunningJob``): every ``checkpoint_every_s`` of its run (the
``jobdash.io/checkpoint-every`` annotation), on notice within ``checkpoint_on_notice_s``
(``jobdash.io/checkpoint-on-notice``), and reports each checkpoint it writes
(``checkpointed_at``: the API, or its object's ``jobdash.io/checkpointed-at``).  Its last
checkpoint is the later of the last reported one and the last declared one (the run's start
plus whole periods); none at all: the run's start, so the whole run is lost.  A job that
writes one on notice loses nothing: the notice is time, not work (it keeps its GPUs until the
checkpoint is written, then leaves).

What is lost is counted in GPU-seconds (seconds redone times the GPUs the job holds), the
unit the Preemptor minimises among victims of equal priority; a job without GPUs loses
seconds only, so its GPU-seconds are 0 and ties are broken by those seconds.

``min_runtime_s`` (``jobdash.io/min-runtime``, a namespace default, an admin ceiling): a job
that has run for less is no victim at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .snapshot import RunningJob
from .usage import resources


def last_saved(started_at: float, now: float, every_s: float | None, reported_at: float | None) -> float | None:
    """When a run started at ``started_at`` was last saved, as of ``now``: the later of the
    last checkpoint reported (``reported_at``, if within the run) and the last declared one
    (whole periods of ``every_s``); None if never."""
    last = reported_at if reported_at is not None and reported_at >= started_at else None
    if every_s is not None and every_s > 0 and now > started_at:
        periods = math.floor((now - started_at) / every_s)
        if periods >= 1:
            declared = started_at + periods * every_s
            last = declared if last is None else max(last, declared)
    return None if last is None else min(last, now)


def redone_s(
    started_at: float, now: float, every_s: float | None, reported_at: float | None, on_notice: bool = False
) -> float:
    """Seconds of a run that stopping it at ``now`` makes it do again (0 if it writes a
    checkpoint on notice)."""
    if on_notice:
        return 0.0
    last = last_saved(started_at, now, every_s, reported_at)
    return max(now - (started_at if last is None else last), 0.0)


def last_checkpoint(job: RunningJob, now: float) -> float | None:
    """When ``job``'s work was last saved, as of ``now``: reported or declared; None if never."""
    return last_saved(job.started_at, now, job.checkpoint_every_s, job.checkpointed_at)


def seconds_lost(job: RunningJob, now: float) -> float:
    """Seconds of ``job``'s run that stopping it at ``now`` would make it do again."""
    return redone_s(
        job.started_at, now, job.checkpoint_every_s, job.checkpointed_at, job.checkpoint_on_notice_s is not None
    )


def gpus_held(job: RunningJob) -> float:
    """The GPUs its pods hold, counted as usage counts them (every ".../gpu" resource)."""
    return resources(job.totals)[0]


def gpu_seconds_lost(job: RunningJob, now: float) -> float:
    return seconds_lost(job, now) * gpus_held(job)


def protected(job: RunningJob, now: float) -> bool:
    """Whether ``job`` is still inside its minimum run time (no victim then)."""
    return job.min_runtime_s > 0 and now - job.started_at < job.min_runtime_s


def losing(job: RunningJob, shrink_to: Mapping[str, int], now: float) -> tuple[float, float, float | None]:
    """What a Preemption of ``job`` at ``now`` says it loses: (seconds redone, GPU-seconds
    redone, its last checkpoint).  An elastic job giving up extra pods (``shrink_to``) goes on
    running and loses nothing."""
    if shrink_to:
        return 0.0, 0.0, last_checkpoint(job, now)
    return seconds_lost(job, now), gpu_seconds_lost(job, now), last_checkpoint(job, now)


def notice_s(on_notice_s: float | None, grace_s: float, maximum_s: float) -> float:
    """How long a victim runs on once told: its own ``checkpoint-on-notice`` (cut to the
    admin's ``maximum_s``, which may have been lowered since it was submitted), else the
    cluster's grace period.  It leaves sooner if it reports a checkpoint meanwhile."""
    if on_notice_s is None:
        return grace_s
    return min(on_notice_s, maximum_s)
