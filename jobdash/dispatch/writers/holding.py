"""What the dispatcher does to a job's object around its run: let it run (created, or its
held object unsuspended), with its pod templates gated so that every pod waits for the node
the planner chose (queueing.placement), and take it back (suspended with its templates as
the user wrote them, or deleted). Every write carries the leader's term."""

import logging
from collections.abc import Mapping
from typing import Any

from jobdash.cluster import gateway as gw
from jobdash.cluster import kinds
from jobdash.cluster.gateway import JOB_ID_LABEL
from queueing import capabilities, placement
from queueing.workload import Workload

log = logging.getLogger(__name__)


def created(
    gateway: gw.ClusterGateway,
    job_id: int,
    manifest: dict[str, Any],
    workload: Workload | None,
    term: int | None,
    scale: Mapping[str, int] | None = None,
    nodes: Mapping[str, str] | None = None,
) -> gw.JobObject:
    """Create the job's object; with `workload` (pinned placement) its templates gated, or
    naming the one node of a role `nodes` names (placement.one_node_roles); with `scale`,
    the pods of its elastic roles it was admitted with."""
    adapter = kinds.adapter(kinds.key_of(manifest["apiVersion"], manifest["kind"]))
    if workload is not None:
        manifest = placement.hold(adapter, manifest, workload, nodes)
    if scale:
        manifest = capabilities.scaled(adapter, manifest, scale)
    return gateway.create_job_object(job_id=job_id, manifest=manifest, term=term)


def unsuspended(
    gateway: gw.ClusterGateway,
    key: gw.ObjectKey,
    job_id: int,
    workload: Workload | None,
    term: int | None,
    scale: Mapping[str, int] | None = None,
    nodes: Mapping[str, str] | None = None,
) -> gw.JobObject:
    """Let a held (suspended) object run: bound to the job by its label and unsuspended;
    with `workload`, its templates gated first, or naming their role's one node (`nodes`)
    (Kueue's RunWithPodSetsInfo); with `scale`, its elastic roles set to the pods it was
    admitted with."""
    if workload is None and not scale:
        gateway.label_job_object(key, job_id, term)
        gateway.set_suspended(key, False, term)
        return gateway.read_job_object(key)
    adapter = kinds.adapter(key[0])

    def gate(obj: dict[str, Any]) -> dict[str, Any]:
        if workload is not None:
            obj = placement.hold(adapter, obj, workload, nodes)
        if scale:
            obj = capabilities.scaled(adapter, obj, scale)
        obj.setdefault("metadata", {}).setdefault("labels", {})[JOB_ID_LABEL] = str(job_id)
        return obj

    # Two writes: a kind's rules may let its templates change only while it stays suspended
    # (its operator's own webhook may refuse them once it runs).
    gateway.update_job_object(key, gate, term)
    gateway.set_suspended(key, False, term)
    return gateway.read_job_object(key)


def suspended(gateway: gw.ClusterGateway, key: gw.ObjectKey, term: int | None) -> None:
    """Suspend the object, then give its templates back as the user wrote them (Kueue's
    RestorePodSetsInfo). A kind's rules may refuse the second write until its controller
    has seen the suspend (a batch Job's templates change only once it is not started):
    the gate left on is harmless, the next release gates the templates anyway."""
    gateway.set_suspended(key, True, term)
    adapter = kinds.adapter(key[0])
    try:
        gateway.update_job_object(key, lambda obj: placement.restore(adapter, obj), term)
    except gw.NotFound:
        pass
    except (gw.Fatal, gw.Conflict, gw.Transient) as error:
        log.info("restoring the templates of %s/%s after its suspend: %s", key[1], key[2], error)


def taken_back(gateway: gw.ClusterGateway, key: gw.ObjectKey, mode: str, term: int | None) -> None:
    """A job's object taken back from the cluster: suspended in `unsuspend` mode (it waits
    in the cluster again), deleted otherwise. Fenced by the term like every write of ours
    (the webhook refuses a deposed leader's update; a delete removes only the version it
    stamped); called after the job's own transition committed under the term."""
    if mode == "unsuspend":
        suspended(gateway, key, term)
    else:
        gateway.delete_job_object(key, term)


def evicted(gateway: gw.ClusterGateway, key: gw.ObjectKey, term: int | None) -> None:
    """A preempted job's object: suspended where its kind can be (it resumes from its last
    checkpoint), else deleted."""
    try:
        if kinds.can_suspend(key[0]):
            suspended(gateway, key, term)
        else:
            gateway.delete_job_object(key, term)
    except gw.NotFound:
        pass
