"""Workflows as the API gives them: jobs submitted as one graph (a YAML stream led by a
jobdash.io/v1 Workflow document) or as one array."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The order of a workflow's progress: succeeded of all, the active from the furthest on, the other ends.
PROGRESS_ORDER = ("Succeeded", "Running", "Released", "Queued", "Failed", "Cancelled")


@dataclass(frozen=True)
class WorkflowJob:
    id: int
    name: str
    state: str
    reason: str = ""
    array_index: int | None = None
    retries: int = 0
    after: tuple[tuple[str, int], ...] = ()  # (condition, job id): what it waits for

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkflowJob:
        return cls(
            id=data["id"],
            name=data["name"],
            state=data["state"],
            reason=data.get("reason") or "",
            array_index=data.get("array_index"),
            retries=data.get("retries") or 0,
            after=tuple((edge["condition"], edge["job"]) for edge in data.get("after") or ()),
        )


@dataclass(frozen=True)
class Workflow:
    id: int
    namespace: str
    name: str
    kind: str  # "dag" or "array"
    progress: Mapping[str, int]  # its jobs by state
    raw: Mapping[str, Any] = field(repr=False)
    array: str = ""  # an array's spec, "0-99%5"
    concurrency: int | None = None  # jobs admitted at once (an array's %N); None: no limit
    submitted_by: str = ""
    created_at: str | None = None
    cancelled_at: str | None = None
    jobs: Sequence[WorkflowJob] = ()  # in a workflow's detail only

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Workflow:
        return cls(
            id=data["id"],
            namespace=data["namespace"],
            name=data["name"],
            kind=data.get("kind", ""),
            progress=dict(data.get("progress") or {}),
            raw=data,
            array=data.get("array") or "",
            concurrency=data.get("concurrency"),
            submitted_by=data.get("submitted_by") or "",
            created_at=data.get("created_at"),
            cancelled_at=data.get("cancelled_at"),
            jobs=tuple(WorkflowJob.from_json(job) for job in data.get("jobs") or ()),
        )

    @property
    def total(self) -> int:
        return sum(self.progress.values())

    def progress_text(self) -> str:
        """ "2/5 Succeeded, 1 Running, 2 Queued": how many succeeded of all, then the other states."""
        others = [f"{self.progress[s]} {s}" for s in PROGRESS_ORDER[1:] if self.progress.get(s)]
        others += [f"{n} {s}" for s, n in sorted(self.progress.items()) if s not in PROGRESS_ORDER and n]
        return ", ".join([f"{self.progress.get('Succeeded', 0)}/{self.total} Succeeded", *others])
