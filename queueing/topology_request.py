"""What a job asks of the topology, from its annotations (topology.py places it)."""

from __future__ import annotations

from dataclasses import dataclass

from .workload import Workload

REQUIRED_ANNOTATION = "jobdash.io/required-topology"
PREFERRED_ANNOTATION = "jobdash.io/preferred-topology"
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class TopologyRequest:
    level: str  # a node label
    required: bool


def request_of(workload: Workload) -> TopologyRequest | None:
    """The job's topology request, from its annotations (required wins over preferred)."""
    annotations = workload.annotations
    if not annotations:
        return None
    level = annotations.get(REQUIRED_ANNOTATION)
    if level:
        return TopologyRequest(level, True)
    level = annotations.get(PREFERRED_ANNOTATION)
    return TopologyRequest(level, False) if level else None
