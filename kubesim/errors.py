"""API errors as the API server reports them: a ``metav1.Status`` with a code and a reason.

Every refusal in kubesim is an ``ApiError``; the HTTP layer serializes ``.status()``
verbatim, so the official client raises ``ApiException`` with the same ``status``,
``reason`` and JSON body it would get from a real cluster.
"""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None, headers: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict:
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


def _details(name: str | None, group: str, kind: str) -> dict:
    details = {"group": group, "kind": kind}
    if name is not None:
        details = {"name": name, **details}
    return details


def not_found(group: str, plural: str, name: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', _details(name, group, plural))


def already_exists(group: str, plural: str, name: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(409, "AlreadyExists", f'{qualified} "{name}" already exists', _details(name, group, plural))


def conflict(group: str, plural: str, name: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": '
        "the object has been modified; please apply your changes to the latest version and try again",
        _details(name, group, plural),
    )


def invalid(group: str, kind: str, name: str, causes: list[dict]) -> ApiError:
    """422 like apiserver validation: 'Kind.group "name" is invalid: field: message, ...'."""
    qualified = f"{kind}.{group}" if group else kind
    text = ", ".join(f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes)
    details = {**_details(name or None, group, kind), "causes": causes}
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


def forbidden(group: str, plural: str, name: str, message: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(403, "Forbidden", f'{qualified} "{name}" is forbidden: {message}', _details(name, group, plural))


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def too_many_requests(retry_after: int = 1) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        {"retryAfterSeconds": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def timeout(message: str) -> ApiError:
    return ApiError(504, "Timeout", message)
