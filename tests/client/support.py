"""Helpers shared by the client and command-line tests."""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.loop import DispatcherLoop
from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import Job
from kubesim.testing import running_kubesim
from tests.jobdash.dispatch_support import cluster_config, settings, start_gateway


@contextmanager
def running_dispatcher() -> Iterator[DispatcherLoop]:
    """A live dispatcher loop (term 1, ticking every 0.1 s) on its own kubesim, for the
    tests that follow jobs to their end through a live server."""
    with running_kubesim(cluster_config(), manual_clock=False) as sim:
        gateway = start_gateway(sim)
        transitions.take_term(1, "test")
        loop = DispatcherLoop(Dispatcher(gateway, settings()), tick_seconds=0.1)
        loop.start()
        try:
            yield loop
        finally:
            loop.stop()
            gateway.stop()


def give_a_late_estimate(job_id: int, likely: datetime, late: datetime) -> None:
    """What the dispatcher would have written for a job still queued past its first late
    bound (given two hours ago), with a run-time prediction from the user's runs."""
    now = datetime.now(UTC)
    Job.objects.filter(pk=job_id).update(
        eta=likely,
        eta_late=late,
        eta_first_at=now - timedelta(hours=2),
        eta_first=now - timedelta(hours=1),
        eta_first_late=now - timedelta(minutes=30),
        predicted_duration_s=2520.0,
        predicted_p90_s=7560.0,
        prediction_source="user+name",
    )


def columns(table: str) -> list[dict[str, str]]:
    """A table's rows by its header's columns (each starts where its header does)."""
    header, *rows = table.strip("\n").splitlines()
    found = list(re.finditer(r"\S+(?: \S+)*", header))  # names may hold single spaces: "LIKELY START"
    names, starts = [m.group() for m in found], [m.start() for m in found]
    ends = starts[1:] + [None]
    return [{n: row[s:e].strip() for n, s, e in zip(names, starts, ends, strict=True)} for row in rows]


def with_annotation(text: str, key: str, value: str) -> str:
    """A manifest of dispatch_support.manifest() with one more annotation on the job."""
    return text.replace("  annotations:\n", f'  annotations:\n    {key}: "{value}"\n', 1)
