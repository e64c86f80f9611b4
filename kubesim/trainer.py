"""Kubeflow Trainer v2 (``trainer.kubeflow.org/v1alpha1``): TrainJob, TrainingRuntime and
ClusterTrainingRuntime, as pure functions (Trainer v2.1 semantics).

A TrainJob names a runtime (``spec.runtimeRef``: kind ClusterTrainingRuntime by default).
The controller builds a JobSet named as the TrainJob from the runtime's
``spec.template`` (a JobSet template): the trainer's replicatedJob -- the one labelled
``trainer.kubeflow.org/trainjob-ancestor-step: trainer``, else the one named ``node`` --
runs one Job of ``numNodes`` pods (the TrainJob's ``spec.trainer.numNodes``, else the
runtime's ``mlPolicy.numNodes``, else 1) whose container ``node`` gets
``spec.trainer.resourcesPerNode`` (and image/command/args/env). The TrainJob's
conditions follow the JobSet's: Suspended, Complete, Failed.

Validation mirrors the CRD (name, managedBy, immutable runtimeRef and managedBy) and the
TrainJob webhook's "specified trainingRuntime must be created before the TrainJob is
created" (checked by the API layer, which has the store).
"""

from __future__ import annotations

import copy
import json

from .clock import rfc3339
from .ownerref import controller_reference
from .patch import strategic_merge
from .validation import cause, dns1035_label, immutable, required

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TrainJob"
CONTROLLER_NAME = "trainer.kubeflow.org/trainjob-controller"
MANAGERS = (CONTROLLER_NAME, "kueue.x-k8s.io/multikueue")
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
NODE = "node"


def runtime_ref(trainjob: dict) -> tuple[str, str, str]:
    """(apiGroup, kind, name) of the referenced runtime, with the CRD's defaults."""
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    return ref.get("apiGroup") or GROUP, ref.get("kind") or "ClusterTrainingRuntime", ref.get("name") or ""


def is_suspended(trainjob: dict) -> bool:
    return bool((trainjob.get("spec") or {}).get("suspend"))


def managed_elsewhere(trainjob: dict) -> bool:
    return (trainjob.get("spec") or {}).get("managedBy") not in (None, CONTROLLER_NAME)


def default(trainjob: dict) -> None:
    spec = trainjob.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    ref = spec.get("runtimeRef")
    if isinstance(ref, dict):
        ref.setdefault("apiGroup", GROUP)
        ref.setdefault("kind", "ClusterTrainingRuntime")
    spec.setdefault("suspend", False)
    spec.setdefault("managedBy", CONTROLLER_NAME)


def validate(trainjob: dict) -> list[dict]:
    causes: list[dict] = []
    name = trainjob["metadata"].get("name") or ""
    if not dns1035_label(name):
        causes.append(
            cause("metadata.name", f"Invalid value: {name!r}: metadata.name must match RFC 1035 DNS label format")
        )
    spec = trainjob.get("spec")
    if not isinstance(spec, dict):
        return causes + [required("spec")]
    ref = spec.get("runtimeRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        causes.append(required("spec.runtimeRef.name"))
    if spec.get("managedBy") not in MANAGERS:
        causes.append(
            cause(
                "spec.managedBy",
                "Invalid value: ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
            )
        )
    trainer = spec.get("trainer")
    if trainer is not None and not isinstance(trainer, dict):
        causes.append(cause("spec.trainer", "must be an object"))
    elif isinstance(trainer, dict):
        nodes = trainer.get("numNodes")
        if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1):
            causes.append(
                cause("spec.trainer.numNodes", f"Invalid value: {nodes!r}: must be greater than or equal to 1")
            )
    if not isinstance(spec.get("suspend"), bool):
        causes.append(cause("spec.suspend", f"Invalid value: {spec.get('suspend')!r}: must be a boolean"))
    return causes


def validate_update(old: dict, new: dict) -> list[dict]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    return immutable("spec.runtimeRef", old_spec.get("runtimeRef"), new_spec.get("runtimeRef")) + immutable(
        "spec.managedBy", old_spec.get("managedBy"), new_spec.get("managedBy")
    )


def runtime_missing_message(kind: str, name: str) -> str:
    plural = "trainingruntimes" if kind == "TrainingRuntime" else "clustertrainingruntimes"
    return f'{plural}.{GROUP} "{name}" not found'


def validate_runtime(runtime: dict) -> list[dict]:
    spec = runtime.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    template = spec.get("template")
    rjobs = ((template or {}).get("spec") or {}).get("replicatedJobs") if isinstance(template, dict) else None
    if not isinstance(rjobs, list) or not rjobs:
        return [required("spec.template.spec.replicatedJobs")]
    return []


# --- the JobSet the controller builds ----------------------------------------------------------


def _trainer_rjob(rjobs: list[dict]) -> dict | None:
    for rjob in rjobs:
        labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(ANCESTOR_LABEL) == "trainer":
            return rjob
    return next((r for r in rjobs if r.get("name") == NODE), None)


def num_nodes(trainjob: dict, runtime: dict) -> int:
    nodes = ((trainjob.get("spec") or {}).get("trainer") or {}).get("numNodes")
    if nodes is None:
        nodes = (((runtime.get("spec") or {}).get("mlPolicy")) or {}).get("numNodes")
    return int(nodes) if nodes is not None else 1


def apply_overrides(rjobs: list[dict], overrides: object) -> None:
    """mergePodTemplateOverrides (v2.1): each override, in order, is a strategic merge patch of
    its metadata's labels and annotations and its spec onto the pod template of every
    replicatedJob it targets -- so nodeSelector merges by key, schedulingGates, containers
    (and their env), volumes and imagePullSecrets by name, while tolerations and the
    affinity's node selector terms are replaced."""
    for override in overrides if isinstance(overrides, list) else []:
        if not isinstance(override, dict):
            continue
        targets = {t.get("name") for t in override.get("targetJobs") or [] if isinstance(t, dict)}
        patch: dict = {}
        meta = override.get("metadata") or {}
        labels = {k: meta[k] for k in ("labels", "annotations") if meta.get(k) is not None}
        if labels:
            patch["metadata"] = labels
        if override.get("spec") is not None:
            patch["spec"] = override["spec"]
        for rjob in rjobs:
            if rjob.get("name") in targets:
                job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
                job_spec["template"] = strategic_merge(job_spec.get("template") or {}, copy.deepcopy(patch))


RESERVED_CONTAINERS = ("dataset-initializer", "model-initializer", NODE)


def validate_overrides(trainjob: dict, runtime: dict) -> list[dict]:
    """The JobSet plugin's ValidateObjects for podTemplateOverrides: targets and containers
    must exist in the runtime; the reserved containers take no env."""
    overrides = (trainjob.get("spec") or {}).get("podTemplateOverrides") or []
    template = ((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers: dict[str, set[str]] = {}
    for rjob in template.get("replicatedJobs") or []:
        pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template")) or {}).get("spec") or {}
        names = {c.get("name") for key in ("containers", "initContainers") for c in pod.get(key) or []}
        containers[rjob.get("name")] = names
    shown = json.dumps(overrides, separators=(",", ":"))
    messages: list[str] = []
    for override in overrides:
        spec = override.get("spec") or {}
        for target in override.get("targetJobs") or []:
            have = containers.get(target.get("name"))
            if have is None:
                messages.append("must not have targetJob that doesn't exist in the runtime job template")
                have = set()
            for c in spec.get("initContainers") or []:
                if c.get("name") not in have:
                    messages.append(
                        f"must not have initContainer that doesn't exist in the runtime job {target.get('name')}"
                    )
            for c in spec.get("containers") or []:
                if c.get("name") not in have:
                    messages.append(
                        f"must not have container that doesn't exist in the runtime job {target.get('name')}"
                    )
                elif c.get("env") and c.get("name") in RESERVED_CONTAINERS:
                    messages.append(
                        "must not have envs for the dataset-initializer, model-initializer, node containers"
                    )
    return [cause("spec.podTemplateOverrides", f"Invalid value: {shown}: {m}") for m in messages]


def validate_override_change(old: dict, new: dict, jobset: dict | None) -> list[dict]:
    """checkPodTemplateOverridesImmutability: overrides change only while the TrainJob is
    suspended and its JobSet (if any) has no active Jobs."""
    before = (old.get("spec") or {}).get("podTemplateOverrides")
    after = (new.get("spec") or {}).get("podTemplateOverrides")
    if (before or None) == (after or None):
        return []
    path = "spec.podTemplateOverrides"
    if not is_suspended(new):
        return [
            cause(
                path,
                "Forbidden: PodTemplateOverrides can only be modified when the TrainJob is suspended",
                "FieldValueForbidden",
            )
        ]
    return [
        cause(
            path,
            f"Forbidden: PodTemplateOverrides cannot be modified when the JobSet's ReplicatedJob {s.get('name')} is still active",
            "FieldValueForbidden",
        )
        for s in ((jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []
        if s.get("active", 0) > 0
    ]


def build_jobset(trainjob: dict, runtime: dict) -> dict:
    """The JobSet for a TrainJob: the runtime's template with the TrainJob's trainer applied."""
    meta, spec = trainjob["metadata"], trainjob.get("spec") or {}
    template = copy.deepcopy((runtime.get("spec") or {}).get("template") or {})
    js_spec = template.get("spec") or {}
    rjobs = [r for r in js_spec.get("replicatedJobs") or [] if isinstance(r, dict)]
    apply_overrides(rjobs, spec.get("podTemplateOverrides"))
    node = _trainer_rjob(rjobs)
    trainer = spec.get("trainer") or {}
    if node is not None:
        node["replicas"] = 1
        job_spec = node.setdefault("template", {}).setdefault("spec", {})
        count = num_nodes(trainjob, runtime)
        job_spec["parallelism"] = job_spec["completions"] = count
        for container in (job_spec.get("template") or {}).get("spec", {}).get("containers") or []:
            if container.get("name") != NODE:
                continue
            for key in ("image", "command", "args"):
                if trainer.get(key) is not None:
                    container[key] = copy.deepcopy(trainer[key])
            resources = trainer.get("resourcesPerNode")
            if isinstance(resources, dict) and (resources.get("limits") or resources.get("requests")):
                container["resources"] = {k: dict(v) for k, v in resources.items() if k in ("limits", "requests") and v}
            if trainer.get("env"):
                names = {e.get("name") for e in trainer["env"]}
                container["env"] = [
                    e for e in container.get("env") or [] if e.get("name") not in names
                ] + copy.deepcopy(trainer["env"])
    js_spec["suspend"] = is_suspended(trainjob)
    tmeta = template.get("metadata") or {}
    labels = {**(tmeta.get("labels") or {}), **(spec.get("labels") or {})}
    annotations = {**(tmeta.get("annotations") or {}), **(spec.get("annotations") or {})}
    js_meta: dict = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "ownerReferences": [controller_reference(API_VERSION, KIND, trainjob)],
    }
    if labels:
        js_meta["labels"] = labels
    if annotations:
        js_meta["annotations"] = annotations
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": js_meta, "spec": js_spec}


def set_condition(status: dict, condition: dict, now: float) -> None:
    """meta.SetStatusCondition: the transition time moves only when the status does."""
    conditions = status.setdefault("conditions", [])
    for i, current in enumerate(conditions):
        if current.get("type") == condition["type"]:
            changed = current.get("status") != condition["status"]
            stamp = condition.get("lastTransitionTime") or rfc3339(now)
            conditions[i] = {**condition, "lastTransitionTime": stamp if changed else current.get("lastTransitionTime")}
            return
    conditions.append({**condition, "lastTransitionTime": condition.get("lastTransitionTime") or rfc3339(now)})


def has_condition(obj: dict, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )
