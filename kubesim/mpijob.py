"""MPIJob semantics of the MPI operator (``kubeflow.org/v2beta1``, mpi-operator v0.5+), as pure functions.

The operator creates worker pods ``<job>-worker-<i>`` itself and the launcher as a batch
Job ``<job>-launcher`` (whose pod the Job controller names ``<job>-launcher-<5 chars>``);
the launcher Job's outcome decides the MPIJob's. Pods are labelled
``training.kubeflow.org/job-name``, ``training.kubeflow.org/job-role`` (launcher|worker),
``training.kubeflow.org/operator-name: mpi-operator`` and, on workers,
``training.kubeflow.org/replica-index``.

Validation: the CRD's schema is served as 422 (structure, enums); the operator's own
``ValidateMPIJob`` runs in the controller, which then only records a ValidationError event.
"""

from __future__ import annotations

import copy

from .jsoncodec import clone
from .kubeflow import JOB_NAME_LABEL, JOB_ROLE_LABEL, OPERATOR_NAME_LABEL, REPLICA_INDEX_LABEL
from .ownerref import controller_reference
from .validation import DNS1035_MESSAGE, cause, dns1035_label, not_supported, required, validate_pod_spec

GROUP, VERSION, KIND = "kubeflow.org", "v2beta1", "MPIJob"
API_VERSION = f"{GROUP}/{VERSION}"
OPERATOR_NAME = "mpi-operator"
CONTROLLER_NAME = "kubeflow.org/mpi-operator"  # runPolicy.managedBy of jobs this operator reconciles
IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
CLEAN_POD_POLICIES = ("None", "Running", "All")
RESTART_POLICIES = ("Never", "OnFailure")


def launcher_name(job: dict) -> str:
    return f"{job['metadata']['name']}-launcher"


def worker_name(job: dict, index: int) -> str:
    return f"{job['metadata']['name']}-worker-{index}"


def defaulted(job: dict) -> dict:
    """SetDefaults_MPIJob on a copy: what the controller works with."""
    job = copy.deepcopy(job)
    spec = job.setdefault("spec", {})
    policy = spec.setdefault("runPolicy", {})
    if policy.get("cleanPodPolicy") is None:
        policy["cleanPodPolicy"] = "None"
    if spec.get("slotsPerWorker") is None:
        spec["slotsPerWorker"] = 1
    spec.setdefault("sshAuthMountPath", "/root/.ssh")
    spec.setdefault("mpiImplementation", "OpenMPI")
    spec.setdefault("launcherCreationPolicy", "AtStartup")
    specs = spec.get("mpiReplicaSpecs") or {}
    for rtype, restart, replicas in (("Launcher", "OnFailure", 1), ("Worker", "Never", 0)):
        rspec = specs.get(rtype)
        if isinstance(rspec, dict):
            rspec.setdefault("restartPolicy", restart)
            if rspec.get("replicas") is None:
                rspec["replicas"] = replicas
    return job


def worker_replicas(job: dict) -> int:
    worker = ((job.get("spec") or {}).get("mpiReplicaSpecs") or {}).get("Worker")
    return int(worker.get("replicas") or 0) if isinstance(worker, dict) else 0


def is_suspended(job: dict) -> bool:
    return bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def managed_elsewhere(job: dict) -> bool:
    return ((job.get("spec") or {}).get("runPolicy") or {}).get("managedBy") not in (None, CONTROLLER_NAME)


def validate_schema(job: dict) -> list[dict]:
    """What the CRD's OpenAPI schema refuses at the API server (422)."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[dict] = []
    specs = spec.get("mpiReplicaSpecs")
    if not isinstance(specs, dict):
        return [required("spec.mpiReplicaSpecs")]
    for rtype, rspec in specs.items():
        where = f"spec.mpiReplicaSpecs[{rtype}]"
        if not isinstance(rspec, dict):
            causes.append(cause(where, "must be an object"))
            continue
        count = rspec.get("replicas")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            causes.append(cause(f"{where}.replicas", f"Invalid value: {count!r}: must be an integer"))
        causes.extend(validate_pod_spec(f"{where}.template.spec", (rspec.get("template") or {}).get("spec")))
    if spec.get("mpiImplementation") not in (None, *IMPLEMENTATIONS):
        causes.append(not_supported("spec.mpiImplementation", spec["mpiImplementation"], IMPLEMENTATIONS))
    policy = spec.get("runPolicy")
    if policy is not None and not isinstance(policy, dict):
        causes.append(cause("spec.runPolicy", "must be an object"))
    elif isinstance(policy, dict) and "suspend" in policy and not isinstance(policy["suspend"], bool):
        causes.append(cause("spec.runPolicy.suspend", f"Invalid value: {policy['suspend']!r}: must be a boolean"))
    return causes


def validate(job: dict) -> list[dict]:
    """validation.ValidateMPIJob on the defaulted job (the controller's check)."""
    causes: list[dict] = []
    spec = job["spec"]
    name = job["metadata"]["name"]
    longest = f"{name}-worker-{max(worker_replicas(job), 1) - 1}"
    if not dns1035_label(longest):
        causes.append(
            cause(
                "metadata.name",
                f"Invalid value: {name!r}: will not able to create pod and service with invalid DNS label {longest!r}: {DNS1035_MESSAGE}",
            )
        )
    specs = spec.get("mpiReplicaSpecs") or {}
    launcher = specs.get("Launcher")
    if not isinstance(launcher, dict):
        causes.append(required("spec.mpiReplicaSpecs[Launcher]", "Required value: must have Launcher replica spec"))
    elif launcher.get("replicas") != 1:
        causes.append(
            cause("spec.mpiReplicaSpecs[Launcher].replicas", f"Invalid value: {launcher.get('replicas')}: must be 1")
        )
    worker = specs.get("Worker")
    if isinstance(worker, dict) and (worker.get("replicas") or 0) <= 0:
        causes.append(
            cause(
                "spec.mpiReplicaSpecs[Worker].replicas",
                f"Invalid value: {worker.get('replicas')}: must be greater than or equal to 1",
            )
        )
    for rtype, rspec in specs.items():
        if isinstance(rspec, dict) and rspec.get("restartPolicy") not in RESTART_POLICIES:
            causes.append(
                not_supported(
                    f"spec.mpiReplicaSpecs[{rtype}].restartPolicy", rspec.get("restartPolicy"), RESTART_POLICIES
                )
            )
    policy = spec["runPolicy"]
    if policy.get("cleanPodPolicy") not in CLEAN_POD_POLICIES:
        causes.append(not_supported("spec.runPolicy.cleanPodPolicy", policy.get("cleanPodPolicy"), CLEAN_POD_POLICIES))
    return causes


def _labels(job: dict, role: str) -> dict[str, str]:
    return {OPERATOR_NAME_LABEL: OPERATOR_NAME, JOB_NAME_LABEL: job["metadata"]["name"], JOB_ROLE_LABEL: role}


def _restart(spec: dict) -> str:
    return "Never" if spec.get("restartPolicy") == "ExitCode" else spec.get("restartPolicy", "Never")


def build_worker(job: dict, index: int) -> dict:
    """newWorker: the template + labels, hostname and the job's Service as subdomain."""
    spec = job["spec"]["mpiReplicaSpecs"]["Worker"]
    template = clone(spec.get("template") or {})
    meta = template.get("metadata") or {}
    labels = {**(meta.get("labels") or {}), **_labels(job, "worker"), REPLICA_INDEX_LABEL: str(index)}
    pod_spec = template.get("spec") or {}
    pod_spec["hostname"] = worker_name(job, index)
    pod_spec["subdomain"] = job["metadata"]["name"]
    pod_spec["restartPolicy"] = _restart(spec)
    pod_meta: dict = {
        "name": worker_name(job, index),
        "namespace": job["metadata"]["namespace"],
        "labels": labels,
        "ownerReferences": [controller_reference(API_VERSION, KIND, job)],
    }
    if meta.get("annotations"):
        pod_meta["annotations"] = dict(meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def launcher_template(job: dict) -> dict:
    """newLauncherPodTemplate: the launcher's pod template (labels, hostname, restart policy)."""
    spec = job["spec"]["mpiReplicaSpecs"]["Launcher"]
    template = clone(spec.get("template") or {})
    meta = template.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **_labels(job, "launcher")}
    pod_spec = template.setdefault("spec", {})
    pod_spec["hostname"] = launcher_name(job)
    pod_spec["subdomain"] = job["metadata"]["name"]
    pod_spec["restartPolicy"] = _restart(spec)
    return template


def build_launcher_job(job: dict) -> dict:
    """newLauncherJob: a batch Job ``<job>-launcher`` owned by the MPIJob."""
    policy = job["spec"]["runPolicy"]
    job_spec: dict = {"template": launcher_template(job), "podReplacementPolicy": "Failed"}
    for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        if policy.get(key) is not None:
            job_spec[key] = policy[key]
    if is_suspended(job):
        job_spec["suspend"] = True
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": launcher_name(job),
            "namespace": job["metadata"]["namespace"],
            "labels": {"app": job["metadata"]["name"]},
            "ownerReferences": [controller_reference(API_VERSION, KIND, job)],
        },
        "spec": job_spec,
    }
