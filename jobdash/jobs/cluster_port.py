"""The only door from jobs/ to jobdash.cluster (and to jobdash.leader, the election): what
the web side asks of the running system beyond its database.

- A submission reads what a job refers to (a TrainJob's runtime) and the PriorityClasses
  it involves from the cluster, through the gateway, and only then: the web otherwise
  never talks to the cluster. A source is built per request and reads each object once.
- A user's role in a namespace, when the cluster's RBAC decides it (jobs/roles.py): a
  SubjectAccessReview through the gateway, cached per process (cluster/access.py).
- The status reads ask the election backend who holds the leadership, so that a leader
  whose lock is gone is not reported as leading.

Everything else in jobs/ reads the database. tests/jobdash/test_layering.py allows
jobdash.cluster and jobdash.leader in jobs/ from this module alone.
"""

from typing import Any

from jobdash.cluster import access, priorities, runtimes
from jobdash.cluster.access import Granted
from jobdash.cluster.priorities import GatewayPriorities as PrioritySource
from jobdash.cluster.priorities import PriorityClass, PriorityClassUnreadable
from jobdash.cluster.runtimes import RuntimeUnreadable
from queueing.workload import RuntimeSource

__all__ = [
    "ElectionUnreadable",
    "Granted",
    "PriorityClass",
    "PriorityClassUnreadable",
    "PrioritySource",
    "RuntimeUnreadable",
    "cluster_labels",
    "clusters",
    "leader_term",
    "priority_source",
    "rbac_role",
    "runtime_source",
]


class ElectionUnreadable(Exception):
    """The election backend could not be asked: who leads is unknown, not "nobody"."""


def runtime_source() -> RuntimeSource:
    """What jobs refer to, read from the cluster when a job first asks (RuntimeUnreadable
    when it cannot be asked)."""
    return runtimes.from_settings()


def priority_source() -> PrioritySource:
    """The cluster's PriorityClasses, each read once by this source (PriorityClassUnreadable
    when the cluster cannot be asked)."""
    return priorities.from_settings()


def rbac_role(user: str, groups: list[str], namespace: str) -> Granted:
    """What the cluster's RBAC lets the Kubernetes user `user` (in `groups`) do in `namespace`."""
    return access.from_settings().role(user, groups, namespace)


def leader_term() -> int | None:
    """The term of whoever holds the election now, None if nobody does; raises
    ElectionUnreadable when the backend cannot be asked."""
    # Imported when first asked: the webhook's process never asks, and need not load the
    # election's backends (Consul's client among them).
    from jobdash.leader import BackendError
    from jobdash.leader.factory import elector_from_settings

    try:
        holder = elector_from_settings().holder()
    except BackendError as error:
        raise ElectionUnreadable(str(error)) from error
    return None if holder is None else holder.term


def cluster_labels() -> dict[str, dict[str, str]]:
    """The clusters jobdash dispatches to, name -> labels, when there are several (the
    dispatcher records them: jobdash.clusters); {} with one cluster, or before its first cycle."""
    from jobdash.clusters.models import Cluster

    return dict(Cluster.objects.order_by("name").values_list("name", "labels"))


def clusters(name: str | None = None) -> list[dict[str, Any]]:
    """The clusters as the dispatcher recorded them, by name (of `name` alone when given):
    name, labels, health (Answering, Lost, Returning), answered_at, lost_at, cordoned; []
    with one cluster, or before its first cycle."""
    from jobdash.clusters.models import Cluster

    rows = Cluster.objects.order_by("name")
    if name is not None:
        rows = rows.filter(name=name)
    return [dict(row) for row in rows.values("name", "labels", "health", "answered_at", "lost_at", "cordoned")]


def several_clusters() -> bool:
    """Whether jobdash dispatches to several clusters (the dispatcher records each)."""
    from jobdash.clusters.models import Cluster

    return Cluster.objects.exists()
