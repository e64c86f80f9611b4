"""Workflows (issue 36): jobs submitted as one graph or as an array, cancelled as one.

A workflow is declared by a multi-document YAML whose first document is
`apiVersion: jobdash.io/v1, kind: Workflow` (`metadata.name`, optional `spec.concurrency`);
its other documents are its jobs, which may depend on each other by name
(`jobdash.io/after`). An array is one manifest submitted N times, the marker `{{index}}`
replaced by each index (Slurm's `--array=0-99%5`: at most 5 admitted at once). Either way
the jobs are stored together or not at all (submission.jobs_submit_many); each is then
queued on its own, the workflow grouping them for its page, its cancel and an array's limit.
"""

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import queueing
from queueing.workflows import INDEX_MARKER, ArraySpec, expand, parse_array

from . import roles, selectors
from .exceptions import Conflict, FieldProblem, InvalidInput
from .models import ACTIVE_STATES, Job, Workflow
from .services import cancel_row
from .signals import send_queue_changed
from .submission import Submission, actor_name, jobs_submit_many

API_VERSION, KIND = "jobdash.io/v1", "Workflow"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NO_JOBS = "a workflow needs at least one job after its Workflow document"
ARRAY_OF_ONE = "an array is one manifest: paste one document, not a workflow"


def header(text: str | bytes) -> tuple[str, int | None] | None:
    """A workflow document's name and concurrency; None if the document declares no workflow."""
    try:
        document = queueing.load_document(text, max_bytes=settings.JOBDASH_MAX_MANIFEST_BYTES)
    except queueing.ManifestError:
        return None  # (not a workflow: its checks as a job will say what is wrong)
    if not isinstance(document, dict) or (document.get("apiVersion"), document.get("kind")) != (API_VERSION, KIND):
        return None
    metadata, spec = document.get("metadata"), document.get("spec") or {}
    name = metadata.get("name") if isinstance(metadata, dict) else None
    problems = _unknown_fields(document, spec)
    if not isinstance(name, str) or len(name) > 63 or not _NAME.match(name):
        problems.append(FieldProblem("metadata.name", "required: a DNS label (lower-case letters, digits, '-')"))
    concurrency = spec.get("concurrency") if isinstance(spec, dict) else None
    if concurrency is not None and (type(concurrency) is not int or concurrency < 1):
        problems.append(FieldProblem("spec.concurrency", "must be a positive integer (jobs admitted at once)"))
    if problems:
        raise InvalidInput(problems).in_document(0)
    return str(name), concurrency


_FIELDS = ("apiVersion", "kind", "metadata", "spec")
_JOBS_FOLLOW = "its jobs are the documents after it, separated by ---"


def _unknown_fields(document: dict, spec: object) -> list[FieldProblem]:
    """A field the Workflow document does not have (a `spec.steps` list, say) is refused, not
    ignored: ignored, its jobs would silently not be there."""
    problems = [
        FieldProblem(str(key), f"unknown field: a Workflow has {', '.join(_FIELDS)}; {_JOBS_FOLLOW}")
        for key in document
        if key not in _FIELDS
    ]
    if not isinstance(spec, dict):
        return [*problems, FieldProblem("spec", "must be a mapping (its one field: concurrency)")]
    return problems + [
        FieldProblem(f"spec.{key}", f"unknown field: a Workflow's spec has only concurrency; {_JOBS_FOLLOW}")
        for key in spec
        if key != "concurrency"
    ]


def workflow_submit(
    *,
    user,
    name: str,
    submissions: Sequence[Submission],
    source: str,
    concurrency: int | None = None,
    first_document: int = 0,
) -> tuple[Workflow, list[Job]]:
    """A workflow of these jobs (a graph: they may depend on each other), all or nothing.
    `first_document`: the first job's place in the request (1 after a Workflow document)."""
    workflow = Workflow(name=name, kind="dag", concurrency=concurrency)
    jobs = jobs_submit_many(
        user=user, submissions=submissions, source=source, workflow=workflow, first_document=first_document
    )
    return workflow, jobs


def array_submit(*, user, submission: Submission, spec: str, source: str) -> tuple[Workflow, list[Job]]:
    """One manifest as an array: a job per index, `{{index}}` replaced by it in the text and,
    unless the name holds the marker, `-<index>` appended to the name."""
    array = array_spec(spec)
    text = (
        submission.manifest.decode("utf-8", "replace")
        if isinstance(submission.manifest, bytes)
        else submission.manifest
    )
    marked = name_marked(text)
    submissions = [
        replace(submission, manifest=expand(text, index), name_index=None if marked else index)
        for index in array.indexes
    ]
    workflow = Workflow(name=_base_name(text), kind="array", array=spec, concurrency=array.limit)
    jobs = jobs_submit_many(user=user, submissions=submissions, source=source, workflow=workflow, indexes=array.indexes)
    return workflow, jobs


def array_spec(spec: str) -> ArraySpec:
    """The array option read (Slurm's --array): at most JOBDASH_BULK_MAX_JOBS indexes; a
    refusal names the field `array`."""
    try:
        return parse_array(spec, "array", max_size=settings.JOBDASH_BULK_MAX_JOBS)
    except queueing.ManifestError as error:
        raise InvalidInput([FieldProblem(e.path, e.message) for e in error.errors]) from None


def several_documents(count: int) -> str:
    """The submit page's refusal of a stream of jobs that declares no workflow."""
    return (
        f"{count} documents, and the first is not a jobdash.io/v1 Workflow: the submit page takes one job, "
        "or a workflow (a Workflow document first, then its jobs; see docs/workflows.md). "
        "To submit several unrelated jobs at once, use jobdash submit or POST /api/v1/jobs/."
    )


def name_marked(text: str) -> bool:
    """Whether the manifest's metadata.name holds the index marker (two expansions differ):
    then it places the index, else an array's jobs get `-<index>` appended."""
    return _name(expand(text, 0)) != _name(expand(text, 1))


def _name(text: str) -> Any:
    try:
        document = queueing.load_document(text, max_bytes=settings.JOBDASH_MAX_MANIFEST_BYTES)
    except queueing.ManifestError:
        return None
    metadata = document.get("metadata") if isinstance(document, dict) else None
    return metadata.get("name") or metadata.get("generateName") if isinstance(metadata, dict) else None


def _base_name(text: str) -> str:
    name = _name(text.replace(INDEX_MARKER, "")) or "array"
    return str(name).strip("-.")[:63] or "array"


def _owns(user, workflow: Workflow) -> bool:
    return workflow.submitted_by_id is not None and workflow.submitted_by_id == getattr(user, "pk", None)


def may_cancel(user, workflow: Workflow) -> bool:
    """Whether workflow_cancel would let `user` cancel it (the page shows its button by it):
    edit for its submitter, admin for anyone else."""
    return roles.grant(user, workflow.namespace).allows(roles.EDIT if _owns(user, workflow) else roles.ADMIN)


def workflow_cancel(*, workflow_id: int, user, reason: str = "") -> Workflow:
    """Every active job of the workflow is cancelled (as job_cancel, with the same rights)."""
    workflow = selectors.workflow_get_visible(user, workflow_id)
    doing = f"cancelling workflow {workflow.pk}"
    if _owns(user, workflow):
        roles.require(user, workflow.namespace, roles.EDIT, doing)
    else:
        roles.require(user, workflow.namespace, roles.ADMIN, f"{doing} (submitted by {workflow.submitted_by_name})")
    actor = actor_name(user)
    note = f"cancelled with workflow {workflow.name} (#{workflow.pk}) by {actor}" + (f": {reason}" if reason else "")
    with transaction.atomic():
        updated = Workflow.objects.filter(pk=workflow.pk, cancelled_at__isnull=True).update(cancelled_at=timezone.now())
        if not updated:
            raise Conflict(f"workflow {workflow.pk} is already cancelled")
        for job_id in workflow.jobs.filter(state__in=ACTIVE_STATES).values_list("id", flat=True):
            cancel_row(job_id, note, actor, from_states=ACTIVE_STATES)
        transaction.on_commit(send_queue_changed)
    workflow.refresh_from_db()
    return workflow
