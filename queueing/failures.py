"""Why a job failed, in a few classes a retry policy can name (as Slurm's requeue and
the batch Job's podFailurePolicy do), read from the pod objects as the API server reports them.

- NodeLost: the node went away under the pod (the taint manager deleted it off an
  unreachable node, the pod GC collected it from a deleted node, or the caller saw its node fail).
- Evicted: the kubelet (node pressure, node shutdown) or the Eviction API took the pod off.
- Preempted: kube-scheduler preempted the pod for a higher-priority one.
- ImagePull: a container's image could not be pulled.
- OOMKilled: a container ran out of memory.
- ExitCode: a container exited non-zero.
- DeadlineExceeded: jobdash stopped the job at its max run time (never retried).
- Unknown: none of these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .job_options import RetryPolicy

NODE_LOST = "NodeLost"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
IMAGE_PULL = "ImagePull"
OOM_KILLED = "OOMKilled"
EXIT_CODE = "ExitCode"
DEADLINE_EXCEEDED = "DeadlineExceeded"
UNKNOWN = "Unknown"

# The most telling first: a node lost explains the exit codes of the pods that were on it.
FAILURE_CLASSES = (NODE_LOST, EVICTED, PREEMPTED, OOM_KILLED, IMAGE_PULL, EXIT_CODE, DEADLINE_EXCEEDED, UNKNOWN)
# What a retry-on may name: a deadline is the user's own limit, retrying it would defeat it.
RETRIABLE_CLASSES = tuple(cls for cls in FAILURE_CLASSES if cls != DEADLINE_EXCEEDED)
# Failures of the infrastructure, not of the job: retrying them is what a user expects.
DEFAULT_RETRY_ON = frozenset({NODE_LOST, EVICTED, PREEMPTED})
MAX_BACKOFF_S = 3600.0

# pkg/apis/core/types.go: the reasons of a pod's DisruptionTarget condition.
DISRUPTION_TARGET = "DisruptionTarget"
_DISRUPTION_CLASSES = {
    "DeletionByTaintManager": NODE_LOST,
    "DeletionByPodGC": NODE_LOST,  # (PodGC: "PodGC: node no longer exists")
    "EvictionByEvictionAPI": EVICTED,
    "TerminationByKubelet": EVICTED,
    "PreemptionByScheduler": PREEMPTED,
}
# status.reason of a pod the kubelet evicted, or the node controller marked lost.
_STATUS_REASON_CLASSES = {"Evicted": EVICTED, "NodeLost": NODE_LOST}
# pkg/kubelet/images: a container's state.waiting.reason while its image cannot be pulled.
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName"})
OOM_REASON = "OOMKilled"


@dataclass(frozen=True)
class Failure:
    cls: str
    message: str  # starts with the class: "ExitCode: exit code 3 (pod train-worker-0, container pytorch)"
    exit_code: int | None = None

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict[str, Any]:
        return {"cls": self.cls, "message": self.message, "exit_code": self.exit_code}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Failure:
        return cls(str(data["cls"]), str(data["message"]), data.get("exit_code"))


def node_lost(pod_name: str, node: str) -> Failure:
    """The caller saw the pod's node fail or disappear (the pod itself may still say Running)."""
    return Failure(NODE_LOST, f"NodeLost: node {node} failed (pod {pod_name})")


def deadline_exceeded(max_run_s: float) -> Failure:
    return Failure(DEADLINE_EXCEEDED, f"DeadlineExceeded: stopped after its max run time of {_duration(max_run_s)}")


def disruption_reason(status: Mapping[str, Any]) -> str | None:
    """The reason of the pod's DisruptionTarget condition, if it is true."""
    for condition in status.get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status", "True") == "True":
            return str(condition.get("reason") or "")
    return None


def image_pull_reason(status: Mapping[str, Any]) -> str | None:
    """The first image-pull reason a container (init containers too) is waiting with."""
    for container in _statuses(status):
        reason = ((container.get("state") or {}).get("waiting") or {}).get("reason")
        if reason in IMAGE_PULL_REASONS:
            return str(reason)
    return None


def pod_failure(pod: Mapping[str, Any]) -> Failure | None:
    """What went wrong with this pod, or None: nothing did (it runs, waits, or succeeded)."""
    metadata, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    name, node = str(metadata.get("name", "")), spec.get("nodeName") or ""
    phase = status.get("phase") or "Pending"
    if phase == "Succeeded":
        return None
    disrupted = _disruption(name, node, status)
    if disrupted is not None:
        return disrupted
    statuses = _in_spec_order(spec, status)
    for container in statuses:
        for state in ("state", "lastState"):
            terminated = (container.get(state) or {}).get("terminated") or {}
            if terminated.get("reason") == OOM_REASON:
                return _oom(name, str(container.get("name", "")), spec, terminated.get("exitCode"))
    for container in statuses:
        reason = ((container.get("state") or {}).get("waiting") or {}).get("reason")
        if reason in IMAGE_PULL_REASONS:
            image = container.get("image") or _spec_image(spec, str(container.get("name", "")))
            return Failure(IMAGE_PULL, f'ImagePull: image "{image}" could not be pulled ({reason})')
    for state in ("state", "lastState"):  # what ended it, then what made it restart
        for container in statuses:
            code = ((container.get(state) or {}).get("terminated") or {}).get("exitCode")
            if isinstance(code, int) and code != 0:
                return Failure(
                    EXIT_CODE, f"ExitCode: exit code {code} (pod {name}, container {container.get('name', '')})", code
                )
    if phase == "Failed":
        why = status.get("message") or status.get("reason") or "no container status says why"
        return Failure(UNKNOWN, f"Unknown: pod {name} failed: {why}")
    return None


def job_failure(pods: Iterable[Failure | None], message: str = "") -> Failure:
    """The most telling of the pods' failures; Unknown (with the job's own message) if none."""
    found = [failure for failure in pods if failure is not None]
    if found:
        return min(found, key=lambda failure: FAILURE_CLASSES.index(failure.cls))
    return Failure(UNKNOWN, f"Unknown: {message}" if message else "Unknown: no pod says why the job failed")


def retriable(policy: RetryPolicy, failure: Failure, retries_done: int) -> bool:
    if retries_done >= policy.limit or failure.cls == DEADLINE_EXCEEDED:
        return False
    if failure.cls == EXIT_CODE and policy.exit_codes:
        # As podFailurePolicy's OnExitCodes: listing codes retries those codes, and only those.
        return failure.exit_code in policy.exit_codes
    return failure.cls in policy.on


def backoff_s(policy: RetryPolicy, retries_done: int) -> float:
    return min(MAX_BACKOFF_S, policy.backoff_s * 2.0 ** min(retries_done, 64))  # 64: no float overflow


def _disruption(name: str, node: str, status: Mapping[str, Any]) -> Failure | None:
    reason = disruption_reason(status)
    cls = _DISRUPTION_CLASSES.get(reason or "") or _STATUS_REASON_CLASSES.get(status.get("reason") or "")
    if cls is None:
        return None
    where = f"node {node}" if node else "its node"
    if cls == NODE_LOST:
        return Failure(NODE_LOST, f"NodeLost: {where} failed (pod {name})")
    detail = status.get("message") or _condition_message(status) or reason or status.get("reason")
    if cls == EVICTED:
        return Failure(EVICTED, f"Evicted: pod {name} was evicted from {where} ({detail})")
    return Failure(PREEMPTED, f"Preempted: pod {name} on {where} was preempted by the scheduler ({detail})")


def _condition_message(status: Mapping[str, Any]) -> str:
    for condition in status.get("conditions") or ():
        if condition.get("type") == DISRUPTION_TARGET:
            return str(condition.get("message") or "")
    return ""


def _statuses(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(status.get("containerStatuses") or ()), *(status.get("initContainerStatuses") or ())]


def _in_spec_order(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Main containers first, in the spec's order (the status lists are not), then init containers."""
    order = {c.get("name"): i for i, c in enumerate([*(spec.get("containers") or ()), *_init(spec)])}
    main = sorted(status.get("containerStatuses") or (), key=lambda c: order.get(c.get("name"), len(order)))
    init = sorted(status.get("initContainerStatuses") or (), key=lambda c: order.get(c.get("name"), len(order)))
    return [*main, *init]


def _init(spec: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return spec.get("initContainers") or ()


def _container_spec(spec: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for container in [*(spec.get("containers") or ()), *_init(spec)]:
        if container.get("name") == name:
            return dict(container)
    return {}


def _spec_image(spec: Mapping[str, Any], name: str) -> str:
    return str(_container_spec(spec, name).get("image", ""))


def _oom(name: str, container: str, spec: Mapping[str, Any], code: Any) -> Failure:
    limit = ((_container_spec(spec, container).get("resources") or {}).get("limits") or {}).get("memory")
    within = f"(limit {limit})" if limit else "(no memory limit: the node ran out)"
    return Failure(
        OOM_KILLED,
        f"OOMKilled: container {container} of pod {name} ran out of memory {within}",
        code if isinstance(code, int) else 137,
    )


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
