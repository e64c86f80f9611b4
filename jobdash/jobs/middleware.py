"""Two answers the views never have to give themselves.

- Input PostgreSQL cannot store (a NUL, a lone surrogate) in the path, a query parameter
  or a form field is a 400 naming it, before any view runs a query with it: every page,
  form, API list filter and admin changelist is covered at once.
- A database that cannot be reached is a 503 with Retry-After, not a 500: the request
  was fine, the service is briefly unable to answer it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

from .storable import params_problem, text_problem

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
RETRY_AFTER_SECONDS = 5


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _error(request: HttpRequest, status: int, path: str, message: str) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"errors": [{"path": path, "message": message}]}, status=status)
    where = f"{path}: " if path else ""
    return HttpResponse(f"{where}{message}\n", status=status, content_type="text/plain; charset=utf-8")


class RefuseUnstorableInput:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        found = self._problem(request)
        if found is not None:
            return _error(request, 400, *found)
        return self.get_response(request)

    @staticmethod
    def _problem(request: HttpRequest) -> tuple[str, str] | None:
        if problem := text_problem(request.path):
            return "(path)", problem
        query = [(name, value) for name, values in request.GET.lists() for value in values]
        if found := params_problem(query):
            return f"?{found[0]}", found[1]
        if request.method == "POST" and request.content_type in FORM_TYPES:
            form = [(name, value) for name, values in request.POST.lists() for value in values]
            return params_problem(form)
        return None


class DatabaseUnavailable:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        response = _error(request, 503, "", "the database is unavailable for a moment; try again")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
