"""What the `jobdash` command prints: aligned tables (like kubectl), a job's or a
workflow's description, and the API's objects as JSON or YAML."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import yaml

from . import Job, Workflow, _moment, _start_range
from .workflows import WorkflowJob

NONE = "-"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, separated by three spaces (kubectl's look)."""
    cells = [[str(h) for h in headers]] + [[NONE if c is None or c == "" else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("   ".join(row[i].ljust(w) for i, w in enumerate(widths)).rstrip() for row in cells)


class _Dumper(yaml.SafeDumper):
    pass


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # A manifest (several lines) reads as a literal block, as it was written.
    style = "|" if "\n" in value and all(line == line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def dump(data: Any, output: str) -> str:
    if output == "json":
        return json.dumps(data, indent=2)
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True).rstrip("\n")


# --- times ---


def _now() -> datetime:
    return datetime.now(timezone.utc)  # noqa: UP017 (the client supports Python 3.9)


def span(seconds: float) -> str:
    """A duration the way kubectl gives ages: 45s, 12m, 1h5m, 3d4h."""
    seconds = int(round(abs(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def relative(text: str | None, now: datetime | None = None) -> str:
    """A future time as "in 12m", a past one as "12m ago"."""
    moment = _moment(text) if text else None
    if moment is None:
        return text or NONE
    delta = (moment - (now or _now())).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def age(text: str | None, now: datetime | None = None) -> str:
    """How long ago, as kubectl's AGE column."""
    at = _moment(text) if text else None
    return span(max(0.0, ((now or _now()) - at).total_seconds())) if at else NONE


def moment(text: str | None) -> str:
    at = _moment(text) if text else None
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else (text or NONE)


# --- jobs ---


def job_rows(jobs: Iterable[Job]) -> str:
    """A CLUSTER column when some job was released to one of several clusters (issue 49)."""
    jobs = list(jobs)
    clusters = any(j.raw.get("cluster") for j in jobs)
    headers = ("ID", "NAMESPACE", "NAME", "KIND", "STATE", *(("CLUSTER",) if clusters else ()))
    headers += ("PRIORITY", "POSITION", "REASON", "AGE")
    now = _now()
    rows = (
        (
            j.id,
            j.namespace,
            j.name,
            j.kind,
            j.state,
            *((j.raw.get("cluster"),) if clusters else ()),
            _priority(j),
            j.position,
            j.reason,
            age(j.raw.get("submitted_at"), now),
        )
        for j in jobs
    )
    return table(headers, rows)


def submitted_rows(jobs: Iterable[Job]) -> str:
    rows = ((j.id, j.namespace, j.name, j.kind, j.state, j.position, j.reason) for j in jobs)
    return table(("ID", "NAMESPACE", "NAME", "KIND", "STATE", "POSITION", "REASON"), rows)


def queue_rows(jobs: Sequence[Job], *, namespaces: bool = False) -> str:
    """Admission order. A late bound marked * is one the job is already past its first of."""
    now = _now()
    headers = ("POSITION", *(("NAMESPACE",) if namespaces else ()), "ID", "NAME", "KIND", "PRIORITY", "REASON")
    headers += ("LIKELY START", "BY (90 %)")
    rows = []
    for j in jobs:
        late = relative(j.eta_late, now) if j.eta_late else NONE
        if j.past_late_bound:
            late += " *"
        where = (j.namespace,) if namespaces else ()
        rows.append((j.position, *where, j.id, j.name, j.kind, _priority(j), j.reason, relative(j.eta, now), late))
    text = table(headers, rows)
    if not jobs:
        return text + "\n(no jobs waiting)"
    if any(j.past_late_bound for j in jobs):
        text += "\n* still waiting past the late bound it was first given (its message says why)"
    return text


def _priority(job: Job) -> str:
    return f"{job.priority} ({job.priority_class})" if job.priority_class else str(job.priority)


def describe(job: Job) -> str:
    raw = job.raw
    lines: list[tuple[str, Any]] = [
        ("Name", f"{job.namespace}/{job.name}"),
        ("ID", job.id),
        ("Kind", f"{job.kind} ({raw['api_version']})" if raw.get("api_version") else job.kind),
        ("State", job.state),
        ("Priority", _priority(job)),
    ]
    if raw.get("cluster"):  # released to one of several clusters (issue 49)
        lines.append(("Cluster", raw["cluster"]))
    if job.state == "Queued":
        lines.append(("Position", job.position))
    lines += [("Reason", job.reason), ("Message", job.message)]
    if job.state == "Queued":
        start = _start_range(job.eta, job.eta_late) if job.eta else NONE
        if job.past_late_bound:
            start += " (past the late bound it was first given)"
        lines.append(("Start", start))
    if raw.get("eta_first"):
        lines.append(("First range", _start_range(raw["eta_first"], raw.get("eta_first_late"))))
    lines.append(("Run time", _run_time(job)))
    lines += _workflow_lines(job)
    lines.append(("Demand", ", ".join(f"{k}={v}" for k, v in job.demand.items())))
    by = f" by {raw['submitted_by']}" if raw.get("submitted_by") else ""
    via = f" ({raw['source']})" if raw.get("source") else ""
    lines.append(("Submitted", f"{moment(raw.get('submitted_at'))}{by}{via}"))
    for key in ("released_at", "started_at", "finished_at"):
        lines.append((key.split("_")[0].capitalize(), moment(raw.get(key))))
    if raw.get("attempts"):
        lines.append(("Attempts", raw["attempts"]))
    if raw.get("preemptions"):
        lines.append(("Preemptions", raw["preemptions"]))
    if job.checkpoints or job.checkpoint_every_s is not None:
        last = f", the last at {moment(job.last_checkpoint_at)}" if job.last_checkpoint_at else ""
        every = f" (written every {job.checkpoint_every_s:g}s)" if job.checkpoint_every_s is not None else ""
        lines.append(("Checkpoints", f"{job.checkpoints} reported{last}{every}"))
    width = 14  # fixed, so that the values line up from one job to the next
    text = "\n".join(f"{label + ':':<{width}}{NONE if value in (None, '') else value}" for label, value in lines)
    events = raw.get("events") or []
    rows = ((moment(e.get("created_at")), e.get("type"), e.get("actor"), e.get("message")) for e in events)
    timeline = "\n".join("  " + line for line in table(("TIME", "TYPE", "ACTOR", "MESSAGE"), rows).splitlines())
    return f"{text}\nEvents:\n{timeline}" if events else f"{text}\nEvents:  {NONE}"


# What a dependency's condition waits for (as the reason WaitingForDependency words it).
WAITS_FOR = {"ok": "to succeed", "any": "to finish", "notok": "to fail"}


def _workflow_lines(job: Job) -> list[tuple[str, Any]]:
    """Its workflow, dependencies, retries and deadlines (only those it has, but retries)."""
    lines: list[tuple[str, Any]] = []
    if job.workflow is not None:
        index = "" if job.array_index is None else f", index {job.array_index}"
        lines.append(("Workflow", f"{job.workflow}{index}"))
    if job.dependencies:
        waits = (
            f"{d.get('name')} (#{d.get('job')}) {WAITS_FOR.get(d.get('condition', ''), d.get('condition'))}: "
            f"{d.get('state')}"
            for d in job.dependencies
        )
        lines.append(("Dependencies", "; ".join(waits)))
    retries = f"{job.retries} of {NONE if job.retry_limit is None else job.retry_limit}"
    if job.failure:
        message, cls = job.failure.get("message") or "", job.failure.get("class") or "Unknown"
        retries += f"; last failure: {message if message.startswith(cls + ':') else f'{cls}: {message}'}"
    lines.append(("Retries", retries))
    if job.max_run_seconds is not None:
        lines.append(("Max run time", span(job.max_run_seconds)))
    if job.start_by is not None:
        lines.append(("Start by", moment(job.start_by)))
    return lines


def _run_time(job: Job) -> str:
    if job.predicted_duration_s is None:
        return "no prediction yet" if not job.prediction_source else "no prediction (no history like it)"
    shown = f"likely {span(job.predicted_duration_s)}"
    if job.predicted_p90_s is not None:
        shown += f", 90 % within {span(job.predicted_p90_s)}"
    return shown + (f" (from {job.prediction_source} history)" if job.prediction_source else "")


# --- workflows ---


def workflow_rows(workflows: Iterable[Workflow]) -> str:
    rows = ((w.id, w.name, w.namespace, w.kind, w.total, w.progress_text()) for w in workflows)
    return table(("ID", "NAME", "NAMESPACE", "KIND", "JOBS", "PROGRESS"), rows)


def describe_workflow(workflow: Workflow) -> str:
    kind = f"{workflow.kind} {workflow.array}" if workflow.array else workflow.kind
    lines: list[tuple[str, Any]] = [
        ("Name", f"{workflow.namespace}/{workflow.name}"),
        ("ID", workflow.id),
        ("Kind", kind),
        ("Concurrency", "no limit" if workflow.concurrency is None else f"{workflow.concurrency} jobs at once"),
        ("Submitted", moment(workflow.created_at) + (f" by {workflow.submitted_by}" if workflow.submitted_by else "")),
    ]
    if workflow.cancelled_at:
        lines.append(("Cancelled", moment(workflow.cancelled_at)))
    lines.append(("Progress", workflow.progress_text()))
    text = "\n".join(f"{label + ':':<14}{value}" for label, value in lines)
    names = {job.id: job.name for job in workflow.jobs}
    rows = []
    for depth, job in dependency_tree(workflow.jobs):
        waits = "; ".join(f"{names.get(on, '')} (#{on}) {WAITS_FOR.get(c, c)}".lstrip() for c, on in job.after)
        rows.append(("  " * depth + f"{job.id} {job.name}", job.state, job.reason, job.retries or "", waits))
    shown = table(("JOB", "STATE", "REASON", "RETRIES", "WAITS FOR"), rows)
    return f"{text}\nJobs:\n" + "\n".join("  " + line for line in shown.splitlines())


def dependency_tree(jobs: Sequence[WorkflowJob]) -> list[tuple[int, WorkflowJob]]:
    """(depth, job) in dependency order: each job after every job it waits for, indented under
    the last of them; jobs waiting for none of the workflow's start at depth 0, in order."""
    known = {job.id for job in jobs}
    waits_for = {job.id: {on for _, on in job.after if on in known} for job in jobs}
    dependents: dict[int, list[WorkflowJob]] = {job.id: [] for job in jobs}
    for job in jobs:
        for on in waits_for[job.id]:
            dependents[on].append(job)
    shown: list[tuple[int, WorkflowJob]] = []
    done: set[int] = set()
    stack = [(0, job) for job in reversed(jobs) if not waits_for[job.id]]
    while stack:  # (a stack, not recursion: a chain may be a thousand jobs long)
        depth, job = stack.pop()
        shown.append((depth, job))
        done.add(job.id)
        ready = [d for d in dependents[job.id] if d.id not in done and waits_for[d.id] <= done]
        stack += [(depth + 1, d) for d in reversed(ready)]
    return shown


def workflow_data(workflow: Workflow) -> Any:
    return dict(workflow.raw)


def banner(what: str, interval: float | None) -> str:
    """What is shown and when; "Every 5s" only when it will be shown again (None: once)."""
    every = f"Every {interval:g}s: " if interval is not None else ""
    return f"{every}{what}   {_now():%Y-%m-%d %H:%M:%S} UTC"


def to_data(jobs: Job | Iterable[Job]) -> Any:
    """The API's objects as they are."""
    if isinstance(jobs, Job):
        return dict(jobs.raw)
    return [dict(j.raw) for j in jobs]
