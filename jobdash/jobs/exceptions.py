"""Domain errors raised by services; the API, views and admin turn them into responses."""

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldProblem:
    path: str
    message: str


class JobdashError(Exception):
    status = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    @property
    def problems(self) -> list[FieldProblem]:
        return [FieldProblem("", self.message)]


class InvalidInput(JobdashError):
    def __init__(self, problems: list[FieldProblem], *, too_large: bool = False):
        super().__init__("; ".join(f"{p.path or '(document)'}: {p.message}" for p in problems))
        self._problems = problems
        self.status = 413 if too_large else 400

    @property
    def problems(self) -> list[FieldProblem]:
        return self._problems

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

    @property
    def problems(self) -> list[FieldProblem]:
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

    @property
    def problems(self) -> list[FieldProblem]:
        return [FieldProblem(self.path, self.message)]
