"""Every API error has one shape: {"errors": [{"path": "...", "message": "..."}]}."""

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..exceptions import JobdashError


def flatten(detail, path: str = ""):
    """A DRF error detail as {"path", "message"} items."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            key = "" if key == "non_field_errors" else str(key)
            yield from flatten(value, f"{path}.{key}" if path and key else path or key)
    elif isinstance(detail, list):
        for item in detail:
            yield from flatten(item, path)
    else:
        yield {"path": path, "message": str(detail)}


def errors_response(problems, status: int, headers=None) -> Response:
    return Response({"errors": list(problems)}, status=status, headers=headers)


def _django_problems(error: DjangoValidationError):
    """A service's ValidationError (keyed by field, as forms show it) in the API's shape."""
    if hasattr(error, "error_dict"):
        for field, messages in error.message_dict.items():
            for message in messages:
                yield {"path": "" if field == NON_FIELD_ERRORS else field, "message": message}
    else:
        for message in error.messages:
            yield {"path": "", "message": message}


def exception_handler(exc, context):
    if isinstance(exc, JobdashError):
        return errors_response(({"path": p.path, "message": p.message} for p in exc.problems), exc.status)
    if isinstance(exc, DjangoValidationError):
        return errors_response(_django_problems(exc), 400)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        problems = list(flatten(exc.detail))
    else:
        # DRF has already turned Http404/PermissionDenied into {"detail": ...}.
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        problems = [{"path": "", "message": str(detail)}]
    response.data = {"errors": problems}
    return response
