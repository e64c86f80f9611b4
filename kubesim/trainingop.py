"""The Kubeflow training-operator's job kinds (release-1.9), table-driven.

TFJob, PyTorchJob, XGBoostJob, PaddleJob and JAXJob (``kubeflow.org/v1``) share the
operator's common code (``ReconcileJobs``, ``ReconcilePods``): pods
``<job>-<type lowercase>-<index>`` labelled ``training.kubeflow.org/*`` and owned by the
job, replica statuses counted from the pods, runPolicy (suspend, cleanPodPolicy,
backoffLimit, managedBy). They differ in the name of their replica map, the replica types
and container the webhook accepts, the defaults (``SetDefaults_<Kind>``), which replica
is the master, and ``UpdateJobStatus`` -- which decides Running, Succeeded, Failed and
Restarting. A ``TrainingKind`` holds those differences.

Deviation kept from kubesim's TFJob: a TFJob's cleanPodPolicy defaults to Running (the
operator's default is None); the other kinds default to None as the operator does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import tfjob
from .jsoncodec import clone
from .kubeflow import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    MULTIKUEUE_MANAGER,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    TRAINING_OPERATOR_MANAGER,
    validate_managed_by,
    validate_managed_by_update,
    validate_suspend,
)
from .ownerref import controller_reference
from .trainingstatus import update_jax, update_master_or_workers, update_xgboost
from .validation import DNS1035_MESSAGE, cause, dns1035_label, not_supported, required

GROUP, VERSION = "kubeflow.org", "v1"
API_VERSION = f"{GROUP}/{VERSION}"
CLEAN_POD_POLICIES = ("All", "Running", "None")
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")


@dataclass(frozen=True)
class TrainingKind:
    kind: str
    plural: str
    specs_field: str  # e.g. "pytorchReplicaSpecs"
    replica_types: tuple[str, ...]  # in the order UpdateJobStatus walks them
    container: str  # the container the webhook requires and whose exit code the operator reads
    default_restart: str
    default_clean: str
    controller: str  # controllerName: the operator-name label and the events' source
    any_case: bool  # type names in any case (TFJob's webhook); else exactly as listed
    master_role: Callable[[dict, str, int], bool]
    update_status: Callable[..., None]
    validate: Callable[[dict], list[dict]]
    selector: str | None  # how replicaStatuses carry their selector ("labelSelector" | "selector" | None)

    def reason(self, what: str) -> str:
        return f"{self.kind}{what}"  # commonutil.NewReason


def canonical_type(kind: TrainingKind, name: object) -> str | None:
    if not isinstance(name, str):
        return None
    if kind.any_case:
        return _LOWER[kind.plural].get(name.lower())
    return name if name in kind.replica_types else None


def replica_specs(kind: TrainingKind, job: dict) -> dict[str, dict]:
    """Replica specs keyed by camel-cased type, with the operator's defaults filled in."""
    specs: dict[str, dict] = {}
    for name, spec in ((job.get("spec") or {}).get(kind.specs_field) or {}).items():
        rtype = canonical_type(kind, name)
        if rtype is None or not isinstance(spec, dict):
            continue
        spec = dict(spec)
        if spec.get("replicas") is None:
            spec["replicas"] = 1
        spec.setdefault("restartPolicy", kind.default_restart)
        specs[rtype] = spec
    return specs


def run_policy(kind: TrainingKind, job: dict) -> dict:
    policy = dict((job.get("spec") or {}).get("runPolicy") or {})
    if policy.get("cleanPodPolicy") is None:
        policy["cleanPodPolicy"] = kind.default_clean
    return policy


def is_suspended(kind: TrainingKind, job: dict) -> bool:
    return bool(run_policy(kind, job).get("suspend"))


def managed_elsewhere(kind: TrainingKind, job: dict) -> bool:
    """ManagedByExternalController: another controller (MultiKueue) reconciles this job."""
    policy = (job.get("spec") or {}).get("runPolicy") or {}
    return policy.get("managedBy") not in (None, TRAINING_OPERATOR_MANAGER)


def expected_pods(kind: TrainingKind, job: dict) -> list[tuple[str, int]]:
    return [(rtype, i) for rtype, spec in replica_specs(kind, job).items() for i in range(int(spec["replicas"]))]


def pod_name(job_name: str, rtype: str, index: int) -> str:
    return f"{job_name}-{rtype.lower()}-{index}"


def build_pod(kind: TrainingKind, job: dict, rtype: str, index: int) -> dict:
    """The pod the operator creates for one replica: template + the operator's labels and owner."""
    specs = replica_specs(kind, job)
    spec = specs[rtype]
    meta = job["metadata"]
    template = clone(spec.get("template") or {})
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {})
    labels.update(
        {
            JOB_NAME_LABEL: meta["name"],
            OPERATOR_NAME_LABEL: kind.controller,
            REPLICA_TYPE_LABEL: rtype.lower(),
            REPLICA_INDEX_LABEL: str(index),
        }
    )
    if kind.master_role(specs, rtype, index):
        labels[JOB_ROLE_LABEL] = "master"
    pod_spec = template.get("spec") or {}
    # The operator maps its ExitCode policy onto the pod's Never and restarts pods itself.
    restart = spec.get("restartPolicy", kind.default_restart)
    pod_spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
    pod_meta = {
        "name": pod_name(meta["name"], rtype, index),
        "namespace": meta["namespace"],
        "labels": labels,
        "ownerReferences": [controller_reference(API_VERSION, kind.kind, job)],
    }
    if template_meta.get("annotations"):
        pod_meta["annotations"] = dict(template_meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def exit_code(kind: TrainingKind, pod: dict) -> int:
    """The exit code of the kind's container (0xbeef when it has not terminated, as in Go)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if status.get("name") == kind.container and terminated:
            return int(terminated.get("exitCode", 0))
    return 0xBEEF


def replica_statuses(kind: TrainingKind, job: dict, pods: list[dict]) -> dict[str, dict]:
    """Active/succeeded/failed per replica type, counted from the job's pods (zeros omitted, as in Go)."""
    name = job["metadata"]["name"]
    counts = {rtype: {"active": 0, "succeeded": 0, "failed": 0} for rtype in replica_specs(kind, job)}
    by_label = {rtype.lower(): rtype for rtype in counts}
    for pod in pods:
        rtype = by_label.get((pod["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL, ""))
        if rtype is None:
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            counts[rtype]["active"] += 1
        elif phase == "Succeeded":
            counts[rtype]["succeeded"] += 1
        elif phase == "Failed":
            counts[rtype]["failed"] += 1
    result = {}
    for rtype, c in counts.items():
        entry: dict[str, object] = {k: v for k, v in c.items() if v}
        match_labels = {JOB_NAME_LABEL: name, OPERATOR_NAME_LABEL: kind.controller, REPLICA_TYPE_LABEL: rtype.lower()}
        if kind.selector == "labelSelector":
            entry["labelSelector"] = {"matchLabels": match_labels}
        elif kind.selector == "selector":  # metav1.FormatLabelSelector: key=value, sorted by key
            entry["selector"] = ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))
        result[rtype] = entry
    return result


# --- validation: the operator's webhooks (answered as 422) -----------------------------------


def _validate(
    kind: TrainingKind,
    job: dict,
    *,
    managed_by: bool = True,
    single: tuple[str, ...] = (),
    required_types: tuple[str, ...] = (),
    min_one: bool = False,
) -> list[dict]:
    """validate<Kind>Job: name, runPolicy, replica types, containers, replica counts."""
    causes: list[dict] = []
    name = (job.get("metadata") or {}).get("name")
    if name and not dns1035_label(name):
        causes.append(cause("metadata.name", f"Invalid value: {name!r}: should match: {DNS1035_MESSAGE}"))
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return causes + [required("spec")]
    policy = spec.get("runPolicy") or {}
    if not isinstance(policy, dict):
        causes.append(cause("spec.runPolicy", "must be an object"))
        policy = {}
    if managed_by:
        causes.extend(validate_managed_by(policy, "spec.runPolicy", (TRAINING_OPERATOR_MANAGER, MULTIKUEUE_MANAGER)))
    if policy.get("cleanPodPolicy") not in (None, *CLEAN_POD_POLICIES):
        causes.append(not_supported("spec.runPolicy.cleanPodPolicy", policy["cleanPodPolicy"], CLEAN_POD_POLICIES))
    causes.extend(validate_suspend(policy, "spec.runPolicy"))
    path = f"spec.{kind.specs_field}"
    specs = spec.get(kind.specs_field)
    if not isinstance(specs, dict) or not specs:
        return causes + [required(path, "Required value: must be required")]
    for rtype, rspec in specs.items():
        where = f"{path}[{rtype}]"
        containers_path = f"{where}.template.spec.containers"
        if canonical_type(kind, rtype) is None:
            causes.append(not_supported(where, rtype, kind.replica_types))
        if not isinstance(rspec, dict):
            causes.append(required(containers_path, "Required value: must be specified"))
            continue
        containers = ((rspec.get("template") or {}).get("spec") or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            causes.append(required(containers_path, "Required value: must be specified"))
            containers = []
        for i, container in enumerate(containers):
            if not isinstance(container, dict) or not container.get("image"):
                causes.append(required(f"{containers_path}[{i}].image", "Required value: must be required"))
        if not any(isinstance(c, dict) and c.get("name") == kind.container for c in containers):
            causes.append(
                required(
                    containers_path, f"Required value: must have at least one container with name {kind.container}"
                )
            )
        count = rspec.get("replicas")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            causes.append(cause(f"{where}.replicas", f"Invalid value: {count!r}: must be an integer"))
        elif rtype in single and count != 1:
            causes.append(cause(f"{where}.replicas", "Forbidden: must be 1", "FieldValueForbidden"))
        elif min_one and rtype not in single and count is not None and count < 1:
            causes.append(cause(f"{where}.replicas", "Forbidden: must be at least 1", "FieldValueForbidden"))
        elif count is not None and count < 0:
            causes.append(cause(f"{where}.replicas", f"Invalid value: {count}: must be greater than or equal to 0"))
        restart = rspec.get("restartPolicy")
        if restart not in (None, *RESTART_POLICIES):
            causes.append(not_supported(f"{where}.restartPolicy", restart, RESTART_POLICIES))
    for rtype in required_types:
        if rtype not in specs:
            causes.append(required(f"{path}[{rtype}]", "Required value: must be present"))
    return causes


def _validate_pytorch(job: dict) -> list[dict]:
    causes = _validate(PYTORCHJOB, job, single=("Master",), min_one=True)
    spec = job.get("spec")
    if (
        isinstance(spec, dict)
        and spec.get("elasticPolicy") is not None
        and "Worker" not in (spec.get("pytorchReplicaSpecs") or {})
    ):
        causes.append(
            required("spec.pytorchReplicaSpecs[Worker]", "Required value: must be configured if elastic policy is used")
        )
    return causes


def validate_update(kind: TrainingKind, old: dict, new: dict) -> list[dict]:
    """ValidateRunPolicyUpdate: managedBy is immutable (JAXJob's webhook does not check it)."""
    if kind is JAXJOB:
        return []
    old_policy = (old.get("spec") or {}).get("runPolicy") or {}
    new_policy = (new.get("spec") or {}).get("runPolicy") or {}
    if not isinstance(old_policy, dict) or not isinstance(new_policy, dict):
        return []
    return validate_managed_by_update(old_policy, new_policy, "spec.runPolicy")


def _tf_update(kind: TrainingKind, job: dict, specs: dict, pods: list[dict], status: dict, now: float) -> None:
    tfjob.update_job_status(job, specs, pods, status, now)


def _master_only(specs: dict, rtype: str, index: int) -> bool:
    return rtype == "Master"


def _index_zero(specs: dict, rtype: str, index: int) -> bool:
    return index == 0


# --- the table -------------------------------------------------------------------------------

TFJOB = TrainingKind(
    "TFJob", "tfjobs", "tfReplicaSpecs", tfjob.REPLICA_TYPES, "tensorflow", "Never", "Running",
    "tfjob-controller", True, tfjob.is_master_role, _tf_update, tfjob.validate, "labelSelector",
)  # fmt: skip
PYTORCHJOB = TrainingKind(
    "PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", ("Master", "Worker"), "pytorch", "OnFailure", "None",
    "pytorchjob-controller", False, tfjob.is_master_role, update_master_or_workers, _validate_pytorch, "selector",
)  # fmt: skip
XGBOOSTJOB = TrainingKind(
    "XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", ("Master", "Worker"), "xgboost", "Never", "None",
    "xgboostjob-controller", False, _master_only, update_xgboost,
    lambda job: _validate(BY_KIND["XGBoostJob"], job, single=("Master",), required_types=("Master",)), None,
)  # fmt: skip
PADDLEJOB = TrainingKind(
    "PaddleJob", "paddlejobs", "paddleReplicaSpecs", ("Master", "Worker"), "paddle", "OnFailure", "None",
    "paddlejob-controller", False, _master_only, update_master_or_workers,
    lambda job: _validate(BY_KIND["PaddleJob"], job), "selector",
)  # fmt: skip
JAXJOB = TrainingKind(
    "JAXJob", "jaxjobs", "jaxReplicaSpecs", ("Worker",), "jax", "Never", "None",
    "jaxjob-controller", False, _index_zero, update_jax,
    lambda job: _validate(BY_KIND["JAXJob"], job, managed_by=False), "selector",
)  # fmt: skip

KINDS = (TFJOB, PYTORCHJOB, XGBOOSTJOB, PADDLEJOB, JAXJOB)
BY_PLURAL = {k.plural: k for k in KINDS}
BY_KIND: dict[str, TrainingKind] = {k.kind: k for k in KINDS}
_LOWER = {k.plural: {t.lower(): t for t in k.replica_types} for k in KINDS}
