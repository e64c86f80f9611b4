"""What the webhook answers to one AdmissionRequest (decide.py, edits.py and pods.py make them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobdash.jobs.exceptions import ClusterUnavailable, Forbidden, InvalidInput


@dataclass(frozen=True)
class Decision:
    allowed: bool
    message: str = ""
    code: int | None = None
    reason: str = ""
    patch: list[dict] | None = None
    warnings: list[str] | None = None
    job_id: int | None = None  # for the log, not the response

    def response_fields(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "message": self.message,
            "code": self.code,
            "reason": self.reason,
            "patch": self.patch,
            "warnings": self.warnings,
        }


ALLOW = Decision(allowed=True)


def refused(code: int, message: str, reason: str = "Invalid", job_id: int | None = None) -> Decision:
    """Every refusal the webhook answers, so each one carries a code, a reason and a message
    (422 Invalid unless said otherwise), as the API server shows them to whoever wrote."""
    return Decision(allowed=False, code=code, reason=reason, message=message, job_id=job_id)


def service_refusal(
    error: InvalidInput | Forbidden | ClusterUnavailable, cannot: str, job_id: int | None = None
) -> Decision:
    """A service's refusal of what the request would store, as the webhook's answer; `cannot`
    says what jobdash cannot do ("jobdash cannot queue <Kind> team-a/x"). A field at fault is
    422 (413: too large); a field above what the namespace allows, 403 (the same rule as for
    a member); what the job refers to unreadable now (a runtime the job names), 503: the
    creator retries."""
    if isinstance(error, InvalidInput):
        return refused(413 if error.status == 413 else 422, f"{cannot}: {error.message}", job_id=job_id)
    if isinstance(error, Forbidden):
        return refused(403, f"{cannot}: {error.path}: {error.message}", "Forbidden", job_id)
    return refused(503, f"{cannot} now: {error.path}: {error.message}", "ServiceUnavailable", job_id)
