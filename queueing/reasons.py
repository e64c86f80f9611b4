"""Why a job waits: a fixed vocabulary, structured detail and a one-line message.

The reason and its detail are what programs read (API, metrics); the
message is for people and is rendered from them on demand, which keeps a
100k-job plan from formatting 100k strings nobody may look at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from .fit import NodeFailure
from .quantity import format_quantity
from .tide import words as lent_words
from .topology import level_name
from .workflows import never_words, waits_words

if TYPE_CHECKING:  # snapshot.py imports fit.py, which this module imports
    from .snapshot import PodGroup


class Reason(StrEnum):
    # Capacity: the job could start if something else ended.
    QUOTA_EXCEEDED = "QuotaExceeded"  # resource, needed, free, hard
    NO_NODE_FITS = "NoNodeFits"  # resource (scarcest), needed, free, scope, role, pods, placed
    # Its required topology level: no domain of it (no one rack) holds the whole gang now.
    NO_DOMAIN_FITS = "NoDomainFits"  # level (node label), resource, needed (per pod), pods, roomiest (pods); slice_of
    # It would fit with lent nodes it may not use now (tide.py): it would run past their reclaim,
    # has no run-time prediction, or they are in their notice window.
    OUTLASTS_LENT_POOL = "OutlastsLentPool"  # pool, reclaim_at, bound, why, notice_s, timezone, now
    # With several clusters (clusters.py): none it may use takes jobs now (lost, or none matches).
    NO_CLUSTER = "NoClusterAvailable"  # asked (its wish, words), lost (cluster names)
    # Elastic quota: beyond its guaranteed share, and its cohort lends too little (or its limit is reached).
    CANNOT_BORROW = "CannotBorrow"  # resource, needed, free (lendable now), guaranteed, cohort, limit (or None)
    # Room is being made: jobs are preempted for this one and leave after their grace period.
    PREEMPTING = "Preempting"  # victims (job ids)
    # Preempted to make room for another job, now waiting again in its old place.
    PREEMPTED = "Preempted"  # preemptor, waits_for (the reason it waits now) and that reason's detail
    # Policy: capacity may be there, the policy holds the job back.
    WAITING_FOR_IN_FLIGHT = "WaitingForInFlight"  # in_flight (job id or None: released this cycle)
    RESERVED_FOR_OLDER_JOB = "ReservedForOlderJob"  # reserved_for, resource
    BLOCKED_BY_QUEUE_HEAD = "BlockedByQueueHead"  # head (strict FIFO)
    BACKING_OFF = "BackingOff"  # until, attempts
    # A pod group whose user has not created all its pods yet: it cannot start as a gang.
    WAITING_FOR_PODS = "WaitingForPods"  # created, total
    # Workflows (holds.py): its dependencies have not ended as it needs; an array at its limit.
    WAITING_FOR_DEPENDENCY = "WaitingForDependency"  # waits: [(job id, name, condition)]
    DEPENDENCY_NEVER_SATISFIED = "DependencyNeverSatisfied"  # never: [(job id, name, condition, state)]
    ARRAY_CONCURRENCY_LIMIT = "ArrayConcurrencyLimit"  # group, name, limit
    # Past its namespace's GPU-hour budget this month, which says its jobs wait (holds.Budget).
    OVER_BUDGET = "OverBudget"  # used, budget (GPU-hours)
    # Never: waiting would not help; the job must change (or the quota / nodes).
    NEVER_FITS_QUOTA = "NeverFitsQuota"  # resource, needed, hard
    NEVER_FITS_NODES = "NeverFitsNodes"  # resource, needed, free (largest node allocatable), role, node (that node)

    @property
    def never(self) -> bool:
        return self in (Reason.NEVER_FITS_QUOTA, Reason.NEVER_FITS_NODES)

    @property
    def for_room(self) -> bool:
        """Waiting for room to be freed. Under load a queued job moves between these from
        one cycle to the next (its quota is short, then a node, then an older job holds the
        room) while nothing about its prospects changed."""
        return self in _FOR_ROOM


_FOR_ROOM = frozenset(
    {Reason.QUOTA_EXCEEDED, Reason.NO_NODE_FITS, Reason.NO_DOMAIN_FITS, Reason.RESERVED_FOR_OLDER_JOB}
)


def same_wait(a: str, b: str) -> bool:
    """Whether a job waiting for reason `a` (a Reason's value) that now waits for `b` still
    waits for the same thing: the same reason, or both for room."""
    return a == b or (a in _FOR_ROOM and b in _FOR_ROOM)


# Why a job waits: the reason and its detail (rendered by PendingStatus).
Outcome = tuple[Reason, dict[str, Any]]


def node_failure_outcome(failure: NodeFailure) -> Outcome:
    """A gang that did not fit the nodes, as the reason it waits."""
    if failure.kind == "never":
        detail = {"resource": failure.resource, "needed": failure.needed, "free": failure.free, "role": failure.role}
        if failure.node:
            detail["node"] = failure.node
        if failure.level:
            detail["level"] = failure.level
        if failure.card:
            detail["gpu"] = True
        if failure.scope == "combined":
            detail["combined"] = True
        return Reason.NEVER_FITS_NODES, detail
    if failure.kind == "topology":
        topology = {
            "level": failure.level,
            "resource": failure.resource,
            "needed": failure.needed,
            "pods": failure.pods,
            "roomiest": failure.free,
        }
        if failure.slice_of:
            topology["slice_of"] = failure.slice_of
        return Reason.NO_DOMAIN_FITS, topology
    if failure.kind == "reserved":
        return Reason.RESERVED_FOR_OLDER_JOB, {"reserved_for": failure.reserved_by, "resource": failure.resource}
    if failure.card:  # the node's total would do; no one card does (cards.py)
        node, gpu = failure.card
        detail = {"resource": failure.resource, "needed": failure.needed, "free": failure.free, "node": node}
        return Reason.NO_NODE_FITS, {**detail, "gpu": gpu, "role": failure.role, "pods": failure.pods}
    return Reason.NO_NODE_FITS, {
        "resource": failure.resource,
        "needed": failure.needed,
        "free": failure.free,
        "scope": failure.scope,
        "role": failure.role,
        "pods": failure.pods,
        "placed": failure.placed,
    }


def never_fits_nodes(
    gang: Iterable[PodGroup], cluster_max: Mapping[str, int], largest: Mapping[str, str]
) -> Outcome | None:
    """Cheap screen for a pod larger than every node (checked even while quota is short).
    ``largest``: the node with each resource's cluster_max, named in the message."""
    for group in gang:
        for name, amount in group.requests:
            if amount > cluster_max.get(name, 0):
                detail = {"resource": name, "needed": amount, "free": cluster_max.get(name, 0), "role": group.role}
                if name in largest:
                    detail["node"] = largest[name]
                return Reason.NEVER_FITS_NODES, detail
    return None


def amount(resource: str, value: int) -> str:
    """A quota or node amount the way kubectl shows it: 1500m, 8Gi, 2."""
    base = resource.removeprefix("requests.").removeprefix("limits.")
    return format_quantity(base, value) if base in ("cpu", "memory", "ephemeral-storage") else str(value)


def describe(reason: Reason, detail: Mapping[str, Any], namespace: str) -> str:
    words = _WORDS.get(reason)
    if words is None:
        raise ValueError(f"no message for {reason!r}")
    return words(detail, namespace)


def _quota_exceeded(d: Mapping[str, Any], namespace: str) -> str:
    r = d["resource"]
    where = f" (cluster {d['cluster']}, the roomiest)" if d.get("cluster") else ""
    return (
        f"quota {r} in {namespace}{where}: needs {amount(r, d['needed'])}, "
        f"{amount(r, max(d['free'], 0))} of {amount(r, d['hard'])} free"
    )


def _cannot_borrow(d: Mapping[str, Any], namespace: str) -> str:
    r = d["resource"]
    cohort = f"cohort {d['cohort']}" if d.get("cohort") else "the cohort"
    if d.get("limit") is not None:
        return (
            f"beyond the guaranteed {amount(r, d['guaranteed'])} {r} of {namespace}, and its borrowing "
            f"limit of {amount(r, d['limit'])} is reached"
        )
    return (
        f"beyond the guaranteed {amount(r, d['guaranteed'])} {r} of {namespace}: needs "
        f"{amount(r, d['needed'])} from {cohort}, which lends {amount(r, max(d['free'], 0))} now"
    )


def _preempting(d: Mapping[str, Any], namespace: str) -> str:
    victims = ", ".join(str(victim) for victim in d["victims"])
    return f"starts once job(s) {victims} leave: they are preempted to make room for it"


def _preempted(d: Mapping[str, Any], namespace: str) -> str:
    inner = describe(Reason(d["waits_for"]), d["detail"], namespace)
    return f"preempted to make room for job {d['preemptor']}; back in its place, {inner}"


def _never_fits_quota(d: Mapping[str, Any], namespace: str) -> str:
    r = d["resource"]
    where = f" in cluster {d['cluster']} (the largest of the clusters it may use)" if d.get("cluster") else ""
    return (
        f"never fits: needs {amount(r, d['needed'])} {r} but the quota of {namespace}{where} "
        f"is {amount(r, d['hard'])}; reduce the job or raise the quota"
    )


def _no_node_fits(d: Mapping[str, Any], namespace: str) -> str:
    return _nodes_words(d) + _closest_cluster(d)


def _closest_cluster(d: Mapping[str, Any]) -> str:
    """With several clusters: the one it came closest in, where it is likely to start."""
    return f"; likely to start in cluster {d['cluster']}, where it comes closest" if d.get("cluster") else ""


def _nodes_words(d: Mapping[str, Any]) -> str:
    r = d["resource"]
    if "gpu" in d:
        return (
            f"no single GPU has {d['needed']:,} MiB free: the most is {d['free']:,} MiB on {d['node']}'s GPU {d['gpu']}"
        )
    if d.get("scope") == "cluster":
        return f"cluster full: needs {amount(r, d['needed'])} {r} in total, {amount(r, d['free'])} free on all nodes"
    placed = f"{d['placed']} of {d['pods']} pods placed; " if d.get("placed") else ""
    return (
        f"no node fits: {placed}a {d['role']} pod needs {amount(r, d['needed'])} {r}, "
        f"the most free on one node is {amount(r, d['free'])}"
    )


def _no_domain_fits(d: Mapping[str, Any], namespace: str) -> str:
    r, level, needed = d["resource"], level_name(d["level"]), amount(d["resource"], d["needed"])
    pods = f"its pod ({needed} {r})" if d["pods"] == 1 else f"all {d['pods']} pods ({needed} {r} each) at once"
    if d.get("slice_of"):
        pods = f"a slice of {d['pods']} of its {d['slice_of']} pods ({needed} {r} each)"
    return f"no {level} has room for {pods}; the roomiest has room for {d['roomiest']}" + _closest_cluster(d)


def _no_cluster(d: Mapping[str, Any], namespace: str) -> str:
    lost = f"; lost (not answering): {', '.join(d['lost'])}" if d.get("lost") else ""
    cordoned = f"; cordoned by an admin: {', '.join(d['cordoned'])}" if d.get("cordoned") else ""
    return f"no cluster it may use takes jobs now ({d['asked']}){lost}{cordoned}"


def _outlasts_lent_pool(d: Mapping[str, Any], namespace: str) -> str:
    return lent_words(d)


def _never_fits_nodes(d: Mapping[str, Any], namespace: str) -> str:
    r = d["resource"]
    if d.get("level"):
        return (
            f"never fits: it requires one {level_name(d['level'])} ({d['level']}), "
            "and no schedulable node carries that label"
        )
    if d.get("gpu"):
        return (
            f"never fits: a {d['role']} pod needs {d['needed']:,} MiB on one GPU, the largest GPU has {d['free']:,} MiB"
        )
    if r == "nodeSelector/tolerations":
        return (
            f"never fits: no schedulable node matches the {d['role']} pods' nodeSelector, "
            "required node affinity and tolerations"
        )
    node = f" ({d['node']})" if d.get("node") else ""
    if d.get("combined"):  # some node has that much of it, none with the pod's other requests
        return (
            f"never fits any node: a {d['role']} pod needs {amount(r, d['needed'])} {r} with its other "
            f"requests on one node, the node that comes closest{node} has {amount(r, d['free'])}"
        )
    return (
        f"never fits any node: a {d['role']} pod needs {amount(r, d['needed'])} {r}, "
        f"the largest node{node} has {amount(r, d['free'])}"
    )


def _waiting_for_pods(d: Mapping[str, Any], namespace: str) -> str:
    return f"waiting for its pods: {d['created']} of {d['total']} created; it starts once all exist"


def _waiting_for_in_flight(d: Mapping[str, Any], namespace: str) -> str:
    if d.get("in_flight") is None:
        return f"waiting: {namespace} released a job this cycle and starts one at a time"
    return f"waiting: job {d['in_flight']} in {namespace} is still starting (one at a time)"


def _reserved_for_older_job(d: Mapping[str, Any], namespace: str) -> str:
    if "shadow_start" in d:  # backfill.py: the head's start is known by estimates
        return (
            f"would fit, but would still hold {d['resource']} when job {d['reserved_for']}, ahead in "
            f"{namespace}'s queue, is expected to start (t={d['shadow_start']:.0f})"
        )
    return f"would fit, but {d['resource']} is held for job {d['reserved_for']}, which has waited longer"


def _blocked_by_queue_head(d: Mapping[str, Any], namespace: str) -> str:
    return f"waiting behind job {d['head']}, the head of {namespace}'s queue (strict order)"


def _waiting_for_dependency(d: Mapping[str, Any], namespace: str) -> str:
    return "waits for " + waits_words(d["waits"])


def _dependency_never_satisfied(d: Mapping[str, Any], namespace: str) -> str:
    return f"{never_words(d['never'])} (kept queued as its submitter asked: cancel it or submit it anew)"


def _over_budget(d: Mapping[str, Any], namespace: str) -> str:
    return (
        f"{namespace} used {d['used']:,.0f} of its {d['budget']:,.0f} GPU-h budget this month: "
        "its jobs wait for the next month or a larger budget"
    )


def _array_concurrency_limit(d: Mapping[str, Any], namespace: str) -> str:
    return f"array {d['name']} (#{d['group']}) runs {d['limit']} jobs at once, its limit"


def _backing_off(d: Mapping[str, Any], namespace: str) -> str:
    return f"backing off after {d['attempts']} failed start(s); eligible again at t={d['until']:.0f}"


# A lookup, not a chain of ``reason is Reason.X`` tests: each test looks a member up on the
# Enum class, which is slow enough that the chain cost more than the message's formatting.
_WORDS: dict[Reason, Callable[[Mapping[str, Any], str], str]] = {
    Reason.QUOTA_EXCEEDED: _quota_exceeded,
    Reason.CANNOT_BORROW: _cannot_borrow,
    Reason.PREEMPTING: _preempting,
    Reason.PREEMPTED: _preempted,
    Reason.NEVER_FITS_QUOTA: _never_fits_quota,
    Reason.NO_NODE_FITS: _no_node_fits,
    Reason.NO_DOMAIN_FITS: _no_domain_fits,
    Reason.OUTLASTS_LENT_POOL: _outlasts_lent_pool,
    Reason.NO_CLUSTER: _no_cluster,
    Reason.NEVER_FITS_NODES: _never_fits_nodes,
    Reason.WAITING_FOR_PODS: _waiting_for_pods,
    Reason.WAITING_FOR_IN_FLIGHT: _waiting_for_in_flight,
    Reason.RESERVED_FOR_OLDER_JOB: _reserved_for_older_job,
    Reason.BLOCKED_BY_QUEUE_HEAD: _blocked_by_queue_head,
    Reason.WAITING_FOR_DEPENDENCY: _waiting_for_dependency,
    Reason.DEPENDENCY_NEVER_SATISFIED: _dependency_never_satisfied,
    Reason.OVER_BUDGET: _over_budget,
    Reason.ARRAY_CONCURRENCY_LIMIT: _array_concurrency_limit,
    Reason.BACKING_OFF: _backing_off,
}


def used_words(used: Mapping[str, Any]) -> str:
    """Fair share with memory: "; team-b used 1,200 GPU-h lately, twice its share"."""
    times = used["times_share"]
    ratio = "twice" if 1.95 <= times < 2.05 else f"{times:.1f} times"
    return f"; {used['namespace']} used {used['gpu_hours']:,.0f} GPU-h lately, {ratio} its share"


class PendingStatus(NamedTuple):
    """Where a pending job stands after a cycle.  ``position`` is 1-based within
    its namespace's queue; ``eta`` is an estimated start time or None (then
    ``eta_note`` says why).  A tuple, because a cycle builds one per queued job."""

    job_id: int
    namespace: str
    position: int
    reason: Reason
    detail: Mapping[str, Any]
    eta: float | None = None
    eta_note: str = ""

    @property
    def message(self) -> str:
        text = describe(self.reason, self.detail, self.namespace)
        return text + used_words(self.detail["history"]) if "history" in self.detail else text
