"""Which planned pods of the active jobs lost their node, for the snapshot's replacements
(queueing/replacement.py places them again).

A planned pod is lost when its node failed (the node lifecycle's not-ready or unreachable
taint) or is gone; and, while its job is still starting (Released) and no pod of it has
been bound there, when its node can no longer take it: cordoned, or its room taken
meanwhile by pods that did not come through jobdash (created by another client between our
release and our pod's start). Jobs released earlier keep their room first. A pod that ran
there and ended holds its place: its job is finishing, not starting.
"""

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jobdash.cluster import kinds
from jobdash.cluster.gateway import NodeInfo, ObjectKey, PodInfo
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.jobs.models import State
from queueing.fit import UNLIMITED
from queueing.replacement import Placement, Replacement
from queueing.snapshot import gang_of

# The taints the node lifecycle controller puts on a node that stopped reporting.
FAILED_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})


@dataclass(frozen=True)
class Lost:
    replacements: tuple[Replacement, ...]
    failed_nodes: frozenset[str]

    @property
    def slots(self) -> frozenset[tuple[str, int, str]]:
        """Every planned pod lost: placed anew by the plan, so not charged where it was."""
        return frozenset(slot for replacement in self.replacements for slot in replacement.lost)


def failed_nodes(nodes: Iterable[NodeInfo]) -> frozenset[str]:
    return frozenset(node.name for node in nodes if any(t.get("key") in FAILED_TAINTS for t in node.taints))


def account(
    active: Iterable[ActiveJob],
    pods: Mapping[ObjectKey, list[PodInfo]],
    nodes: list[NodeInfo],
    live_pods: Iterable[PodInfo],
    *,
    pin: bool,
) -> Lost:
    """The snapshot's lost pods (phase 3, lost). Pods go where the plan says only when
    pinned: otherwise no planned node is theirs to lose. A job that cannot be taken back has
    nobody to make its pods again elsewhere: not replaced; an elastic job giving back pods
    loses nothing with them: only the pods it keeps count."""
    if not pin:
        return Lost((), failed_nodes(nodes))
    replaceable = [_kept(job) for job in active if kinds.can_take_back(job.kind_key)]
    return lost(replaceable, pods, nodes, live_pods)


def _kept(job: ActiveJob) -> ActiveJob:
    """The job as it will be once it has given back its extra pods (resize.py), if it is."""
    if not job.shrink_to:
        return job
    keep = job.shrink_to
    placement = tuple(slot for slot in job.placement if slot[1] < keep.get(slot[0], slot[1] + 1))
    return dataclasses.replace(job, placement=placement, workload=job.workload.with_counts(keep))


def lost(
    active: Iterable[ActiveJob],
    pods: Mapping[ObjectKey, list[PodInfo]],
    nodes: list[NodeInfo],
    live_pods: Iterable[PodInfo],
) -> Lost:
    failed = failed_nodes(nodes)
    by_name = {node.name: node for node in nodes}
    room: dict[str, dict[str, int]] = {
        node.name: ({} if node.unschedulable else {"pods": UNLIMITED, **node.allocatable})
        for node in nodes
        if node.name not in failed
    }
    for pod in live_pods:
        left = room.get(pod.node_name or "")
        if left is not None and not pod.terminated:
            for name, amount in pod.requests.items():
                left[name] = left.get(name, 0) - amount
            left["pods"] = left.get("pods", 0) - 1
    replacements = []
    for job in sorted(active, key=lambda j: (j.released_at or 0.0, j.id)):
        if not job.placement:
            continue
        kept, gone = _job(job, pods.get(job.key, ()), by_name, failed, room)
        if gone:
            replacements.append(Replacement(job.id, job.namespace, job.workload, kept, gone))
    return Lost(tuple(replacements), failed)


def _job(
    job: ActiveJob,
    pods: Iterable[PodInfo],
    nodes: Mapping[str, NodeInfo],
    failed: frozenset[str],
    room: dict[str, dict[str, int]],
) -> tuple[Placement, Placement]:
    """(kept, lost) of one job's planned pods; the pods it still has to start on a node are
    charged to that node's `room`."""
    roles = [ps.role for ps in job.workload.pod_sets]
    requests = {group.role.lower(): dict(group.requests) for group in gang_of(job.workload)}
    bound: dict[tuple[str, str], int] = defaultdict(int)  # (role, node) -> its pods bound there
    for pod in pods:
        if pod.node_name and not pod.deleting:
            bound[kinds.pod_role(job.kind_key, pod, roles).lower(), pod.node_name] += 1
    kept, gone = [], []
    for role, index, node in job.placement:
        key = (role.lower(), node)
        if node not in nodes or node in failed:
            gone.append((role, index, node))
        elif bound[key] > 0 or job.state != State.RELEASED:
            # It runs or ran there (its room counted with the live pods), or the job runs:
            # only a failure takes a running job's node.
            bound[key] -= 1
            kept.append((role, index, node))
        elif _fits(room[node], requests.get(role.lower(), {})):
            _charge(room[node], requests.get(role.lower(), {}))
            kept.append((role, index, node))
        else:
            gone.append((role, index, node))
    return tuple(kept), tuple(gone)


def _fits(left: Mapping[str, int], requests: Mapping[str, int]) -> bool:
    return all(left.get(name, 0) >= amount for name, amount in requests.items())


def _charge(left: dict[str, int], requests: Mapping[str, int]) -> None:
    for name, amount in requests.items():
        left[name] = left.get(name, 0) - amount
