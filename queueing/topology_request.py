"""What a job asks of the topology, from its annotations (topology.py places it).

- ``jobdash.io/required-topology: <level>``: the whole gang in one domain of the level;
- ``jobdash.io/preferred-topology: <level>``: there if it can, else in as few as it can;
- ``jobdash.io/slice-required-topology: <level>`` with ``jobdash.io/slice-size: <n>``: each
  role's pods cut into slices of n (the last may be smaller), each slice in one domain of
  the level, the slices wherever they fit (Kueue's ``podset-slice-required-topology`` and
  ``podset-slice-size``). With a required or preferred level as well, the slices stay
  within the domain that request picks; alone, the whole cluster is theirs (as Kueue reads a
  slice-only request: the top level, unconstrained). A size that is not a whole number
  above 0, a size without a level or a level without a size is refused at submission
  (``problems``); read here it asks nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import FieldError
from .workload import Workload

REQUIRED_ANNOTATION = "jobdash.io/required-topology"
PREFERRED_ANNOTATION = "jobdash.io/preferred-topology"
SLICE_REQUIRED_ANNOTATION = "jobdash.io/slice-required-topology"
SLICE_SIZE_ANNOTATION = "jobdash.io/slice-size"
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class TopologyRequest:
    level: str  # a node label; "" when only slices are asked for
    required: bool
    slice_level: str = ""  # a node label each slice keeps to; "" for no slices
    slice_size: int = 0  # pods per slice (with slice_level)


def request_of(workload: Workload) -> TopologyRequest | None:
    """The job's topology request, from its annotations (required wins over preferred)."""
    annotations = workload.annotations
    if not annotations:
        return None
    slice_level, slice_size = _slices(
        annotations.get(SLICE_REQUIRED_ANNOTATION), annotations.get(SLICE_SIZE_ANNOTATION)
    )
    level = annotations.get(REQUIRED_ANNOTATION)
    if level:
        return TopologyRequest(level, True, slice_level, slice_size)
    level = annotations.get(PREFERRED_ANNOTATION)
    if level:
        return TopologyRequest(level, False, slice_level, slice_size)
    return TopologyRequest("", False, slice_level, slice_size) if slice_level else None


def problems(annotations: Mapping[str, str]) -> list[FieldError]:
    """What is wrong with the slice annotations, each at its path (empty: nothing)."""
    level, size = annotations.get(SLICE_REQUIRED_ANNOTATION), annotations.get(SLICE_SIZE_ANNOTATION)
    if level is None and size is None:
        return []
    found = []
    if size is not None and not (str(size).strip().isdigit() and int(str(size).strip()) > 0):
        found.append(FieldError(_path(SLICE_SIZE_ANNOTATION), f"must be a whole number above 0, got {size!r}"))
    elif size is None:
        found.append(FieldError(_path(SLICE_SIZE_ANNOTATION), f"required with {SLICE_REQUIRED_ANNOTATION}"))
    if not level:
        found.append(FieldError(_path(SLICE_REQUIRED_ANNOTATION), f"required with {SLICE_SIZE_ANNOTATION} (a level)"))
    return found


def _path(annotation: str) -> str:
    return f'metadata.annotations["{annotation}"]'


def _slices(level: object, size: object) -> tuple[str, int]:
    if not level or not isinstance(level, str) or not isinstance(size, str) or not size.strip().isdigit():
        return "", 0
    number = int(size.strip())
    return (level, number) if number > 0 else ("", 0)
