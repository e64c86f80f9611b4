"""The world as the admission cycle sees it: plain, frozen data.

The caller (the dispatcher, a trace replay, a test) builds one ``Snapshot``
per cycle from the database and the cluster; the planner never looks
anywhere else, so the same snapshot always yields the same plan.  Times are
float seconds since the epoch and the caller owns the clock (``Snapshot.now``).

Amounts are canonical integers as in ``workload.py``: cpu in millicores,
memory and storage in bytes, devices and pods as counts.  Quota amounts are
keyed like ResourceQuota (``requests.cpu``, ``pods``, ...); node amounts like
node allocatable (``cpu``, ``nvidia.com/gpu``, ``pods``, ...).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from .cards import SharedCards
from .cluster_request import Cluster, ClusterRequest
from .cluster_request import request_of as cluster_request_of
from .namespace_quota import NamespaceQuota
from .node_affinity import NodeAffinity, canonical, matches
from .tide import LentPool, checkpoints_of
from .topology_request import TopologyRequest, request_of
from .workload import Workload

if TYPE_CHECKING:  # policy.py, replacement.py, holds.py and defrag.py import this module
    from .defrag import DefragRules
    from .holds import Budget, Dependencies, GroupLimit
    from .policy import Policy
    from .replacement import Replacement

K = TypeVar("K")
V = TypeVar("V")
H = TypeVar("H", bound=Hashable)

# A pod consumes one of the node's "pods" slots whatever else it asks for.
PODS = "pods"
# Taint effects that keep a pod off a node; PreferNoSchedule is only a preference.
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def _frozen(value: Mapping[K, V] | None) -> Mapping[K, V]:
    return MappingProxyType(dict(value or {}))


# Jobs of the same shape share their derived values (gang, totals, demand):
# 100k queued jobs are mostly a few hundred shapes, and sharing cuts memory
# several-fold and lets a cycle cache per-shape work by identity.  The
# table only ever maps a value to an equal value, so clearing it when it
# grows large changes nothing but memory.
_INTERNED: dict[Hashable, Any] = {}
_INTERN_LIMIT = 100_000


def _intern(value: H) -> H:
    """The shared object equal to ``value`` (``value`` itself the first time)."""
    found: H | None = _INTERNED.get(value)
    return _remember(value, value) if found is None else found


def _interned_map(amounts: Mapping[str, int]) -> Mapping[str, int]:
    key = ("map",) + tuple(sorted(amounts.items()))
    found: Mapping[str, int] | None = _INTERNED.get(key)
    return _remember(key, MappingProxyType(dict(amounts))) if found is None else found


def _remember(key: Hashable, value: V) -> V:
    if len(_INTERNED) >= _INTERN_LIMIT:
        _INTERNED.clear()
    _INTERNED[key] = value
    return value


class Constraints(NamedTuple):
    """Where a pod may run at all, each part in one canonical spelling (sorted tuples), so
    that equal constraints compare and hash equal and a cycle finds a pod's eligible nodes
    once per kind of constraint."""

    selector: tuple[tuple[str, str], ...]  # nodeSelector
    tolerations: tuple[tuple[tuple[str, Any], ...], ...]
    affinity: NodeAffinity  # the required node affinity's terms (node_affinity.canonical)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def tolerated_by(self, tolerations: Iterable[Mapping[str, Any]]) -> bool:
        """Kubernetes' ToleratesTaint, for any of the given tolerations."""
        for toleration in tolerations:
            effect = toleration.get("effect") or ""
            if effect and effect != self.effect:
                continue
            key = toleration.get("key") or ""
            if toleration.get("operator", "Equal") == "Exists":
                if not key or key == self.key:
                    return True
            elif key == self.key and (toleration.get("value") or "") == self.value:
                return True
        return False

    @property
    def blocks(self) -> bool:
        return self.effect in _BLOCKING_EFFECTS


@dataclass(frozen=True, slots=True)
class PodGroup:
    """``count`` identical pods of one role, reduced to what placement needs.

    ``requests`` holds only non-zero amounts plus one ``pods`` slot, sorted by
    name; ``constraints`` its nodeSelector, tolerations and required node affinity.
    """

    role: str
    count: int
    requests: tuple[tuple[str, int], ...]
    constraints: Constraints

    @property
    def selector(self) -> dict[str, str]:
        return dict(self.constraints.selector)

    @property
    def tolerations(self) -> tuple[dict[str, Any], ...]:
        return tuple(dict(t) for t in self.constraints.tolerations)


def gang_of(workload: Workload) -> tuple[PodGroup, ...]:
    """Every pod the job runs, as pod groups (TFJob: one per replica type)."""
    groups = []
    for pod_set in workload.pod_sets:
        if pod_set.count <= 0:
            continue
        requests = {name: amount for name, amount in pod_set.requests.items() if amount > 0}
        requests[PODS] = 1
        selector = tuple(sorted(pod_set.node_selector.items()))
        tolerations = tuple(sorted(tuple(sorted(t.items())) for t in pod_set.tolerations))
        constraints = Constraints(selector, tolerations, canonical(pod_set.node_affinity))
        group = PodGroup(pod_set.role, pod_set.count, tuple(sorted(requests.items())), constraints)
        groups.append(_intern(group))
    return _intern(tuple(groups))


def node_totals(gang: tuple[PodGroup, ...]) -> Mapping[str, int]:
    """Node resources summed over every pod of the gang, ``pods`` included."""
    totals: dict[str, int] = {}
    for group in gang:
        for name, amount in group.requests:
            totals[name] = totals.get(name, 0) + amount * group.count
    return _interned_map(totals)


@dataclass(frozen=True, slots=True, init=False)
class PendingJob:
    """A queued job.  ``demand`` defaults to ``workload.quota_demand()``.

    Pass ``demand`` explicitly when the stored demand differs, e.g. in
    ``unsuspend`` release mode the suspended TFJob already counts in
    ``count/tfjobs.kubeflow.org`` used, so the dispatcher drops that key.
    ``expected_duration`` (seconds) is the caller's estimate; ``None`` lets
    the planner use the workload's ``jobdash.io/expected-duration`` annotation
    or the namespace's history (see ``eta.duration_of``).  ``bound`` (seconds) is its
    predicted tail run-time bound (``Prediction.tail_s``; None: no prediction), for lent nodes (tide.py).

    The derived fields (``gang``, ``totals``, and ``demand`` made read-only)
    are computed once here, not per cycle, and jobs of the same shape share
    them: a dispatcher that keeps PendingJob objects between cycles pays for
    them once per job, and 100k queued jobs cost about 170 bytes each.
    """

    id: int
    namespace: str
    priority: int
    submitted_at: float
    workload: Workload
    attempts: int = 0
    backoff_until: float | None = None
    expected_duration: float | None = None
    # The job this one was last preempted to make room for (it keeps its place in the queue).
    preempted_by: int | None = None
    # It waited for victims to leave after the previous cycle (its reason was Preempting).
    preempting: bool = False
    # A group of pods that are not all created yet (their user makes them): how many are.
    pods_created: int | None = None
    bound: float | None = None
    # Workflows (holds.py): its dependencies not met yet; the array it belongs to (its workflow id).
    after: Dependencies | None = None
    group: int | None = None
    # The API's checkpoint_on_notice field said it writes one when told (as its annotation would).
    checkpoints_on_notice: bool = False
    demand: Mapping[str, int] = field(kw_only=True)  # (kw_only: no default, after fields that have one)
    gang: tuple[PodGroup, ...] = field(init=False, repr=False, compare=False)
    # Sum of node resources over all pods (including "pods"), for the cluster-wide early reject.
    totals: Mapping[str, int] = field(init=False, repr=False, compare=False)
    cpu: int = field(init=False, repr=False, compare=False)
    # Its topology request (topology.py), read from its annotations once.
    topology: TopologyRequest | None = field(init=False, repr=False, compare=False)
    # The clusters it asks for (clusters.py), read from its annotations once; None: any.
    clusters: ClusterRequest | None = field(init=False, repr=False, compare=False)
    # Whether it checkpoints (may run past a lent pool's reclaim: tide.py), from its annotations,
    # or ``checkpoints_on_notice``: the API's checkpoint_on_notice field said so.
    checkpoints: bool = field(init=False, repr=False, compare=False)
    elastic: bool = field(init=False, repr=False, compare=False)  # workload.elastic, read once per cycle
    in_workflow: bool = field(init=False, repr=False, compare=False)  # after or group: phase 3a asks holds.py

    # Written out, not generated: ``demand`` may be omitted here, and is always set on the job.
    def __init__(
        self,
        id: int,
        namespace: str,
        priority: int,
        submitted_at: float,
        workload: Workload,
        attempts: int = 0,
        backoff_until: float | None = None,
        expected_duration: float | None = None,
        demand: Mapping[str, int] | None = None,
        preempted_by: int | None = None,
        preempting: bool = False,
        pods_created: int | None = None,
        bound: float | None = None,
        after: Dependencies | None = None,
        group: int | None = None,
        checkpoints_on_notice: bool = False,
        cluster: str = "",
    ) -> None:
        """`cluster`: the one it must go back to (its object waits there, suspended), over
        whatever its annotations ask (clusters.py)."""
        set_ = object.__setattr__
        set_(self, "id", id)
        set_(self, "namespace", namespace)
        set_(self, "priority", priority)
        set_(self, "submitted_at", submitted_at)
        set_(self, "workload", workload)
        set_(self, "attempts", attempts)
        set_(self, "backoff_until", backoff_until)
        set_(self, "expected_duration", expected_duration)
        set_(self, "preempted_by", preempted_by)
        set_(self, "preempting", preempting)
        set_(self, "pods_created", pods_created)
        set_(self, "bound", bound)
        set_(self, "after", after if after is not None and (after.waiting or after.never) else None)
        set_(self, "group", group)
        set_(self, "checkpoints_on_notice", checkpoints_on_notice)
        set_(self, "in_workflow", self.after is not None or group is not None)
        set_(self, "demand", _interned_map(workload.quota_demand() if demand is None else demand))
        gang = gang_of(workload)
        totals = node_totals(gang)
        set_(self, "gang", gang)
        set_(self, "totals", totals)
        set_(self, "cpu", totals.get("cpu", 0))
        set_(self, "topology", request_of(workload))
        set_(self, "clusters", ClusterRequest(required=cluster) if cluster else cluster_request_of(workload))
        set_(self, "checkpoints", checkpoints_on_notice or checkpoints_of(workload))
        set_(self, "elastic", workload.elastic)


def normalise_placements(workload: Workload, placements: Any) -> tuple[tuple[str, int, str], ...]:
    """Accept ``((role, index, node), ...)`` or a mapping ``{"Worker-0": node}`` / ``{(role, index): node}``."""
    if isinstance(placements, Mapping):
        roles = {pod_set.role.lower(): pod_set.role for pod_set in workload.pod_sets}
        result = []
        for key, node in placements.items():
            if isinstance(key, str):
                role, _, index = key.rpartition("-")
                key = (roles.get(role.lower(), role), int(index))
            result.append((key[0], int(key[1]), node))
        return tuple(sorted(result))
    return tuple((role, int(index), node) for role, index, node in placements)


@dataclass(frozen=True)
class InFlightJob:
    """A released job whose pods are not all running yet.

    Contract with the dispatcher (it computes both fields):
    - ``outstanding`` is the quota-keyed demand of the pods NOT yet created,
      i.e. what is not yet in ``NamespaceQuota.used``; the planner reserves it.
    - ``placements`` lists pods planned on a node but not yet in that
      ``Node.allocated`` (not bound yet), as ``(role, index, node)``; the
      planner charges their requests to those nodes.  Pods not listed are
      assumed to be already in ``Node.allocated`` (or were released with
      node fit off, and then nothing is charged for them).
    """

    id: int
    namespace: str
    workload: Workload
    placements: Any = ()
    outstanding: Mapping[str, int] = field(default_factory=dict)
    released_at: float = 0.0
    expected_duration: float | None = None
    cluster: str = ""  # the cluster it was released to (clusters.py); "": one cluster
    gang: tuple[PodGroup, ...] = field(init=False, repr=False, compare=False)
    demand: Mapping[str, int] = field(init=False, repr=False, compare=False)  # the whole job's, for ETA
    totals: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "placements", normalise_placements(self.workload, self.placements))
        object.__setattr__(self, "outstanding", _frozen(self.outstanding))
        object.__setattr__(self, "gang", gang_of(self.workload))
        object.__setattr__(self, "demand", _interned_map(self.workload.quota_demand()))
        object.__setattr__(self, "totals", node_totals(self.gang))


@dataclass(frozen=True)
class RunningJob:
    """A job whose pods all run.  Its usage is already in ``NamespaceQuota.used`` and
    ``Node.allocated``; ETA and fair share read it, and preemption picks victims
    among running jobs.

    For preemption: ``placements`` lists its pods as ``(role, index, node)`` (what
    leaving frees on which node); ``borrowing`` says it was admitted beyond its
    namespace's guaranteed share; ``preemptions`` counts how often it has been
    preempted already; ``preempted_for`` is the job it is being preempted for (in
    its grace period: it still runs, and is no longer a candidate).

    Ends: ``expected_end`` is the end its estimate at start gave (backfill takes a
    job past it to end any moment, so a proven-short estimate lets nothing more
    in); ``likely_end`` is the likely end given how long it has run already
    (``predictor.DurationPredictor.likely_total``), which the start-time forecast
    uses.  None: derived from ``expected_end`` or the history.

    ``counts``: role -> pods it runs now, which for an elastic job (PodSet.minimum) may be
    fewer or more than its workload asks (admitted partly, grown, shrunk); empty: the
    workload's counts.  Its gang, demand and totals are those of the pods it runs.
    ``shrinking_for``: the job its extra pods are leaving for (Preemption.shrink_to): its
    counts are those it keeps, its placements still list the pods leaving (shrink.py).

    Checkpoints (issue 48, lost_work.py): ``checkpoint_every_s`` and ``checkpoint_on_notice_s``
    as it declares them, ``checkpointed_at`` the last checkpoint it reported (None: none),
    ``min_runtime_s`` how long it runs before it may be a victim.

    ``moved_at``: when defragmentation last moved it to other nodes (defrag.py; None: never),
    so that no job is moved again within the window its rules set.
    """

    id: int
    namespace: str
    workload: Workload
    started_at: float
    expected_end: float | None = None
    priority: int = 0
    borrowing: bool = False
    placements: Any = ()
    preemptions: int = 0
    preempted_for: int | None = None
    likely_end: float | None = None
    preemptible: bool = True  # False: its kind cannot be taken back (capabilities.JobNotTakenBack)
    counts: Mapping[str, int] = field(default_factory=dict)
    shrinking_for: int | None = None
    checkpoint_every_s: float | None = None
    checkpoint_on_notice_s: float | None = None
    checkpointed_at: float | None = None
    min_runtime_s: float = 0.0
    moved_at: float | None = None
    gang: tuple[PodGroup, ...] = field(init=False, repr=False, compare=False)
    demand: Mapping[str, int] = field(init=False, repr=False, compare=False)
    totals: Mapping[str, int] = field(init=False, repr=False, compare=False)
    elastic: bool = field(init=False, repr=False, compare=False)  # workload.elastic, read every cycle

    def __post_init__(self) -> None:
        object.__setattr__(self, "elastic", self.workload.elastic)
        counts = {**self.workload.counts, **self.counts}
        object.__setattr__(self, "counts", _frozen(counts))
        runs = self.workload if counts == self.workload.counts else self.workload.with_counts(counts)
        gang = gang_of(runs)
        object.__setattr__(self, "gang", gang)
        if self.placements:
            object.__setattr__(self, "placements", normalise_placements(self.workload, self.placements))
        object.__setattr__(self, "demand", _interned_map(runs.quota_demand()))
        object.__setattr__(self, "totals", node_totals(gang))


@dataclass(frozen=True)
class Node:
    """A node's allocatable capacity and what running (bound) pods already take.

    A resource missing from ``allocatable`` is 0, except ``pods``: a node
    that does not report a pod limit is not limited by it.
    """

    name: str
    allocatable: Mapping[str, int]
    allocated: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    # GPUs shared by memory (cards.py), checked card by card; None: whole cards or none.
    cards: SharedCards | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocatable", _frozen(self.allocatable))
        object.__setattr__(self, "allocated", _frozen(self.allocated))
        object.__setattr__(self, "labels", _frozen(self.labels))
        object.__setattr__(self, "taints", tuple(self.taints))

    def admits(self, constraints: PodGroup | Constraints) -> bool:
        """Whether a pod with these constraints may run here at all: kube-scheduler's
        NodeUnschedulable, NodeAffinity (nodeSelector and required terms) and
        TaintToleration filters."""
        selector, tolerations, affinity = constraints.constraints if isinstance(constraints, PodGroup) else constraints
        if self.unschedulable:
            return False
        labels = self.labels
        if any(labels.get(key) != value for key, value in selector):
            return False
        if affinity and not matches(affinity, labels, self.name):
            return False
        toleration_maps = [dict(t) for t in tolerations]
        return all(taint.tolerated_by(toleration_maps) for taint in self.taints if taint.blocks)


@dataclass(frozen=True)
class Snapshot:
    """Everything one admission cycle decides from.

    A namespace missing from ``quotas`` has no ResourceQuota and is not
    limited by quota.  With ``node_fit`` on, the nodes are the whole
    cluster: no schedulable node means nothing fits; a caller that cannot
    see the nodes passes ``node_fit=False`` (quota only).  ``history`` maps
    (namespace, ``eta.shape_key``) to recent run durations in seconds, for
    jobs that declare none.  ``policies`` maps a namespace to the policy (a
    name or a Policy) that orders its own queue and sets its head-of-line
    rules (strict, one at a time, quota reservation); the policy given to
    ``plan`` still decides the order across namespaces, node fit, node
    reservations and fair share (see ``policies.queue_order``).
    """

    now: float
    pending: tuple[PendingJob, ...]
    in_flight: tuple[InFlightJob, ...] = ()
    running: tuple[RunningJob, ...] = ()
    quotas: Mapping[str, NamespaceQuota] = field(default_factory=dict)
    nodes: tuple[Node, ...] = ()
    node_fit: bool = True
    history: Mapping[tuple[str, str], tuple[float, ...]] = field(default_factory=dict)
    policies: Mapping[str, Policy | str] = field(default_factory=dict)
    preemption_limit: int | None = None  # a job preempted this often is no longer a victim; None: no limit
    # The node labels that name topology levels, the widest first (topology.py).
    topology_levels: tuple[str, ...] = ()
    # Admitted gangs that lost planned pods to failed nodes (replacement.py).
    replacements: tuple[Replacement, ...] = ()
    # Nodes lent for a while (tide.py): jobs that would outlast them are kept off them.
    lent: tuple[LentPool, ...] = ()
    # Arrays with a concurrency limit, by their group (holds.py): PendingJob.group's.
    groups: Mapping[int, GroupLimit] = field(default_factory=dict)
    # Fair share with memory (fair_share.py): each namespace's past GPU-hours, decayed.
    usage: Mapping[str, float] = field(default_factory=dict)
    # Namespaces past their GPU-hour budget this month (holds.Budget): held, or admitted last.
    budgets: Mapping[str, Budget] = field(default_factory=dict)
    # Defragmentation (defrag.py): its rules when on; None: off.
    defrag: DefragRules | None = None
    # The clusters (clusters.py), when there are two or more: each gang inside one of them.
    clusters: tuple[Cluster, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "pending", tuple(self.pending))
        object.__setattr__(self, "in_flight", tuple(self.in_flight))
        object.__setattr__(self, "running", tuple(self.running))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "lent", tuple(self.lent))
        object.__setattr__(self, "quotas", _frozen(self.quotas))
        object.__setattr__(self, "history", _frozen(self.history))
        object.__setattr__(self, "policies", _frozen(self.policies))
        ids = [job.id for job in self.pending]
        if len(set(ids)) != len(ids):
            raise ValueError("pending job ids must be unique")
        names = [node.name for node in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")
        pools = [pool.name for pool in self.lent]
        if len(set(pools)) != len(pools):
            raise ValueError("lent pool names must be unique")
        for pool in self.lent:
            if not pool.notice_s >= 0:
                raise ValueError(f"lent pool {pool.name!r}: notice_s must be >= 0, got {pool.notice_s}")
        for name, quota in self.quotas.items():
            if quota.namespace != name:
                raise ValueError(f"quotas[{name!r}] is the quota of namespace {quota.namespace!r}")
