"""The one door to a Kubernetes cluster: what jobdash needs, in jobdash's own types.

Everything else in jobdash talks to `ClusterGateway`; only `kube.py` knows the client.
Amounts are canonical integers (cpu in millicores, memory in bytes, counts), as in
`queueing`.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from queueing.failures import Failure

from .devices import NodeCards

JOB_ID_LABEL = "jobdash.io/job-id"
MANAGED_LABEL = "jobdash.io/managed"
QUEUED_LABEL = "jobdash.io/queued"
# The leader term a write of jobdash's was made under: its own admission webhook refuses an
# object written under a term older than the fence's (a deposed leader writes nothing).
TERM_ANNOTATION = "jobdash.io/term"
# The reason the webhook gives for such a refusal, so the writer knows it was deposed.
STALE_TERM_REASON = "StaleLeaderTerm"
# jobdash's own QueuedJob (deploy/base/queuedjobs.yaml): a waiting job's place in the queue.
QUEUED_GROUP, QUEUED_VERSION, QUEUED_PLURAL, QUEUED_KIND = "jobdash.io", "v1alpha1", "queuedjobs", "QueuedJob"
# A job's key in the cluster: its kind ("<plural>.<group>", queueing's adapter key),
# namespace and name. The same name may be used by two kinds.
ObjectKey = tuple[str, str, str]

# --- errors: the few outcomes callers act on differently ---


class GatewayError(Exception):
    """Base of every error the gateway raises."""


class Transient(GatewayError):
    """Try again later: timeouts, connection errors, 429, 5xx."""


class Fatal(GatewayError):
    """The cluster refuses for good: invalid object (422), forbidden, denied by a webhook."""


class NotFound(GatewayError):
    pass


class Conflict(GatewayError):
    """Stale resourceVersion on an update."""


class Fenced(GatewayError):
    """jobdash's webhook refused a write made under a leader term older than the fence's:
    this process was deposed and must write nothing more."""


class AlreadyExists(GatewayError):
    """An object of that kind and name exists and it is not the one this job released."""


class QuotaExceeded(GatewayError):
    """The API server's ResourceQuota admission refused the object."""


class ElsewhereHeld(GatewayError):
    """With several clusters: the job's held (suspended) object is in another cluster than the
    one it was released to (it was created there with kubectl): it must run there."""

    def __init__(self, cluster: str):
        super().__init__(f"its object is held in cluster {cluster}")
        self.cluster = cluster


# --- what the cluster looks like ---


@dataclass(frozen=True)
class Quota:
    namespace: str
    name: str
    hard: Mapping[str, int]
    used: Mapping[str, int]
    cluster: str = ""  # with several clusters (multi.py), the one it is in


@dataclass(frozen=True)
class Lent:
    """A node the online side lends until ``until`` (epoch seconds), in ``pool``; nothing new
    starts on it in its last ``notice_s`` (None: jobdash's default notice)."""

    pool: str
    until: float
    notice_s: float | None = None


@dataclass(frozen=True)
class NodeInfo:
    name: str
    allocatable: Mapping[str, int]
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    unschedulable: bool
    cards: NodeCards | None = None  # its GPUs shared by memory (devices.py), if it shares them
    lent: Lent | None = None  # lent by the online side until a time (its annotations), if it is


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    node_name: str | None
    # The labels job controllers set (the job's name, the pod's role and index), only those:
    # which one names this pod's job depends on the job's kind (its adapter says).
    labels: Mapping[str, str]
    requests: Mapping[str, int]
    deleting: bool = False
    gates: tuple[str, ...] = ()  # its scheduling gates: nothing schedules it while it has one
    selected_node: str | None = None  # the node its nodeSelector names (kubernetes.io/hostname)
    cards: tuple[str, ...] = ()  # the shared cards it was given or pinned to, by their node's names
    failure: Failure | None = None  # what went wrong with it (queueing.failures), if anything
    uid: str = ""  # this pod's, not another made later under its name

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True)
class JobObject:
    """A job's object in the cluster (a TFJob, a batch Job, a JobSet, ...), as jobdash follows it."""

    kind: str  # the adapter key: "<plural>.<group>"
    namespace: str
    name: str
    uid: str
    job_id: int | None  # jobdash's id, from the jobdash.io/job-id label
    suspended: bool
    phase: str  # the adapter's reading of its status: "" | Created | Running | ... | Succeeded | Failed
    message: str
    labels: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False
    # Its jobdash.io/checkpointed-at annotation as written (a running job's last checkpoint,
    # RFC 3339, set by the job itself; issue 48); "" when absent. Read by the tracker.
    checkpointed_at: str = ""

    @property
    def key(self) -> ObjectKey:
        return (self.kind, self.namespace, self.name)


@dataclass(frozen=True)
class QueuedObject:
    """A QueuedJob (jobdash.io/v1alpha1) in the cluster: a waiting job's mirror."""

    namespace: str
    name: str
    uid: str
    job_id: int | None  # from the jobdash.io/job-id label
    status: Mapping[str, Any]
    resource_version: str
    deleting: bool = False


@dataclass(frozen=True)
class QueuedEntry:
    """What a waiting job's QueuedJob says: spec (the job) and status (its place)."""

    job_id: int
    namespace: str
    name: str  # the QueuedJob's own name
    job_api_version: str
    job_kind: str
    job_name: str  # the name of the job's object
    status: Mapping[str, Any]


@dataclass(frozen=True)
class ClusterEvent:
    """A core/v1 Event jobdash reports (reportingComponent jobdash)."""

    namespace: str
    name: str  # the Event's own name: the same for a retry, so a resend is no duplicate
    involved: Mapping[str, str]  # apiVersion, kind, name, namespace[, uid]
    reason: str
    message: str
    type: str  # Normal | Warning
    at: str  # RFC 3339: first and last seen


@dataclass(frozen=True)
class Access:
    """The cluster authorizer's answer to a SubjectAccessReview; `reason` names what allowed
    it (RBAC: the binding and its role), when it says."""

    allowed: bool
    reason: str = ""


@dataclass(frozen=True)
class WatchEvent:
    kind: str  # an adapter key for job objects, or "pod" | "quota" | "node"
    type: str  # ADDED | MODIFIED | DELETED | RELISTED
    namespace: str
    name: str


class ClusterGateway(Protocol):
    # reads, served from the watch cache once `start()` has synced
    def quotas(self) -> list[Quota]: ...
    def nodes(self) -> list[NodeInfo]: ...
    def pods(self) -> list[PodInfo]: ...
    def job_objects(self) -> list[JobObject]: ...
    def job_object(self, key: ObjectKey) -> JobObject | None: ...
    # the same, shaped for the cycle: finished pods and objects stay in the cache, so the
    # cycle asks for the live pods and the pods of the jobs it follows, not for all
    def live_job_ids(self) -> set[int]: ...
    # the jobs whose live object appeared or changed since the last call (one consumer);
    # None when there were too many to keep (look at all of them)
    def changed_job_ids(self) -> set[int] | None: ...
    def job_objects_of(self, job_ids: Iterable[int]) -> dict[int, JobObject]: ...
    def live_pods(self) -> list[PodInfo]: ...
    def pods_of_jobs(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, list[PodInfo]]: ...
    # changes whenever the cache's quotas, nodes, pods or job objects change (`mirror`: its
    # QueuedJob objects): equal numbers in two cycles, nothing in the cluster moved between
    def revision(self, *, mirror: bool = False) -> int: ...

    # straight from the API server, not the cache (the dispatcher's checks before it acts)
    def read_job_object(self, key: ObjectKey) -> JobObject: ...
    # an object a job refers to (a TrainJob's runtime), or None when there is none
    def read_object(self, api_version: str, plural: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...
    # every object of a cluster-scoped type (the priority classes, for the submit page)
    def list_objects(self, api_version: str, plural: str) -> list[Mapping[str, Any]]: ...

    # writes, straight to the API server
    # (`term`: the leader term the write is made under, carried as TERM_ANNOTATION so the
    # webhook can refuse a deposed leader's; None only for writes outside the dispatcher)
    def create_job_object(self, *, job_id: int, manifest: Mapping[str, Any], term: int | None = None) -> JobObject: ...
    def label_job_object(self, key: ObjectKey, job_id: int, term: int | None = None) -> None: ...
    def announce(self, key: ObjectKey, uid: str, reason: str, message: str) -> None: ...
    def set_suspended(self, key: ObjectKey, suspended: bool, term: int | None = None) -> None: ...
    def delete_job_object(self, key: ObjectKey, term: int | None = None) -> None: ...
    # read, changed by `change`, written back exactly over that version (retried on a conflict)
    def update_job_object(
        self, key: ObjectKey, change: Callable[[dict[str, Any]], dict[str, Any]], term: int | None = None
    ) -> JobObject: ...
    # a gated pod sent to `node` (its nodeSelector; None: wherever the scheduler puts it), `gate` removed
    def ungate_pod(
        self, pod: PodInfo, gate: str, node: str | None, annotations: Mapping[str, str] | None = None
    ) -> None: ...
    def delete_pod(self, namespace: str, name: str) -> None: ...

    # the waiting jobs' QueuedJob objects (watch cache); None while the cluster does not serve them
    def queued_objects(self) -> list[QueuedObject] | None: ...
    def create_queued(self, entry: QueuedEntry, term: int | None = None) -> QueuedObject: ...
    def update_queued(self, namespace: str, name: str, status: Mapping[str, Any], term: int | None = None) -> None: ...
    # deleted only if still at `resource_version` (a precondition); gone already is no error
    def delete_queued(self, namespace: str, name: str, resource_version: str, term: int | None = None) -> None: ...
    # straight from the API server: whether the object is gone (not the cache's lag)
    def queued_gone(self, namespace: str, name: str) -> bool: ...
    # a Kubernetes Event; one of that name existing already is no error (a resend)
    def record_event(self, event: ClusterEvent) -> None: ...

    # whether a user of jobdash's (their Kubernetes username and groups) may `verb`
    # `resource` (of API `group`) in `namespace`: a SubjectAccessReview, straight from the API server
    def review_access(
        self, user: str, groups: Sequence[str], verb: str, group: str, resource: str, namespace: str
    ) -> Access: ...
    # `on_change` on every RoleBinding and ClusterRoleBinding change from now until stop(),
    # their first list included (so what was decided before the watch ran is dropped too);
    # returns at once, the watches run (and reconnect) in the background
    def watch_bindings(self, on_change: Callable[[], None]) -> None: ...

    # from now on every write first asks `leading` (the process's leadership by its own clock)
    def writes_while(self, leading: Callable[[], bool]) -> None: ...

    # lifecycle of the watch cache
    def start(self, on_event: Callable[[WatchEvent], None] | None = None, timeout: float = 30.0) -> None: ...
    def stop(self) -> None: ...
