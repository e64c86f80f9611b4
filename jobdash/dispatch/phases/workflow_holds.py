"""Workflows in the cycle (issue 36): what holds a queued job (its dependencies, its array's
limit) read for the snapshot, and the queued jobs that end because what they wait for never
will come (a dependency that can no longer be met) or came too late (a "start by" deadline).

Per cycle: one read of the dependencies of queued jobs (with their targets' names and
states), one of the arrays' limits and admitted counts when queued jobs belong to an array
with a limit, one of the expired deadlines (a partial index holds only jobs that have one).
"""

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count

from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import Job, JobDependency, State, Workflow
from queueing.holds import Dependencies, GroupLimit
from queueing.snapshot import PendingJob
from queueing.workflows import NEVER, WAIT, never_words, outcome


@dataclass(frozen=True)
class Holds:
    held: dict[int, PendingJob]  # queued jobs as the planner must see them (their Dependencies)
    groups: dict[int, GroupLimit]  # arrays with a limit
    never: dict[int, str]  # jobs to cancel: a dependency will never be met (and they were not kept)


def read(pending: Iterable[PendingJob]) -> Holds:
    jobs = {job.id: job for job in pending}
    waiting: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    never: dict[int, list[tuple[int, str, str, str]]] = defaultdict(list)
    keep: dict[int, bool] = {}
    rows = JobDependency.objects.filter(job__state=State.QUEUED).values_list(
        "job_id", "on_id", "on__name", "on__state", "condition", "job__options"
    )
    for job_id, on, name, state, condition, options in rows:
        if job_id not in jobs:
            continue
        keep[job_id] = bool((options or {}).get("keep_if_never"))
        found = outcome(condition, state)
        if found == WAIT:
            waiting[job_id].append((on, name, condition))
        elif found == NEVER:
            never[job_id].append((on, name, condition, state))
    held: dict[int, PendingJob] = {}
    cancel: dict[int, str] = {}
    for job_id in waiting.keys() | never.keys():
        if never[job_id] and not keep[job_id]:
            cancel[job_id] = never_words(never[job_id])
            continue
        after = Dependencies(tuple(waiting[job_id]), tuple(never[job_id]))
        held[job_id] = dataclasses.replace(jobs[job_id], after=after)
    return Holds(held, _groups(jobs.values()), cancel)


def _groups(pending: Iterable[PendingJob]) -> dict[int, GroupLimit]:
    ids = {job.group for job in pending if job.group is not None}
    if not ids:
        return {}
    rows = list(Workflow.objects.filter(pk__in=ids, concurrency__isnull=False).values_list("id", "concurrency", "name"))
    limited = {group: int(limit or 0) for group, limit, _ in rows}
    if not limited:
        return {}
    names = {group: name for group, _, name in rows}
    admitted = dict(
        Job.objects.filter(workflow_id__in=limited, state__in=(State.RELEASED, State.RUNNING))
        .values("workflow_id")
        .annotate(n=Count("id"))
        .values_list("workflow_id", "n")
    )
    return {group: GroupLimit(names[group], limit, admitted.get(group, 0)) for group, limit in limited.items()}


def end(never: Mapping[int, str], term: int | None, now: datetime) -> int:
    """Cancel the dependents whose dependencies will never be met (Slurm's DependencyNeverSatisfied),
    and the queued jobs past their "start by" deadline."""
    ended = 0
    for job_id, words in never.items():
        ended += transitions.end_queued(
            job_id, f"{words}: cancelled, as it can never start", reason="DependencyNeverSatisfied", term=term, now=now
        )
    expired = Job.objects.filter(state=State.QUEUED, start_by__lte=now).values_list("id", "start_by")
    for job_id, start_by in expired:
        note = f"still queued at its start-by deadline ({start_by:%Y-%m-%d %H:%M:%S} UTC): cancelled"
        ended += transitions.end_queued(job_id, note, reason="StartDeadlinePassed", term=term, now=now)
    return ended
