"""Example manifests shipped in examples/, offered on the submit page."""

import re
from pathlib import Path

from django.conf import settings

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def example_names() -> list[str]:
    folder = Path(settings.JOBDASH_EXAMPLES_DIR)
    return sorted(p.stem for p in folder.glob("*.yaml") if _NAME.match(p.stem))


def example_text(name: str) -> str | None:
    # Only names listed above: a request parameter never becomes a path.
    if name not in example_names():
        return None
    return (Path(settings.JOBDASH_EXAMPLES_DIR) / f"{name}.yaml").read_text()
