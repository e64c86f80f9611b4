"""The Philly trace and the VC sizes (../shared/traces/README.md), as plain rows."""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
DEFAULT_TRACE = TRACES / "philly_2017-10-01_11-30_11vc.csv"
DEFAULT_VC_NODES = TRACES / "philly_vc_nodes.csv"


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One trace row: submitted at ``submit`` (epoch seconds, UTC), runs ``duration``
    seconds once its whole gang runs, on ``gpus`` GPUs, in virtual cluster ``vc``."""

    id: int
    submit: float
    duration: float
    gpus: int
    vc: str


def parse_time(text: str) -> float:
    """'2017-10-01 00:00:45' or '2017-10-01' (UTC) -> epoch seconds."""
    text = text.strip()
    try:  # the trace's own format, fast
        return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()
    except ValueError:
        pass
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    raise ValueError(f"not a date: {text!r} (expected YYYY-MM-DD or YYYY-MM-DD HH:MM:SS, UTC)")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def load_trace(
    path: str | Path = DEFAULT_TRACE, start: float | None = None, end: float | None = None
) -> list[TraceJob]:
    """Rows submitted in [start, end), in submission order; ids are 1-based row numbers
    of the whole file, so a window keeps the ids the full trace gives its jobs."""
    jobs = []
    with Path(path).open(newline="") as handle:
        for number, row in enumerate(csv.DictReader(handle), start=1):
            submit = parse_time(row["timestamp"])
            if (start is not None and submit < start) or (end is not None and submit >= end):
                continue
            gpus, duration = int(row["num_gpus"]), float(row["duration"])
            if gpus <= 0 or duration <= 0:
                continue
            jobs.append(TraceJob(number, submit, duration, gpus, row["cluster"]))
    jobs.sort(key=lambda job: (job.submit, job.id))
    return jobs


def finished_before(jobs: list[TraceJob], start: float, count: int) -> list[TraceJob]:
    """The last ``count`` of ``jobs`` that ended by ``start`` (submitted plus their run time:
    the trace's queueing is not known), in the order they ended: what a dispatcher started
    at ``start`` would have learned from its database."""
    ended = sorted((job for job in jobs if job.submit + job.duration <= start), key=lambda j: j.submit + j.duration)
    return ended[-count:] if count else []


def load_vc_nodes(path: str | Path = DEFAULT_VC_NODES) -> dict[str, int]:
    with Path(path).open(newline="") as handle:
        return {row["vc"]: int(row["node num"]) for row in csv.DictReader(handle)}


def compress(jobs: list[TraceJob], start: float, factor: float) -> list[TraceJob]:
    """Arrivals ``factor`` times as dense: a submission at t moves to start + (t - start) / factor,
    so the same jobs (same durations) arrive in 1/factor of the time and load the cluster more."""
    if factor == 1:
        return jobs
    if factor <= 0:
        raise ValueError(f"the compression factor must be positive, got {factor}")
    return [replace(job, submit=start + (job.submit - start) / factor) for job in jobs]
