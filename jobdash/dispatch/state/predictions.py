"""What the leader has learned of run times and of its own start estimates.

One `Learning` per Dispatcher (per leader process): a `queueing.DurationPredictor`
fed with every job that succeeded, and a `queueing.eta_calibration.StartCalibrator`
fed, as each job starts, with the forecasts it was given while it waited (`forecasts`,
sampled in memory by `write_statuses`, with the ranges shown; the jobs still waiting are
fed to it there too, as censored waits: `StartCalibrator.update`). A new leader learns the recent past from the
database on its first cycle (the last `BOOTSTRAP` finished and started jobs, oldest
first; for a start, the job's first forecast, the one kept on its row), then only what
happened since the cycle before: two indexed reads per cycle, by finish and by start time.

A job's prediction is made once, when the dispatcher first sees it, and stored on
its row (`predicted_duration_s`, `predicted_p90_s`, `prediction_source`): its
expected duration in every cycle after, and what its error is measured against.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings

from jobdash.jobs.models import Job, State
from queueing.eta_calibration import ForecastSamples, StartCalibrator
from queueing.predictor import DurationPredictor, JobFeatures, Prediction
from queueing.workload import Workload

if TYPE_CHECKING:
    from jobdash.dispatch.phases.active import ActiveJob

BOOTSTRAP = 2000  # finished jobs (and started ones) a new leader learns from


class _Since:
    """Rows newer than the last read by one timestamp column, each read once: rows can
    share a timestamp (one bulk update stamps many), so the ids at the mark are kept."""

    def __init__(self) -> None:
        self.mark: datetime | None = None
        self.at_mark: set[int] = set()

    def new(self, rows: Iterable[tuple[int, datetime]]) -> list[int]:
        """`rows`: (id, timestamp) at or after the mark, in timestamp order -> ids not seen yet."""
        fresh = []
        for job_id, moment in rows:
            if self.mark is not None and moment == self.mark and job_id in self.at_mark:
                continue
            if self.mark is None or moment > self.mark:
                self.mark, self.at_mark = moment, set()
            self.at_mark.add(job_id)
            fresh.append(job_id)
        return fresh


@dataclass(frozen=True)
class Expected:
    """What the snapshot expects of the active jobs' run times (Learning.expected)."""

    # Per active job, its whole run: its stored prediction, or one made now for a job
    # released before predictions were made.
    durations: Mapping[int, float | None]
    # Per running job, its likely whole run given how long it has run so far.
    likely: Mapping[int, float | None]


class Learning:
    def __init__(self) -> None:
        self.predictor = DurationPredictor(tail_coverage=settings.JOBDASH_LENT_COVERAGE)
        self.calibrator = StartCalibrator()
        self.forecasts = ForecastSamples()
        self._finished = _Since()
        self._started = _Since()
        self._running: dict[int, JobFeatures] = {}

    def refresh(self, workloads: dict[int, Workload]) -> None:
        """Learn from the jobs that finished or started since the last call. `workloads`:
        parsed workloads already at hand (the active jobs'), to spare parsing them again."""
        self._learn_durations(workloads)
        self._learn_starts()

    @staticmethod
    def _recent(since: _Since, column: str, fields: tuple[str, ...], **filters) -> list[dict[str, Any]]:
        """The rows (id, `column` and `fields`) matching `filters` whose `column` is at or past
        `since`'s mark and not read before (on the first call, the newest BOOTSTRAP), oldest
        first: one query."""
        mark = since.mark
        rows = Job.objects.filter(**filters)
        wanted = tuple(dict.fromkeys(("id", column, *fields)))
        if mark is None:
            read = list(rows.order_by(f"-{column}").values(*wanted)[:BOOTSTRAP])
            read.sort(key=lambda row: (row[column], row["id"]))
        else:
            read = list(rows.filter(**{f"{column}__gte": mark}).order_by(column, "id").values(*wanted))
        fresh = set(since.new((row["id"], row[column]) for row in read))
        return [row for row in read if row["id"] in fresh]

    def _learn_durations(self, workloads: dict[int, Workload]) -> None:
        fields = (
            "namespace__name",
            "submitted_by_name",
            "started_at",
            "predicted_duration_s",
            "predicted_p90_s",
            "prediction_source",
        )
        rows = self._recent(self._finished, "finished_at", fields, state=State.SUCCEEDED, started_at__isnull=False)
        if not rows:
            return
        unparsed = [row["id"] for row in rows if row["id"] not in workloads]
        parsed = dict(workloads)
        if unparsed:
            for job_id, data in Job.objects.filter(pk__in=unparsed).values_list("id", "workload"):
                parsed[job_id] = Workload.from_json(data)
        for row in rows:
            seconds = (row["finished_at"] - row["started_at"]).total_seconds()
            said = None
            if row["prediction_source"]:
                said = Prediction(row["predicted_duration_s"], row["predicted_p90_s"], row["prediction_source"])
            features = self.features(parsed[row["id"]], row["namespace__name"], row["submitted_by_name"])
            self.predictor.observe(features, seconds, said)

    def _learn_starts(self) -> None:
        # (a preempted job waited its first run too: not what its forecasts were about)
        fields = ("eta_first_at", "eta_first_forecast", "namespace__name")
        rows = self._recent(self._started, "started_at", fields, started_at__isnull=False, preemptions=0)
        calibrator = self.calibrator
        for row in rows:
            job_id, started_at = row["id"], row["started_at"]
            given_at, forecast = row["eta_first_at"], row["eta_first_forecast"]
            # Its sampled forecasts observed, and the ranges it was shown resolved.
            if calibrator.learn_start(self.forecasts, job_id, started_at.timestamp()):
                continue
            if given_at is not None and forecast is not None:  # waited under another leader
                waits = (forecast - given_at).total_seconds(), (started_at - given_at).total_seconds()
                calibrator.observe(*waits, row["namespace__name"])

    @staticmethod
    def features(workload: Workload, namespace: str, submitted_by: str) -> JobFeatures:
        return JobFeatures.of(workload, namespace, submitted_by or "")

    def predict(self, workload: Workload, namespace: str, submitted_by: str) -> Prediction:
        return self.predictor.predict(self.features(workload, namespace, submitted_by))

    def likely_total(self, job: ActiveJob, elapsed_s: float) -> float | None:
        """For a running job, asked every cycle: its features are kept while it runs (`retain`)."""
        features = self._running.get(job.id)
        if features is None:
            features = self._running[job.id] = self.features(job.workload, job.namespace, job.submitted_by_name)
        return self.predictor.likely_total(features, elapsed_s)

    def expected(self, active: Iterable[ActiveJob], workloads: dict[int, Workload], now: float) -> Expected:
        """The predictions step of a cycle's snapshot: learn what finished or started since
        the last cycle (`workloads`: the parsed ones of the jobs active then, which those
        that finished are among), then what each active job is expected to take."""
        self.refresh(workloads)
        durations: dict[int, float | None] = {}
        likely: dict[int, float | None] = {}
        for job in active:
            predicted = job.predicted_duration_s
            if not job.prediction_source:  # (released before predictions were made)
                predicted = self.predict(job.workload, job.namespace, job.submitted_by_name).median_s
            durations[job.id] = predicted
            if job.state != State.RELEASED:
                likely[job.id] = self.likely_total(job, now - (job.started_at or now))
        self.retain(likely)
        return Expected(durations, likely)

    def retain(self, running: Iterable[int]) -> None:
        keep = set(running)
        self._running = {job_id: f for job_id, f in self._running.items() if job_id in keep}
