"""The submit page's check of everything its form submits (forms.SubmitForm.submit), not
only one job (preview.manifest_preview): a workflow (a jobdash.io/v1 Workflow document,
then its jobs) is checked as submitting it checks it (services.jobs_check_many), then each
job judged on its own against the quota and the nodes, with their total demand; an array
(the Array option) is checked as its first and its last job; several documents without a
Workflow document first are refused as the form refuses them. Reads only; nothing is
stored."""

import re
from collections.abc import Sequence

from queueing.workflows import expand

from . import selectors, services, workflows
from .exceptions import InvalidInput, JobdashError
from .presenters import page_demand
from .preview import Preview, fit_quota, judge, manifest_preview, path_lines, problem_rows

_DOCUMENT_PATH = re.compile(r"^\[(\d+)\]\.?")
# YAML's line breaks, as the parser counts lines (queueing.safe_yaml).
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def submit_preview(user, text: str, namespace: str = "", array: str = "") -> Preview:
    """What submitting the form with this manifest (and Array option) would do, or why not."""
    try:
        documents = services.yaml_documents(text)
    except InvalidInput:
        documents = []  # (one manifest's check says why, with its lines)
    try:
        declared = workflows.header(documents[0]) if documents else None
    except InvalidInput as error:
        return Preview(problems=_stream_rows(text, documents, error))
    if array.strip():
        if len(documents) > 1 or declared is not None:
            return Preview(problems=[{"path": "array", "line": None, "message": workflows.ARRAY_OF_ONE}])
        return _array_preview(user, text, namespace, array)
    if declared is not None:
        name, concurrency = declared
        return _workflow_preview(user, text, documents, namespace, name, concurrency)
    if len(documents) > 1:
        return Preview(problems=[{"path": "", "line": None, "message": workflows.several_documents(len(documents))}])
    return manifest_preview(user, text, namespace)


def _array_preview(user, text: str, namespace: str, spec: str) -> Preview:
    """The array's first job checked as one (the rest are the same manifest), and its last:
    the longest name."""
    try:
        array = workflows.array_spec(spec)
    except InvalidInput as error:
        return Preview(problems=[{"path": p.path, "line": None, "message": p.message} for p in error.problems])
    marked = workflows.name_marked(text)
    first, last = array.indexes[0], array.indexes[-1]
    preview = manifest_preview(user, expand(text, first), namespace, name_index=None if marked else first)
    last_name = preview.name
    if not preview.problems and last != first:
        try:
            last_name = services.manifest_check(
                expand(text, last), namespace=namespace or None, name_index=None if marked else last
            )[1].name
        except InvalidInput as error:
            preview.problems = problem_rows(expand(text, last), error)
    preview.array = {"count": len(array.indexes), "first": preview.name, "last": last_name, "limit": array.limit}
    return preview


def _workflow_preview(
    user, text: str, documents: list[str], namespace: str, name: str, concurrency: int | None
) -> Preview:
    preview = Preview(workflow=name, concurrency=concurrency)
    if len(documents) < 2:
        preview.problems.append({"path": "", "line": None, "message": workflows.NO_JOBS})
        return preview
    submissions = [services.Submission(document, namespace=namespace or None) for document in documents[1:]]
    try:
        checked, _ = services.jobs_check_many(user=user, submissions=submissions, first_document=1)
    except JobdashError as error:
        preview.too_large = error.status == 413
        preview.problems = _stream_rows(text, documents, error)
        return preview
    quotas, nodes = selectors.cluster_quotas_and_nodes()
    total: dict[str, int] = {}
    for one in checked:
        job = Preview()
        judge(job, one.workload, nodes)
        fit_quota(job, one.workload, one.ns.name, quotas.get(one.ns.name))
        for resource, amount in one.workload.requests.items():
            total[resource] = total.get(resource, 0) + amount
        after = ", ".join(f"{d.condition}:{d.target}" for d in one.options.after)
        verdict, ok = _verdict(job)
        preview.jobs.append(
            {"name": job.name, "kind": job.kind, "after": after, "verdict": verdict, "ok": ok, "preview": job}
        )
    preview.namespace = checked[0].ns.name
    preview.demand = page_demand({"requests": total, "pods": sum(one.workload.pods for one in checked)})
    preview.budget = preview.jobs[0]["preview"].budget
    return preview


def _verdict(job: Preview) -> tuple[str, bool]:
    """One job of a workflow in a few words: whether it fits the free quota now, else which key stops it."""
    if job.never:
        return f"can never run as it is: {job.never}", False
    if job.fits is None:
        return "no quota known: admitted when the nodes have room", True
    stops = [row for row in job.fit if not row["ok"]]
    if not stops:
        return "fits the free quota now", True
    row = stops[0]
    if row["never"]:
        return f"can never fit the quota: {row['key']} needs {row['needed']}, the quota is {row['hard']}", False
    return f"does not fit the free quota now: {row['key']} needs {row['needed']}, {row['free']} free", False


def _stream_rows(text: str, documents: Sequence[str], error: JobdashError) -> list[dict]:
    """A refusal's problems with their lines in the whole text: a path `[i].spec...` is
    placed in document i, where it starts in the text."""
    starts = _document_lines(text, documents)
    rows = []
    for problem in error.problems:
        found = _DOCUMENT_PATH.match(problem.path)
        line = None
        if found is not None and int(found.group(1)) < len(documents):
            index, inner = int(found.group(1)), problem.path[found.end() :]
            line = path_lines(documents[index], [inner]).get(inner) if inner else 1
            line = None if line is None else line + starts[index]
        rows.append({"path": problem.path, "message": problem.message, "line": line})
    return rows


def _document_lines(text: str, documents: Sequence[str]) -> list[int]:
    """How many lines of `text` come before each document (each is a slice of it, in order)."""
    starts, cursor = [], 0
    for document in documents:
        at = text.find(document, cursor)
        at = cursor if at < 0 else at
        starts.append(len(_LINE_BREAK.findall(text, 0, at)))
        cursor = at + len(document)
    return starts
