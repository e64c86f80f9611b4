"""The resource types kubesim serves, with their validation and defaulting.

Validation returns a list of causes (field + message) that the API layer turns
into 422 Invalid; defaulting mirrors what the API server (or the CRD's schema
defaults) would fill in, so objects read back look like a real cluster's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import (
    batchjob,
    jobset,
    mpijob,
    podvalidation,
    priorityclass,
    queuedjob,
    rbac,
    service,
    trainer,
    trainingop,
    webhookconfig,
)
from .validation import (  # noqa: F401  (some re-exported: kubesim.resources was their home)
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    cause,
    default_pod_spec,
    dns1035_label,
    parse_quantity,
    required,
    validate_pod_spec,
    validate_resources,
)

COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
# RBAC objects' names are path segments (ValidatePathSegmentName): "system:aggregate-to-edit".
PATH_SEGMENT = re.compile(r"^(?!\.{1,2}$)[^/%]+$")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = False
    # Custom resources demand metadata.resourceVersion on PUT; built-in types do not.
    unconditional_update: bool = True
    fields: frozenset[str] = COMMON_FIELDS
    validate: Callable[[dict], list[dict]] | None = None
    default: Callable[[dict], None] | None = None
    # Rules on a change (old, new) -> causes: immutable fields and the like.
    validate_update: Callable[[dict, dict], list[dict]] | None = None
    # Rules that read other objects (store, old object or None, new object) -> causes, checked
    # on create and update.
    validate_refs: Callable[[Any, dict | None, dict], list[dict]] | None = None
    name_pattern: re.Pattern = DNS1123_SUBDOMAIN
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


def validate_name(rt: ResourceType, name: object) -> list[dict]:
    if not name:
        return [cause("metadata.name", "name or generateName is required", "FieldValueRequired")]
    if rt.name_pattern is PATH_SEGMENT:
        if isinstance(name, str) and PATH_SEGMENT.match(name):
            return []
        return [
            cause("metadata.name", f"Invalid value: {name!r}: may not be '.' or '..' and may not contain '/' or '%'")
        ]
    limit = 63 if rt.name_pattern is DNS1123_LABEL else 253
    if not isinstance(name, str) or len(name) > limit or not rt.name_pattern.match(name):
        kind = "RFC 1123 label" if rt.name_pattern is DNS1123_LABEL else "RFC 1123 subdomain"
        return [
            cause(
                "metadata.name",
                f"Invalid value: {name!r}: a lowercase {kind} must consist of lower case alphanumeric characters, '-' or '.'",
            )
        ]
    return []


def _validate_pod(obj: dict) -> list[dict]:
    spec = obj.get("spec")
    causes = validate_pod_spec("spec", spec)
    if isinstance(spec, dict) and not causes:
        causes = podvalidation.validate_scheduling("spec", spec) + podvalidation.validate_pod_create(spec)
    return causes


def _default_pod(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    default_pod_spec(spec)
    if isinstance(spec, dict):
        podvalidation.default_tolerations(spec)
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    podvalidation.gated_condition(obj)


def _default_namespace(obj: dict) -> None:
    name = obj["metadata"]["name"]
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")


def _validate_quantities(path: str, mapping: object) -> list[dict]:
    if mapping is None:
        return []
    if not isinstance(mapping, dict):
        return [cause(path, "must be an object")]
    causes = []
    for name, value in mapping.items():
        try:
            parse_quantity(value)
        except ValueError as exc:
            causes.append(cause(f"{path}[{name}]", f"Invalid value: {value!r}: {exc}"))
    return causes


def _validate_quota(obj: dict) -> list[dict]:
    return _validate_quantities("spec.hard", (obj.get("spec") or {}).get("hard"))


def _validate_node(obj: dict) -> list[dict]:
    status = obj.get("status") or {}
    return _validate_quantities("status.capacity", status.get("capacity")) + _validate_quantities(
        "status.allocatable", status.get("allocatable")
    )


def _validate_lease(obj: dict) -> list[dict]:
    duration = (obj.get("spec") or {}).get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        return [cause("spec.leaseDurationSeconds", f"Invalid value: {duration!r}: must be greater than 0")]
    return []


def _default_spec(obj: dict) -> None:
    obj.setdefault("spec", {})


POD_FIELDS = COMMON_FIELDS | {
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
EVENT_FIELDS = COMMON_FIELDS | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}

NAMESPACES = ResourceType(
    "",
    "v1",
    "namespaces",
    "Namespace",
    False,
    status_subresource=True,
    fields=COMMON_FIELDS | {"status.phase"},
    default=_default_namespace,
    name_pattern=DNS1123_LABEL,
)
NODES = ResourceType(
    "",
    "v1",
    "nodes",
    "Node",
    False,
    status_subresource=True,
    fields=COMMON_FIELDS | {"spec.unschedulable"},
    validate=_validate_node,
)
PODS = ResourceType(
    "",
    "v1",
    "pods",
    "Pod",
    True,
    status_subresource=True,
    fields=POD_FIELDS,
    validate=_validate_pod,
    default=_default_pod,
    validate_update=podvalidation.validate_pod_update,
)
RESOURCEQUOTAS = ResourceType(
    "", "v1", "resourcequotas", "ResourceQuota", True, status_subresource=True, validate=_validate_quota
)
EVENTS = ResourceType("", "v1", "events", "Event", True, fields=EVENT_FIELDS)
SERVICES = ResourceType(
    "",
    "v1",
    "services",
    "Service",
    True,
    status_subresource=True,
    validate=service.validate,
    default=service.default,
    validate_update=service.validate_update,
)


def _training_type(kind: trainingop.TrainingKind) -> ResourceType:
    """A training-operator kind served as a CRD (status subresource, validated by its webhook)."""
    return ResourceType(
        trainingop.GROUP,
        trainingop.VERSION,
        kind.plural,
        kind.kind,
        True,
        status_subresource=True,
        unconditional_update=False,
        validate=kind.validate,
        default=_default_spec,
        validate_update=lambda old, new: trainingop.validate_update(kind, old, new),
    )


TFJOBS = _training_type(trainingop.TFJOB)
PYTORCHJOBS = _training_type(trainingop.PYTORCHJOB)
XGBOOSTJOBS = _training_type(trainingop.XGBOOSTJOB)
PADDLEJOBS = _training_type(trainingop.PADDLEJOB)
JAXJOBS = _training_type(trainingop.JAXJOB)
TRAINING_TYPES = (TFJOBS, PYTORCHJOBS, XGBOOSTJOBS, PADDLEJOBS, JAXJOBS)
MPIJOBS = ResourceType(
    mpijob.GROUP,
    mpijob.VERSION,
    "mpijobs",
    mpijob.KIND,
    True,
    status_subresource=True,
    unconditional_update=False,
    validate=mpijob.validate_schema,
    default=_default_spec,
)
JOBS = ResourceType(
    batchjob.GROUP,
    batchjob.VERSION,
    "jobs",
    batchjob.KIND,
    True,
    status_subresource=True,
    fields=COMMON_FIELDS | {"status.successful"},
    validate=batchjob.validate,
    default=batchjob.default,
    validate_update=batchjob.validate_update,
)
JOBSETS = ResourceType(
    jobset.GROUP,
    jobset.VERSION,
    "jobsets",
    jobset.KIND,
    True,
    status_subresource=True,
    unconditional_update=False,
    validate=jobset.validate,
    default=jobset.default,
    validate_update=jobset.validate_update,
)
TRAINJOBS = ResourceType(
    trainer.GROUP,
    trainer.VERSION,
    "trainjobs",
    trainer.KIND,
    True,
    status_subresource=True,
    unconditional_update=False,
    validate=trainer.validate,
    default=trainer.default,
    validate_update=trainer.validate_update,
    validate_refs=lambda store, old, obj: _validate_trainjob_refs(store, old, obj),
)
TRAININGRUNTIMES = ResourceType(
    trainer.GROUP,
    trainer.VERSION,
    "trainingruntimes",
    "TrainingRuntime",
    True,
    unconditional_update=False,
    validate=trainer.validate_runtime,
)
CLUSTERTRAININGRUNTIMES = ResourceType(
    trainer.GROUP,
    trainer.VERSION,
    "clustertrainingruntimes",
    "ClusterTrainingRuntime",
    False,
    unconditional_update=False,
    validate=trainer.validate_runtime,
)


def _validate_trainjob_refs(store: Any, old: dict | None, obj: dict) -> list[dict]:
    """The TrainJob webhook: the runtime must be supported and exist before the TrainJob;
    podTemplateOverrides must fit the runtime and change only while suspended (the JobSet
    plugin's ValidateObjects)."""
    group, kind, name = trainer.runtime_ref(obj)
    if group != trainer.GROUP or kind not in trainer.RUNTIME_KINDS:
        return [cause("spec.runtimeRef", f"Invalid value: unsupported runtime: {kind}.{group}")]
    rt = TRAININGRUNTIMES if kind == "TrainingRuntime" else CLUSTERTRAININGRUNTIMES
    namespace = obj["metadata"].get("namespace", "") if rt.namespaced else ""
    runtime = store.find(rt, namespace, name)
    if runtime is not None:
        causes = trainer.validate_overrides(obj, runtime)
        if old is not None:
            jobset = store.find(JOBSETS, namespace or obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            causes += trainer.validate_override_change(old, obj, jobset)
        return causes
    what = "trainingRuntime" if kind == "TrainingRuntime" else "clusterTrainingRuntime"
    return [
        cause(
            "spec.runtimeRef",
            f"Invalid value: {trainer.runtime_missing_message(kind, name)}: "
            f"specified {what} must be created before the TrainJob is created",
        )
    ]


PRIORITYCLASSES = ResourceType(
    "scheduling.k8s.io",
    "v1",
    "priorityclasses",
    "PriorityClass",
    False,
    validate=priorityclass.validate,
    default=priorityclass.default,
    validate_update=priorityclass.validate_update,
)

MUTATING = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
    validate=webhookconfig.validate,
    default=webhookconfig.default,
)
VALIDATING = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
    validate=webhookconfig.validate,
    default=webhookconfig.default,
)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, validate=_validate_lease)
ROLES = ResourceType(
    rbac.GROUP, rbac.VERSION, "roles", "Role", True, validate=rbac.validate_role, name_pattern=PATH_SEGMENT
)
CLUSTERROLES = ResourceType(
    rbac.GROUP,
    rbac.VERSION,
    "clusterroles",
    "ClusterRole",
    False,
    validate=rbac.validate_role,
    name_pattern=PATH_SEGMENT,
)
ROLEBINDINGS = ResourceType(
    rbac.GROUP,
    rbac.VERSION,
    "rolebindings",
    "RoleBinding",
    True,
    validate=rbac.validate_binding,
    validate_update=rbac.validate_binding_update,
    name_pattern=PATH_SEGMENT,
)
CLUSTERROLEBINDINGS = ResourceType(
    rbac.GROUP,
    rbac.VERSION,
    "clusterrolebindings",
    "ClusterRoleBinding",
    False,
    validate=rbac.validate_binding,
    validate_update=rbac.validate_binding_update,
    name_pattern=PATH_SEGMENT,
)
# jobdash's own: a waiting job's place in its queue (no status subresource: only jobdash writes it).
QUEUEDJOBS = ResourceType(
    queuedjob.GROUP,
    queuedjob.VERSION,
    queuedjob.PLURAL,
    queuedjob.KIND,
    True,
    unconditional_update=False,
    validate=queuedjob.validate,
)
RBAC_TYPES = {rt.kind: rt for rt in (ROLES, CLUSTERROLES, ROLEBINDINGS, CLUSTERROLEBINDINGS)}

ALL = (
    NAMESPACES,
    NODES,
    PODS,
    RESOURCEQUOTAS,
    EVENTS,
    SERVICES,
    *TRAINING_TYPES,
    MPIJOBS,
    JOBS,
    JOBSETS,
    TRAINJOBS,
    TRAININGRUNTIMES,
    CLUSTERTRAININGRUNTIMES,
    PRIORITYCLASSES,
    MUTATING,
    VALIDATING,
    LEASES,
    *RBAC_TYPES.values(),
    QUEUEDJOBS,
)
# The job kinds: quota counts them (count/<plural>.<group>) and the audit records their creates.
WORKLOADS = (*TRAINING_TYPES, MPIJOBS, JOBS, JOBSETS, TRAINJOBS)
BY_GROUP_PLURAL = {(rt.group, rt.plural): rt for rt in ALL}
BY_API_VERSION_KIND = {(rt.api_version, rt.kind): rt for rt in ALL}
