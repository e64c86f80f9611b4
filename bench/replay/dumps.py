"""A replay's jobs, dumped to study a run without replaying it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def dump_jobs(result, path: Path) -> None:
    """Every job's outcome, column-wise (gzipped JSON), to study a run without replaying it."""
    columns: dict[str, list[Any]] = {
        name: []
        for name in (
            "id",
            "vc",
            "gpus",
            "submit",
            "duration",
            "estimate",
            "first_released",
            "started",
            "finished",
            "attempts",
            "partial_s",
            "requeued_s",
            "preemptions",
            "lost_s",
        )
    }
    for rec in result.jobs:
        for name, value in (
            ("id", rec.job.id),
            ("vc", rec.job.vc),
            ("gpus", rec.job.gpus),
            ("submit", rec.job.submit),
            ("duration", rec.job.duration),
            ("estimate", rec.estimate),
            ("first_released", rec.first_released_at),
            ("started", rec.started_at),
            ("finished", rec.finished_at),
            ("attempts", rec.attempts),
            ("partial_s", rec.partial_s),
            ("requeued_s", rec.requeued_s),
            ("preemptions", rec.preemptions),
            ("lost_s", rec.lost_s),
        ):
            columns[name].append(value)
    # The sampled forecasts, to study the start ranges without replaying:
    # (job id, forecast start, forecast at, likely start, late bound).
    dumped: dict[str, Any] = {**columns, "eta_samples": [list(sample) for sample in result.eta_samples]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        json.dump(dumped, handle)
