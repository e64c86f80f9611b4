"""Domain errors raised by services; the API, views and admin turn them into responses."""

from dataclasses import dataclass

from queueing.safe_yaml import document_path


@dataclass(frozen=True)
class FieldProblem:
    path: str
    message: str


class JobdashError(Exception):
    status = 400
    # In a bulk submission: the index of the document at fault; its paths start with "[i]".
    document: int | None = None

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    @property
    def problems(self) -> list[FieldProblem]:
        found = self._problems()
        if self.document is None:
            return found
        return [FieldProblem(document_path(self.document, p.path), p.message) for p in found]

    def _problems(self) -> list[FieldProblem]:
        return [FieldProblem("", self.message)]

    def in_document(self, index: int) -> "JobdashError":
        """The same refusal, located in document `index` of a bulk submission."""
        self.document = index
        return self

    def __str__(self) -> str:
        if self.document is None:
            return self.message
        return "; ".join(f"{p.path}: {p.message}" for p in self.problems)


class InvalidInput(JobdashError):
    def __init__(self, problems: list[FieldProblem], *, too_large: bool = False):
        # A problem of the whole manifest or request has no path: its message alone says it.
        super().__init__("; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in problems))
        self.found = problems
        self.status = 413 if too_large else 400

    def _problems(self) -> list[FieldProblem]:
        return self.found

    @classmethod
    def at(cls, path: str, message: str) -> "InvalidInput":
        return cls([FieldProblem(path, message)])


class NotMember(JobdashError):
    status = 403


class Forbidden(NotMember):
    """A 403 about one field (a priority above the namespace's limit, a staff-only value)."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path

    def _problems(self) -> list[FieldProblem]:
        return [FieldProblem(self.path, self.message)]


class NotFound(JobdashError):
    status = 404


class Conflict(JobdashError):
    status = 409


class ClusterUnavailable(JobdashError):
    """Something the submission needs from the cluster (a TrainJob's runtime) could not be read."""

    status = 503

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path

    def _problems(self) -> list[FieldProblem]:
        return [FieldProblem(self.path, self.message)]
