"""What a job asks of the cluster, independent of the job's kind.

Each supported kind (queueing/kinds/: the Kubeflow v1 family, MPIJob, batch
Job, JobSet, TrainJob, plain Pods and pod groups) is one ``JobAdapter`` that validates its manifest and
reduces it to a ``Workload``: groups of identical pods with per-pod resources in canonical
integers.  The admission logic only ever looks at ``Workload``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from .capability_base import objects_are_pods
from .devices import derived_totals
from .errors import FieldError, ManifestError
from .node_affinity import NodeAffinity, terms_from_json, terms_to_json
from .validation import describe

# ResourceQuota accepts both "cpu" and "requests.cpu" (same meaning) for these;
# everything else is quota'd only as "requests.<name>".
_QUOTA_BARE_NAMES = ("cpu", "memory", "ephemeral-storage")
# Limits are quota'd only for these; extended resources have requests == limits.
_QUOTA_LIMIT_NAMES = ("cpu", "memory", "ephemeral-storage")


def _frozen_map(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


@dataclass(frozen=True)
class PodSet:
    """``count`` identical pods; resources are per pod, in canonical integers
    (cpu in millicores, memory and storage in bytes, devices as counts).
    ``node_affinity``: the required node affinity's terms (node_affinity.py), () for none.
    ``minimum``/``maximum``: the elastic range of the role (its count is between them: the
    job runs with any number of its pods in it, capabilities.JobWithElasticRange); None: not elastic."""

    role: str
    count: int
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_affinity: NodeAffinity = ()
    minimum: int | None = None
    maximum: int | None = None

    def __post_init__(self) -> None:
        # Frozen all the way down, so a Workload can be shared without copies.
        object.__setattr__(self, "requests", _frozen_map(self.requests))
        object.__setattr__(self, "limits", _frozen_map(self.limits))
        object.__setattr__(self, "node_selector", _frozen_map(self.node_selector))
        object.__setattr__(self, "tolerations", tuple(_frozen_map(t) for t in self.tolerations))
        object.__setattr__(self, "node_affinity", tuple(self.node_affinity))

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "role": self.role,
            "count": self.count,
            "requests": dict(self.requests),
            "limits": dict(self.limits),
            "node_selector": dict(self.node_selector),
            "tolerations": [dict(t) for t in self.tolerations],
        }
        # Written only when there is one: a pod set without reads as every one stored before.
        if self.node_affinity:
            found["node_affinity"] = terms_to_json(self.node_affinity)
        if self.minimum is not None:
            found["minimum"], found["maximum"] = self.minimum, self.maximum
        return found

    @property
    def elastic(self) -> bool:
        return self.minimum is not None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PodSet:
        return cls(
            role=data["role"],
            count=data["count"],
            requests=data.get("requests", {}),
            limits=data.get("limits", {}),
            node_selector=data.get("node_selector", {}),
            tolerations=tuple(data.get("tolerations", ())),
            node_affinity=terms_from_json(data.get("node_affinity")),
            minimum=data.get("minimum"),
            maximum=data.get("maximum"),
        )


@dataclass(frozen=True)
class Workload:
    kind: str
    api_version: str
    name: str
    namespace: str | None
    pod_sets: tuple[PodSet, ...]
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pod_sets", tuple(self.pod_sets))
        object.__setattr__(self, "annotations", _frozen_map(self.annotations))
        object.__setattr__(self, "labels", _frozen_map(self.labels))

    @property
    def pods(self) -> int:
        return sum(pod_set.count for pod_set in self.pod_sets)

    @property
    def elastic(self) -> bool:
        """Some role runs with any number of pods in its range (PodSet.minimum/maximum)."""
        return any(pod_set.minimum is not None for pod_set in self.pod_sets)

    @property
    def counts(self) -> dict[str, int]:
        return {pod_set.role: pod_set.count for pod_set in self.pod_sets}

    def with_counts(self, counts: Mapping[str, int]) -> Workload:
        """The same job with ``counts`` (role -> pods) of the roles named, the others unchanged."""
        pod_sets = tuple(replace(p, count=counts[p.role]) if p.role in counts else p for p in self.pod_sets)
        return replace(self, pod_sets=pod_sets)

    @property
    def requests(self) -> dict[str, int]:
        """Requests summed over every pod of the job."""
        return self._total("requests")

    @property
    def limits(self) -> dict[str, int]:
        """Limits summed over every pod that sets them (see podspec for the per-pod rule)."""
        return self._total("limits")

    def _total(self, which: str) -> dict[str, int]:
        total: dict[str, int] = {}
        for pod_set in self.pod_sets:
            for name, amount in getattr(pod_set, which).items():
                total[name] = total.get(name, 0) + amount * pod_set.count
        return total

    def quota_demand(self, *, count_object: bool = True) -> dict[str, int]:
        """What admitting this job adds to each ResourceQuota key.

        cpu and memory keys are always present (0 when unset) so quota rules
        can be compared without special cases; other resources appear only
        when the job uses them.  ``count/<plural>.<group>``, the object count
        of its kind, is 1 unless ``count_object`` is False (its object exists
        already and is counted in the quota's used: a suspended object waiting
        in the queue, or one being created); a kind no adapter knows has no
        count key (its plural is not guessed).
        """
        requests = self.requests
        limits = self.limits
        demand: dict[str, int] = {}
        for name in ("cpu", "memory"):
            requests.setdefault(name, 0)
            limits.setdefault(name, 0)
        for name, amount in requests.items():
            demand[f"requests.{name}"] = amount
            if name in _QUOTA_BARE_NAMES:
                demand[name] = amount
        for name in _QUOTA_LIMIT_NAMES:
            if name in limits:
                demand[f"limits.{name}"] = limits[name]
        demand["pods"] = self.pods
        # Derived totals (devices.py: HAMi's memory x vGPUs), which no API server counts.
        for pod_set in self.pod_sets:
            for name, amount in derived_totals(pod_set.requests).items():
                demand[f"requests.{name}"] = demand.get(f"requests.{name}", 0) + amount * pod_set.count
        adapter = ADAPTERS.get((self.api_version, self.kind))
        # A job of pods is no object of its own: its pods are counted by "pods".
        if count_object and adapter is not None and not objects_are_pods(adapter):
            demand[f"count/{resource_key(adapter)}"] = 1
        return demand

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "api_version": self.api_version,
            "name": self.name,
            "namespace": self.namespace,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "pod_sets": [pod_set.to_json() for pod_set in self.pod_sets],
            "pods": self.pods,
            "requests": self.requests,
            "limits": self.limits,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Workload:
        """Inverse of ``to_json`` (derived totals are recomputed, not trusted)."""
        return cls(
            kind=data["kind"],
            api_version=data["api_version"],
            name=data["name"],
            namespace=data.get("namespace"),
            pod_sets=tuple(PodSet.from_json(p) for p in data["pod_sets"]),
            annotations=data.get("annotations", {}),
            labels=data.get("labels", {}),
        )


# A job's phase as jobdash follows it, whatever its kind calls it (the adapter translates):
# "" (nothing yet), Created, Running, Restarting, Suspended, Succeeded, Failed.
PHASES = ("", "Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed")


@dataclass(frozen=True)
class JobStatus:
    phase: str  # one of PHASES
    message: str = ""

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


class RuntimeSource(Protocol):
    """Objects a job refers to and that the cluster holds (a TrainJob's TrainingRuntime):
    the caller reads them (jobdash through its gateway); the core only interprets them.
    `namespace` is "" for a cluster-scoped kind."""

    def runtime(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True)
class Referenced:
    """A kind of object jobs refer to, so that a RuntimeSource can read it by kind."""

    kind: str  # e.g. "ClusterTrainingRuntime"
    api_version: str  # e.g. "trainer.kubeflow.org/v1alpha1"
    plural: str  # e.g. "clustertrainingruntimes"
    namespaced: bool


REFERENCED: dict[str, Referenced] = {}


def register_referenced(referenced: Referenced) -> Referenced:
    REFERENCED[referenced.kind] = referenced
    return referenced


@runtime_checkable
class JobAdapter(Protocol):
    """One job kind, as Kueue's jobframework.GenericJob: how to validate it as its own
    controller and webhook do, what it asks of the cluster (a Workload), how its pods are
    labelled and how its status reads. What only some kinds do (a suspend flag, a role
    label on pods, their own name rule or start rule) is declared by the capability
    protocols of queueing.capabilities. Nothing outside the adapters names a kind: the
    cluster side is generic over (group, version, plural)."""

    @property
    def api_version(self) -> str: ...  # e.g. "kubeflow.org/v1"

    @property
    def kind(self) -> str: ...  # e.g. "TFJob"

    @property
    def plural(self) -> str: ...  # e.g. "tfjobs", used for the count/<plural>.<group> quota key

    @property
    def pod_job_label(self) -> str: ...  # the label its controller sets on its pods, valued the job's name

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        """Return the Workload or raise ManifestError listing every problem."""
        ...

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        """The phase of a live object of this kind, from its status."""
        ...


def adapter_key(api_version: str, kind: str) -> str:
    """How jobdash names a kind in keys and URLs: "<plural>.<group>" ("jobs.batch")."""
    adapter = ADAPTERS.get((api_version, kind))
    if adapter is None:
        raise KeyError(f"no adapter for {kind} ({api_version})")
    return resource_key(adapter)


def resource_key(adapter: JobAdapter) -> str:
    group = adapter.api_version.rpartition("/")[0]
    return f"{adapter.plural}.{group}" if group else adapter.plural


ADAPTERS: dict[tuple[str, str], JobAdapter] = {}
BY_KEY: dict[str, JobAdapter] = {}


def register(adapter: JobAdapter) -> JobAdapter:
    """Make a kind admissible; returns the adapter so modules can keep a handle on it."""
    if not isinstance(adapter, JobAdapter):
        raise TypeError(f"{adapter!r} is not a JobAdapter (see the protocol's members)")
    ADAPTERS[(adapter.api_version, adapter.kind)] = adapter
    BY_KEY[resource_key(adapter)] = adapter
    return adapter


def adapter_for(api_version: str, kind: str) -> JobAdapter | None:
    return ADAPTERS.get((api_version, kind))


def adapter_by_key(key: str) -> JobAdapter:
    return BY_KEY[key]


def read_path(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """obj[path[0]][path[1]]... or None where a step is missing or not a mapping."""
    value: Any = obj
    for step in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


def latest_true_condition(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """Controllers append conditions; the last one that is true is the current one."""
    conditions = read_path(obj, ("status", "conditions"))
    true = [c for c in conditions or () if isinstance(c, Mapping) and c.get("status") == "True"]
    return true[-1] if true else {}


def workload_from_manifest(manifest: Any, runtimes: RuntimeSource | None = None) -> Workload:
    """Identify the manifest's kind and hand it to that kind's adapter."""
    if not isinstance(manifest, Mapping):
        raise ManifestError([FieldError("", f"expected a mapping (a Kubernetes object), got {describe(manifest)}")])
    errors: list[FieldError] = []
    api_version = _required_string(manifest, "apiVersion", errors)
    kind = _required_string(manifest, "kind", errors)
    if errors:
        raise ManifestError(errors)
    adapter = ADAPTERS.get((api_version, kind))
    if adapter is None:
        raise ManifestError([_unsupported(api_version, kind)])
    return adapter.validate_and_build(manifest, runtimes)


def _required_string(manifest: Mapping[Any, Any], key: str, errors: list[FieldError]) -> str:
    value = manifest.get(key)
    if value is None or value == "":
        errors.append(FieldError(key, f"required; supported: {_supported()}"))
    elif not isinstance(value, str):
        errors.append(FieldError(key, f"must be a string, got {describe(value)}"))
    return value if isinstance(value, str) else ""


def _unsupported(api_version: str, kind: str) -> FieldError:
    versions = sorted(v for v, k in ADAPTERS if k == kind)
    if versions:
        return FieldError(
            "apiVersion", f"unsupported apiVersion {api_version!r} for {kind}; supported: {', '.join(versions)}"
        )
    return FieldError("kind", f"unsupported kind {kind!r}; supported: {_supported()}")


def _supported() -> str:
    return ", ".join(f"{kind} ({version})" for version, kind in sorted(ADAPTERS, key=lambda pair: pair[1])) or "none"
