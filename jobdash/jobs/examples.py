"""Example manifests shipped in examples/, offered on the submit page: one job per file, and
the workflow examples of examples/workflows/ (`workflows/pipeline`, `workflows/sweep`)."""

import re
from pathlib import Path

from django.conf import settings

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_FOLDERS = ("", "workflows/")
# How a workflow example says, in its opening comments, the array it is submitted as.
_ARRAY = re.compile(r"^#.*--array[ =](\S+)", re.M)


def example_names() -> list[str]:
    """The examples' names: each file's stem, prefixed by its folder under examples/."""
    root = Path(settings.JOBDASH_EXAMPLES_DIR)
    return [
        folder + path.stem
        for folder in _FOLDERS
        for path in sorted((root / folder).glob("*.yaml"))
        if _NAME.match(path.stem)
    ]


def example_text(name: str) -> str | None:
    # Only names listed above: a request parameter never becomes a path.
    if name not in example_names():
        return None
    return (Path(settings.JOBDASH_EXAMPLES_DIR) / f"{name}.yaml").read_text()


def example_array(text: str) -> str:
    """The array an example is meant to be submitted as (sweep.yaml's comments:
    `jobdash submit examples/workflows/sweep.yaml --array 0-9%3`), for the form's Array
    option; "" for any other."""
    found = _ARRAY.search(text)
    return found.group(1).strip("\"'") if found else ""
