"""What the workflow pages and the job page's workflow facts show, in words and numbers:
progress per state, the jobs' table rows, a job's dependencies, retries and deadlines."""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from queueing.failures import FAILURE_CLASSES
from queueing.job_options import JobOptions

from . import workflow_graph
from .models import Job, JobDependency, State
from .presenters import duration, reason_words

# The order the progress bar and its legend go in: done first, then what is under way.
PROGRESS_ORDER = (State.SUCCEEDED, State.RUNNING, State.RELEASED, State.QUEUED, State.FAILED, State.CANCELLED)
CONDITION_WORDS = {"ok": "to succeed", "any": "to end", "notok": "to fail"}


def progress(counts: Mapping[str, int]) -> dict[str, Any]:
    """Counts per state and the bar's segments (percent of the jobs), in PROGRESS_ORDER."""
    total = sum(counts.values())
    segments = [
        {"state": str(state), "count": counts[state], "pct": round(100 * counts[state] / total, 2)}
        for state in PROGRESS_ORDER
        if counts.get(state)
    ]
    finished = sum(counts.get(state, 0) for state in (State.SUCCEEDED, State.FAILED, State.CANCELLED))
    return {"total": total, "finished": finished, "segments": segments}


def job_progress(jobs: Iterable[Job]) -> dict[str, Any]:
    return progress(Counter(job.state for job in jobs))


def graph_jobs(jobs: Sequence[Job]) -> list[workflow_graph.GraphJob]:
    """The jobs as the drawing needs them (their dependencies prefetched)."""
    return [
        workflow_graph.GraphJob(
            id=job.pk,
            name=job.name,
            state=job.state,
            index=job.array_index,
            after=tuple((d.condition, d.on_id) for d in job.dependencies.all()),
        )
        for job in jobs
    ]


def job_rows(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """The table under the drawing: each job, what it waits for (by name inside the
    workflow, by id outside it), why it waits, its retries."""
    names = {job.pk: job.name for job in jobs}
    rows = []
    for job in jobs:
        options = JobOptions.from_json(job.options)
        rows.append(
            {
                "job": job,
                "after": [
                    {"id": d.on_id, "name": names.get(d.on_id, f"#{d.on_id}"), "condition": d.condition}
                    for d in job.dependencies.all()
                ],
                "reason": reason_words(job.reason) if job.state == State.QUEUED and job.reason else "",
                "message": job.message if job.state == State.QUEUED else "",
                "retries": f"{job.retries} of {options.retry.limit}",
            }
        )
    return rows


def job_facts(job: Job, dependencies: Sequence[JobDependency]) -> dict[str, Any]:
    """The job page's workflow facts: what it waits for, its retries, last failure, deadlines."""
    options = JobOptions.from_json(job.options)
    on = sorted(options.retry.on, key=FAILURE_CLASSES.index)
    policy = f"on {', '.join(on)}" if on else "on no failure class"
    if options.retry.exit_codes:
        codes = ", ".join(str(code) for code in sorted(options.retry.exit_codes))
        policy += f"; exit code{'s' if len(options.retry.exit_codes) > 1 else ''} {codes}"
    failure = job.failure or None
    return {
        "waits_for": [
            {
                "id": d.on_id,
                "name": d.on.name,
                "condition": d.condition,
                "condition_words": CONDITION_WORDS.get(d.condition, d.condition),
                "state": d.on.state,
            }
            for d in dependencies
        ],
        "keep_if_never": options.keep_if_never,
        "retries": f"{job.retries} of {options.retry.limit}",
        "retry_policy": policy,
        "failure": _failure(failure) if failure else None,
        "max_run": duration(options.max_run_s) if options.max_run_s is not None else "",
        "start_by": job.start_by,
        "checkpointing": checkpoint_words(job),
    }


def checkpoint_words(job: Job) -> str:
    """What it said of its checkpoints and how many it reported: "every 10m; needs 90s after a
    notice; runs at least 30m before it may be preempted; 3 reported"; "" if nothing."""
    said = []
    if job.checkpoint_every_s is not None:
        said.append(f"every {duration(job.checkpoint_every_s)}")
    if job.checkpoint_on_notice_s is not None:
        said.append(f"needs {duration(job.checkpoint_on_notice_s)} after a notice")
    if job.min_runtime_s is not None:
        said.append(f"runs at least {duration(job.min_runtime_s)} before it may be preempted")
    if job.checkpoints:
        said.append(f"{job.checkpoints} reported")
    return "; ".join(said)


def _failure(failure: Mapping[str, Any]) -> dict[str, str]:
    """The class apart, for its badge; the message without it (it starts with it)."""
    cls, message = str(failure.get("cls") or ""), str(failure.get("message") or "")
    return {"cls": cls, "message": message.removeprefix(f"{cls}: ")}
