"""Error types shared by every stage of manifest intake.

Validation collects every problem before giving up, so a user fixing a
manifest sees all of them in one round trip instead of one per submit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem, located by a dotted path into the manifest.

    ``path`` uses dots between keys and ``[i]`` for list indices, e.g.
    ``spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu``;
    it is ``""`` when the problem concerns the document as a whole.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ManifestError(Exception):
    """The manifest was rejected; ``errors`` lists every problem found.

    ``too_large`` marks a rejection on size alone, which the API reports as
    413 rather than 400 because the content was never looked at.
    """

    def __init__(self, errors: list[FieldError], too_large: bool = False):
        # Passing both through Exception keeps the error picklable (args are
        # replayed into __init__), which matters for task queues and logging.
        super().__init__(list(errors), too_large)
        self.errors: list[FieldError] = list(errors)
        self.too_large: bool = too_large

    def __str__(self) -> str:
        return "; ".join(str(error) for error in self.errors) or "invalid manifest"
