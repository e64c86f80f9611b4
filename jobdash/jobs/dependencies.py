"""A submission's dependencies (issue 36): its `after` targets found, checked and stored.

A target is a job id or a job name in the job's namespace. A name is first one of the jobs
submitted with it (a workflow's or a bulk request's documents), then the namespace's job of
that name: the active one, else the one submitted last (Slurm's ids are unique; names here are
unique among active jobs only); the job's own name is the job itself, which it cannot wait
for. Targets that do not exist, a job's own name, and cycles among the jobs submitted
together, are refused with a 400 naming them before anything is written.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from queueing.job_options import AFTER, JobOptions
from queueing.workflows import find_cycle

from .exceptions import FieldProblem, InvalidInput
from .models import ACTIVE_STATES, Job, JobDependency, Namespace


@dataclass(frozen=True)
class Edge:
    """A dependency of a job submitted now: on an existing job (``job``) or on one of the
    documents submitted with it (``sibling``: its index)."""

    condition: str
    job: Job | None = None
    sibling: int | None = None


def after_path(fields: Mapping[str, object]) -> str:
    """Where a refused dependency is named: the API field if the request gave one, else the annotation."""
    return "after" if "after" in fields else f'metadata.annotations["{AFTER}"]'


def resolve(
    namespace: Namespace,
    options: JobOptions,
    siblings: Mapping[str, int],
    path: str,
    index: int | None = None,
    own: str = "",
) -> list[Edge]:
    """The edges of one job (``index``: its own place among the siblings; ``own``: its name,
    which names the job itself before any other: it cannot wait for itself)."""
    edges: list[Edge] = []
    problems: list[FieldProblem] = []
    named: dict[object, str] = {}  # each job once (a name and an id may be the same job)
    for dependency in options.after:
        target = dependency.target
        if own and target == own:
            problems.append(FieldProblem(path, f"the job cannot wait for itself: {target!r} is its own name"))
            continue
        if target in siblings and siblings[target] != index:
            edge = Edge(dependency.condition, sibling=siblings[target])
            key: object = ("sibling", siblings[target])
        else:
            job = _existing(namespace, target)
            if job is None:
                what = f"job #{target}" if target.isdigit() else f"job named {target!r}"
                problems.append(FieldProblem(path, f"no {what} in namespace {namespace.name!r}"))
                continue
            edge, key = Edge(dependency.condition, job=job), job.pk
        if key in named:
            problems.append(FieldProblem(path, f"{named[key]} and {target} are the same job: name it once"))
            continue
        named[key] = target
        edges.append(edge)
    if problems:
        raise InvalidInput(problems)
    return edges


def _existing(namespace: Namespace, target: str) -> Job | None:
    jobs = Job.objects.filter(namespace=namespace).only("id", "name", "state")
    if target.isdigit():
        return jobs.filter(pk=int(target)).first()
    named = jobs.filter(name=target)
    return named.filter(state__in=ACTIVE_STATES).first() or named.order_by("-submitted_at", "-id").first()


def check_acyclic(names: Sequence[str], edges: Sequence[Sequence[Edge]], paths: Sequence[str]) -> None:
    """Jobs submitted together may depend on each other, never in a circle."""
    graph = {i: [edge.sibling for edge in job_edges if edge.sibling is not None] for i, job_edges in enumerate(edges)}
    cycle = find_cycle(graph)
    if cycle is not None:
        words = " -> ".join(names[i] for i in cycle)
        raise InvalidInput([FieldProblem(paths[cycle[0]], f"dependency cycle: {words}")])


def _target(edge: Edge, jobs: Sequence[Job]) -> Job:
    if edge.job is not None:
        return edge.job
    assert edge.sibling is not None
    return jobs[edge.sibling]


def store(jobs: Sequence[Job], edges: Sequence[Sequence[Edge]]) -> None:
    """The dependency rows of jobs just inserted (``jobs[i]`` has ``edges[i]``)."""
    rows = [
        JobDependency(job=job, on=_target(edge, jobs), condition=edge.condition)
        for job, job_edges in zip(jobs, edges, strict=True)
        for edge in job_edges
    ]
    if rows:
        JobDependency.objects.bulk_create(rows)
