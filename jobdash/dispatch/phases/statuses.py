"""Phase 8 of a cycle, statuses: what the plan says of every job still waiting (position,
reason, message, start range) written back, only where it changed, each row only if it is
still the version the snapshot read."""

import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.db import transaction

from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.state.cycle_cache import CycleCache, PendingRow, as_datetime
from jobdash.dispatch.writers import bulk
from jobdash.jobs.models import Job, State
from jobdash.jobs.words import overrun_words, past_late_bound_words
from queueing import PendingStatus, Plan
from queueing.eta_calibration import ForecastSamples, StartCalibrator
from queueing.reasons import same_wait

FIRST_RANGE = ("eta_first_at", "eta_first", "eta_first_late", "eta_first_forecast")


def write_statuses(
    rows: list[PendingRow],
    plan: Plan,
    *,
    shifts: bool = True,
    forecasted: bool = True,
    ranges: StartCalibrator | None = None,
    forecasts: ForecastSamples | None = None,
    now: float | None = None,
    overruns: Mapping[str, list[str]] | None = None,
    cache: CycleCache | None = None,
) -> int:
    """Position, reason, message and start range of every job still waiting; only changed
    rows are written, and a changed reason leaves an event on the job's timeline.

    The plan's forecast becomes a likely start and a late bound (`ranges`: the leader's
    StartCalibrator; None: the forecast as is, no bound). A job's first range is kept with
    the raw forecast (what a new leader's calibration learns from when it starts; this one's
    learns from the forecasts sampled into `forecasts` all along the wait); a job still waiting
    past its first late bound says so, and names the running jobs of its namespace that ran
    past their own (`overruns`). A job seen for the first time has its run-time prediction
    stored with its status.

    `shifts=False` skips rows whose only change is their position, message or start range
    (a queue of thousands moves up as its heads are admitted, and rewriting every row each
    cycle costs more than the rest of the cycle), or a move between reasons that all wait
    for room (`same_wait`: under load jobs flip between them from cycle to cycle); a job
    without a position yet, its first range and any other change of reason are always
    written. A `Waiting` event marks a change of what the job waits for, not such flips.

    `forecasted=False`: the plan made no forecasts; a row keeps its last start range.

    `cache`: the leader's CycleCache the rows come from. A row is then written only if it is
    still the version that was read (else the next cycle reads it again and decides again),
    and the cache learns what was written, so that the next snapshot does not read it back."""
    now = time.time() if now is None else now
    overruns = overruns or {}
    if ranges is not None and forecasts is not None and forecasted:
        # What the jobs still waiting say before their ranges are made: the bounds they have
        # outwaited count as missed, their waits so far as censored. In the complete rounds
        # only, every 10 min at most (0.3 s of CPU with 10,000 jobs waiting for 8 hours).
        ranges.update(now, forecasts)
    writes = _Writes()
    for row in rows:
        if row.prediction is not None:  # (an admitted job keeps it too: its run is measured against it)
            p = row.prediction
            writes.updates[row.job.id].update(
                predicted_duration_s=p.median_s,
                predicted_p90_s=p.p90_s,
                # (inf, no key with runs enough to bound its tail, is stored as NULL: JSON has no inf)
                predicted_tail_s=p.tail_s if p.tail_s is None or math.isfinite(p.tail_s) else None,
                prediction_source=p.source,
            )
        status = plan.pending.get(row.job.id)
        if status is None:
            writes.admitted.add(row.job.id)  # admitted this cycle
            continue
        _status(row, status, writes, shifts, forecasted, ranges, forecasts, now, overruns)
    if forecasts is not None:
        forecasts.forget(now)
    _write(writes, cache)
    return writes.changed


@dataclass
class _Writes:
    """What a statuses pass writes. Per job the fields of its one row update (a new job's
    status, first range and prediction together: each update of a row is a new version of
    it, with its index entries); the jobs admitted this cycle (their predictions are written
    in any state); the Waiting events; the statuses changed."""

    updates: dict[int, dict[str, object]] = field(default_factory=lambda: defaultdict(dict))
    admitted: set[int] = field(default_factory=set)
    events: list[tuple[int, str, str, str]] = field(default_factory=list)
    changed: int = 0


def _status(
    row: PendingRow,
    status: PendingStatus,
    writes: _Writes,
    shifts: bool,
    forecasted: bool,
    ranges: StartCalibrator | None,
    forecasts: ForecastSamples | None,
    now: float,
    overruns: Mapping[str, list[str]],
) -> None:
    """One waiting job's status, into `writes` if it changed (write_statuses' rules)."""
    forecast = status.eta
    if (
        not shifts
        and row.position is not None
        and (forecast is None or row.eta_first_at is not None)
        and same_wait(status.reason, row.reason)
    ):
        # Nothing of it is written this cycle (below, it would be skipped): only its
        # forecast is sampled, without building its range and message.
        if forecast is not None and forecasts is not None:  # (with the range its row shows)
            forecasts.note(row.job.id, now, forecast, namespace=row.job.namespace, shown=(row.eta, row.eta_late))
        return
    eta = late = None
    if not forecasted:
        eta, late = row.eta, row.eta_late
    elif forecast is not None:
        eta, late = ranges.range(now, forecast, row.job.namespace) if ranges is not None else (forecast, None)
        if forecasts is not None:
            forecasts.note(row.job.id, now, forecast, namespace=row.job.namespace, shown=(eta, late))
        if row.eta_first_at is None:
            first = map(as_datetime, (now, eta, late, forecast))
            writes.updates[row.job.id].update(zip(FIRST_RANGE, first, strict=True))
    reason = str(status.reason)
    message = status.message
    if forecasted and forecast is None and status.eta_note:
        message = f"{message.rstrip('.')}. Start time unknown: {status.eta_note}."
    if row.eta_first_late is not None and now > row.eta_first_late:
        late_bound = as_datetime(row.eta_first_late)
        assert late_bound is not None
        message = f"{message.rstrip('.')}. {past_late_bound_words(late_bound, overruns.get(row.job.namespace))}"
    same = _same(eta, row.eta) and _same(late, row.eta_late)
    if (status.position, reason, message) == (row.position, row.reason, row.message) and same:
        return
    if not shifts and same_wait(reason, row.reason) and row.position is not None:
        return
    writes.updates[row.job.id].update(
        position=status.position, reason=reason, message=message, eta=as_datetime(eta), eta_late=as_datetime(late)
    )
    writes.changed += 1
    if not same_wait(reason, row.reason):
        writes.events.append((row.job.id, "Waiting", f"{reason}: {status.message}", "dispatcher"))


def _write(writes: _Writes, cache: CycleCache | None) -> None:
    """One statement per set of fields written (a handful: new jobs, moved jobs, admitted
    ones), and the events, in one transaction; the cache learns the rows' new versions."""
    groups: dict[tuple[tuple[str, ...], bool], list[tuple]] = defaultdict(list)
    for job_id, fields in writes.updates.items():
        names = tuple(sorted(fields))
        groups[names, job_id in writes.admitted].append((job_id, *(fields[name] for name in names)))
    versions: dict[int, str] = {}
    with transaction.atomic():
        for (names, any_state), values in groups.items():
            if any_state:  # a job admitted this cycle keeps its prediction, in any state
                bulk.update_rows(Job, values, names)
                continue
            # Statuses only of rows still Queued: a job cancelled or released meanwhile keeps its
            # state's fields.
            read = {job_id: cache.version(job_id) for job_id, *_ in values} if cache is not None else {}
            if read and None not in read.values():
                at_version = [(job_id, read[job_id], *rest) for job_id, *rest in values]
                versions.update(bulk.update_versioned_rows(Job, at_version, names, only_states=(State.QUEUED,)))
            else:
                bulk.update_rows(Job, values, names, only_states=(State.QUEUED,))
        bulk.insert_events(writes.events)
    if cache is not None and versions:
        cache.written(versions, writes.updates)


def overruns(active: Iterable[ActiveJob], now: float) -> dict[str, list[str]]:
    """Per namespace, its running jobs that have run past their 90 % bound, in words: why a
    job waiting there is late (write_statuses' `overruns`)."""
    found: dict[str, list[str]] = defaultdict(list)
    for job in active:
        if job.state == State.RELEASED:
            continue
        ran = now - (job.started_at or now)
        bound = job.predicted_p90_s
        if bound is not None and ran > bound:
            found[job.namespace].append(overrun_words(job.id, job.name, ran, bound))
    return dict(found)


def _same(a: float | None, b: float | None) -> bool:
    return (a is None) == (b is None) and (a is None or b is None or abs(a - b) < 1.0)
