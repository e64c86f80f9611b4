"""The submissions in a create's body (a JSON object or list, or raw YAML with its options in
the query string), for the jobs API (views.py) and the workflows API (workflows.py) alike."""

from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ValidationError

from queueing.safe_yaml import document_path

from .. import services
from ..exceptions import FieldProblem, InvalidInput
from .errors import flatten
from .serializers import OPTION_FIELDS, JobSubmitSerializer

# Query parameter -> (API field, key inside it): a YAML body's workflow options.
_QUERY = {
    "after": ("after", None),
    "keep_if_never_satisfied": ("keep_if_never_satisfied", None),
    "max_run_seconds": ("max_run_seconds", None),
    "start_by": ("start_by", None),
    "checkpoint_every": ("checkpoint_every", None),
    "checkpoint_on_notice": ("checkpoint_on_notice", None),
    "min_runtime": ("min_runtime", None),
    "retry_limit": ("retry", "limit"),
    "retry_on": ("retry", "on"),
    "retry_exit_codes": ("retry", "exit_codes"),
    "retry_backoff_seconds": ("retry", "backoff_seconds"),
}


def query_options(params: Mapping[str, str]) -> dict[str, Any]:
    """The options fields a raw YAML submission gives in its query string (`after` repeatable)."""
    options: dict[str, Any] = {}
    for name, (field, key) in _QUERY.items():
        if name not in params:
            continue
        values = params.getlist(name) if hasattr(params, "getlist") else [params[name]]
        value: Any = ",".join(values) if name == "after" else values[-1]
        if name == "keep_if_never_satisfied":
            value = value.lower() in ("1", "true", "yes")
        elif name == "max_run_seconds" or name in ("retry_limit", "retry_backoff_seconds"):
            value = _number(value)
        if key is None:
            options[field] = value
        else:
            options.setdefault(field, {})[key] = value
    return options


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text  # (with_fields refuses it, naming the field)


def body_submissions(request) -> tuple[list[services.Submission], bool]:
    """The submissions of a create's body and whether it asked for several: a JSON object
    or list, or a raw YAML body (one manifest, kept exactly as sent, or a stream of several)
    with its options in the query string."""
    if isinstance(request.data, bytes):
        options = {
            "priority": request.query_params.get("priority", 0),
            "priority_class": request.query_params.get("priority_class", ""),
            "namespace": request.query_params.get("namespace", "") or None,
            "options": query_options(request.query_params),
        }
        documents = services.yaml_documents(request.data)
        if len(documents) == 1:
            return [services.Submission(request.data, **options)], False
        return [services.Submission(text, **options) for text in documents], True
    if isinstance(request.data, list):
        return submissions_of(request.data), True
    return [submission_of(request.data)], False


def submission_of(data) -> services.Submission:
    body = JobSubmitSerializer(data=data)
    body.is_valid(raise_exception=True)
    manifest, priority, priority_class, namespace = (
        body.validated_data[k] for k in ("manifest", "priority", "priority_class", "namespace")
    )
    options = {k: body.validated_data[k] for k in OPTION_FIELDS if k in body.validated_data}
    return services.Submission(manifest, priority, priority_class, namespace or None, options)


def submissions_of(items: list) -> list[services.Submission]:
    """A JSON list of submissions; the problems of every item at once, each path led by its index."""
    services.check_bulk_size(len(items))
    submissions, problems = [], []
    for index, item in enumerate(items):
        try:
            submissions.append(submission_of(item))
        except ValidationError as error:
            problems += [FieldProblem(document_path(index, p["path"]), p["message"]) for p in flatten(error.detail)]
    if problems:
        raise InvalidInput(problems)
    return submissions
