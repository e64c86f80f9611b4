"""What the webhook answers to one AdmissionRequest (decide.py and edits.py make them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
