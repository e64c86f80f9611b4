"""What a job asks of the clusters, and a cluster as a plan sees it (clusters.py plans with them).

Kept apart from clusters.py, which places gangs, so that snapshot.py can read a job's request
without importing the node pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import FieldError
from .namespace_quota import NamespaceQuota
from .workload import Workload

CLUSTER_LABEL = "jobdash.io/cluster"  # a node's cluster; on a job, the one it requires


def released_words(cluster: str) -> str:
    """Where a Released event says the job went: "cluster west", or "the cluster" (one)."""
    return f"cluster {cluster}" if cluster else "the cluster"


PREFERRED_ANNOTATION = "jobdash.io/preferred-cluster"
SELECTOR_ANNOTATION = "jobdash.io/cluster-selector"


@dataclass(frozen=True)
class Cluster:
    """One cluster as a plan sees it: its labels, each namespace's ResourceQuota there
    (combined, as one namespace's several quotas are), and whether it is lost."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    quotas: Mapping[str, NamespaceQuota] = field(default_factory=dict)
    lost: bool = False
    cordoned: bool = False  # an admin sends nothing new there


@dataclass(frozen=True)
class ClusterRequest:
    required: str = ""
    preferred: str = ""
    selector: tuple[tuple[str, str], ...] = ()

    def allows(self, cluster: Cluster) -> bool:
        if self.required and cluster.name != self.required:
            return False
        return all(cluster.labels.get(key) == value for key, value in self.selector)


def request_of(workload: Workload) -> ClusterRequest | None:
    """The job's wish for clusters, from its annotations; None: any cluster."""
    annotations = workload.annotations
    if not annotations:
        return None
    required = annotations.get(CLUSTER_LABEL) or ""
    preferred = annotations.get(PREFERRED_ANNOTATION) or ""
    selector = _selector(annotations.get(SELECTOR_ANNOTATION) or "")
    if not (required or preferred or selector):
        return None
    return ClusterRequest(required, preferred, tuple(selector or ()))


def asks(annotations: Mapping[str, str]) -> bool:
    """Whether the annotations ask anything of the clusters."""
    return any(key in annotations for key in (CLUSTER_LABEL, PREFERRED_ANNOTATION, SELECTOR_ANNOTATION))


def problems(annotations: Mapping[str, str], known: Mapping[str, Mapping[str, str]] | None = None) -> list[FieldError]:
    """What is wrong with the cluster annotations, each at its path; `known`: the configured
    clusters, name -> labels (empty: one cluster, nothing checked against them)."""
    found = []
    known = known or {}
    names = ", ".join(known)
    for annotation in (CLUSTER_LABEL, PREFERRED_ANNOTATION):
        name = annotations.get(annotation)
        if name is not None and known and name not in known:
            found.append(FieldError(_path(annotation), f"no cluster {name!r}; the clusters are {names}"))
    text = annotations.get(SELECTOR_ANNOTATION)
    if text is not None:
        pairs = _selector(text)
        if pairs is None:
            found.append(FieldError(_path(SELECTOR_ANNOTATION), f"must be key=value[,key=value], got {text!r}"))
        elif known and not any(all(labels.get(k) == v for k, v in pairs) for labels in known.values()):
            labelled = "; ".join(f"{name}: {_words(labels)}" for name, labels in known.items())
            found.append(FieldError(_path(SELECTOR_ANNOTATION), f"no cluster has the labels {text!r} ({labelled})"))
    return found


def _words(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items())) or "no labels"


def _path(annotation: str) -> str:
    return f'metadata.annotations["{annotation}"]'


def _selector(text: str) -> list[tuple[str, str]] | None:
    """key=value pairs, comma-separated; None when malformed."""
    pairs = []
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        key, equals, value = part.partition("=")
        if not equals or not key.strip() or not value.strip():
            return None
        pairs.append((key.strip(), value.strip()))
    return pairs
