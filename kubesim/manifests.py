"""Manifests of every job kind kubesim runs, for tests (re-exported by ``kubesim.testing``).

All builders take the same keywords: the pod size (``cpu``, ``memory``, ``gpu``), the work
clock's ``duration``, ``checkpoint`` and ``fail`` (the ``kubesim.io/duration-seconds``,
``kubesim.io/checkpoint-seconds`` and ``kubesim.io/fail`` annotations, put on the job
itself), ``suspend``, ``labels``, ``tolerations`` and ``node_selector``; ``workers`` is the
number of worker pods where a kind has workers.
"""

from __future__ import annotations

from typing import Any

from .kubeflow import CHECKPOINT_ANNOTATION, DURATION_ANNOTATION, FAIL_ANNOTATION


def _resources(cpu: str | None, memory: str | None, gpu: int) -> dict:
    resources = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if gpu:
        resources["nvidia.com/gpu"] = str(gpu)
    return {"requests": dict(resources), "limits": dict(resources)}


def _pod_spec(container: str, image: str, cpu, memory, gpu, tolerations, node_selector) -> dict:
    spec: dict = {"containers": [{"name": container, "image": image, "resources": _resources(cpu, memory, gpu)}]}
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    return spec


def _metadata(name: str, namespace: str | None, labels, duration, fail, checkpoint=None) -> dict:
    metadata: dict = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    annotations = {}
    if duration is not None:
        annotations[DURATION_ANNOTATION] = str(duration)
    if checkpoint is not None:
        annotations[CHECKPOINT_ANNOTATION] = str(checkpoint)
    if fail:
        annotations[FAIL_ANNOTATION] = "true"
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def tfjob_manifest(
    name: str,
    namespace: str = "default",
    *,
    workers: int = 1,
    chief: bool = False,
    ps: int = 0,
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    duration: float | None = None,
    checkpoint: float | None = None,
    fail: bool = False,
    suspend: bool | None = None,
    success_policy: str | None = None,
    clean_pod_policy: str | None = None,
    restart_policy: str = "Never",
    backoff_limit: int | None = None,
    labels: dict | None = None,
    tolerations: list | None = None,
    node_selector: dict | None = None,
) -> dict:
    """A TFJob manifest for tests: ``workers`` Workers (+ a Chief, + ``ps`` PS) of the given size.

    ``duration``, ``checkpoint`` and ``fail`` become the kubesim.io annotations that drive the work clock.
    """
    resources = {"cpu": cpu, "memory": memory}
    if gpu:
        resources["nvidia.com/gpu"] = str(gpu)
    pod_spec: dict = {
        "containers": [
            {
                "name": "tensorflow",
                "image": "tensorflow/tensorflow:2.15.0",
                "resources": {"requests": dict(resources), "limits": dict(resources)},
            }
        ]
    }
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if node_selector:
        pod_spec["nodeSelector"] = node_selector

    def replica(count: int) -> dict:
        return {"replicas": count, "restartPolicy": restart_policy, "template": {"spec": pod_spec}}

    specs = {}
    if chief:
        specs["Chief"] = replica(1)
    if ps:
        specs["PS"] = replica(ps)
    if workers:
        specs["Worker"] = replica(workers)
    annotations = {}
    if duration is not None:
        annotations[DURATION_ANNOTATION] = str(duration)
    if checkpoint is not None:
        annotations[CHECKPOINT_ANNOTATION] = str(checkpoint)
    if fail:
        annotations[FAIL_ANNOTATION] = "true"
    spec: dict = {"tfReplicaSpecs": specs}
    run_policy: dict[str, object] = {}
    if suspend is not None:
        run_policy["suspend"] = suspend
    if clean_pod_policy is not None:
        run_policy["cleanPodPolicy"] = clean_pod_policy
    if backoff_limit is not None:
        run_policy["backoffLimit"] = backoff_limit
    if run_policy:
        spec["runPolicy"] = run_policy
    if success_policy is not None:
        spec["successPolicy"] = success_policy
    metadata: dict = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": metadata, "spec": spec}


_TRAINING = {  # kind -> (replica map, container, image)
    "PyTorchJob": ("pytorchReplicaSpecs", "pytorch", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"),
    "XGBoostJob": ("xgbReplicaSpecs", "xgboost", "docker.io/kubeflow/xgboost-dist-iris:latest"),
    "PaddleJob": ("paddleReplicaSpecs", "paddle", "registry.baidubce.com/paddlepaddle/paddle:2.4.0rc0-cpu"),
    "JAXJob": ("jaxReplicaSpecs", "jax", "docker.io/kubeflow/jaxjob-simple:latest"),
}


def training_job_manifest(
    kind: str,
    name: str,
    namespace: str = "default",
    *,
    replicas: dict[str, int],
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    duration: float | None = None,
    checkpoint: float | None = None,
    fail: bool = False,
    suspend: bool | None = None,
    clean_pod_policy: str | None = None,
    restart_policy: str | None = None,
    backoff_limit: int | None = None,
    managed_by: str | None = None,
    labels: dict | None = None,
    tolerations: list | None = None,
    node_selector: dict | None = None,
    spec: dict | None = None,
) -> dict:
    """A training-operator job (``kubeflow.org/v1``) of ``kind`` with ``replicas`` per type."""
    field, container, image = _TRAINING[kind]
    pod_spec = _pod_spec(container, image, cpu, memory, gpu, tolerations, node_selector)
    specs: dict[str, dict] = {}
    for rtype, count in replicas.items():
        if count:
            specs[rtype] = {"replicas": count, "template": {"spec": pod_spec}}
            if restart_policy is not None:
                specs[rtype]["restartPolicy"] = restart_policy
    run_policy: dict[str, Any] = {}
    for key, value in (
        ("suspend", suspend),
        ("cleanPodPolicy", clean_pod_policy),
        ("backoffLimit", backoff_limit),
        ("managedBy", managed_by),
    ):
        if value is not None:
            run_policy[key] = value
    body: dict = {field: specs, **(spec or {})}
    if run_policy:
        body["runPolicy"] = run_policy
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": _metadata(name, namespace, labels, duration, fail, checkpoint),
        "spec": body,
    }


def pytorchjob_manifest(
    name: str, namespace: str = "default", *, workers: int = 1, master: bool = True, elastic: dict | None = None, **kw
) -> dict:
    """A PyTorchJob: a Master (unless ``master=False``) and ``workers`` Workers; ``elastic``
    becomes ``spec.elasticPolicy``."""
    extra = {"elasticPolicy": elastic} if elastic is not None else None
    return training_job_manifest(
        "PyTorchJob", name, namespace, replicas={"Master": int(master), "Worker": workers}, spec=extra, **kw
    )


def xgboostjob_manifest(name: str, namespace: str = "default", *, workers: int = 1, **kw) -> dict:
    """An XGBoostJob: a Master and ``workers`` Workers (the webhook requires the Master)."""
    return training_job_manifest("XGBoostJob", name, namespace, replicas={"Master": 1, "Worker": workers}, **kw)


def paddlejob_manifest(name: str, namespace: str = "default", *, workers: int = 1, master: bool = False, **kw) -> dict:
    """A PaddleJob: ``workers`` Workers (and a Master with ``master=True``)."""
    return training_job_manifest(
        "PaddleJob", name, namespace, replicas={"Master": int(master), "Worker": workers}, **kw
    )


def jaxjob_manifest(name: str, namespace: str = "default", *, workers: int = 1, **kw) -> dict:
    """A JAXJob: ``workers`` Workers."""
    return training_job_manifest("JAXJob", name, namespace, replicas={"Worker": workers}, **kw)


def mpijob_manifest(
    name: str,
    namespace: str = "default",
    *,
    workers: int = 1,
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    launcher_cpu: str = "100m",
    launcher_memory: str = "128Mi",
    slots_per_worker: int = 1,
    duration: float | None = None,
    checkpoint: float | None = None,
    fail: bool = False,
    suspend: bool | None = None,
    clean_pod_policy: str | None = "Running",
    backoff_limit: int | None = None,
    launcher_restart_policy: str | None = None,
    labels: dict | None = None,
    tolerations: list | None = None,
    node_selector: dict | None = None,
) -> dict:
    """An MPIJob (``kubeflow.org/v2beta1``): a small Launcher and ``workers`` Workers.

    ``clean_pod_policy`` defaults to Running as in the operator's examples (the
    operator's own default, None, leaves the workers running after the launcher ends)."""
    image = "mpioperator/mpi-pi:openmpi"
    launcher: dict = {
        "replicas": 1,
        "template": {
            "spec": _pod_spec("launcher", image, launcher_cpu, launcher_memory, 0, tolerations, node_selector)
        },
    }
    if launcher_restart_policy is not None:
        launcher["restartPolicy"] = launcher_restart_policy
    worker = {
        "replicas": workers,
        "template": {"spec": _pod_spec("worker", image, cpu, memory, gpu, tolerations, node_selector)},
    }
    run_policy: dict[str, Any] = {}
    for key, value in (("suspend", suspend), ("cleanPodPolicy", clean_pod_policy), ("backoffLimit", backoff_limit)):
        if value is not None:
            run_policy[key] = value
    spec: dict = {"slotsPerWorker": slots_per_worker, "mpiReplicaSpecs": {"Launcher": launcher, "Worker": worker}}
    if run_policy:
        spec["runPolicy"] = run_policy
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": _metadata(name, namespace, labels, duration, fail, checkpoint),
        "spec": spec,
    }


def _job_spec(
    parallelism, completions, indexed, restart_policy, backoff_limit, cpu, memory, gpu, tolerations, node_selector,
    container="worker", image="busybox:1.36",
) -> dict:  # fmt: skip
    pod_spec = _pod_spec(container, image, cpu, memory, gpu, tolerations, node_selector)
    if restart_policy is not None:
        pod_spec["restartPolicy"] = restart_policy
    spec: dict = {"parallelism": parallelism, "template": {"spec": pod_spec}}
    if completions is not None:
        spec["completions"] = completions
    if indexed:
        spec["completionMode"] = "Indexed"
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    return spec


def batch_job_manifest(
    name: str,
    namespace: str = "default",
    *,
    parallelism: int = 1,
    completions: int | None = None,
    indexed: bool = False,
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    duration: float | None = None,
    checkpoint: float | None = None,
    fail: bool = False,
    suspend: bool | None = None,
    restart_policy: str = "Never",
    backoff_limit: int | None = None,
    labels: dict | None = None,
    tolerations: list | None = None,
    node_selector: dict | None = None,
) -> dict:
    """A batch/v1 Job of ``parallelism`` pods at a time (``completions`` unset: a work queue)."""
    spec = _job_spec(
        parallelism, completions, indexed, restart_policy, backoff_limit, cpu, memory, gpu, tolerations, node_selector
    )
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(name, namespace, labels, duration, fail, checkpoint),
        "spec": spec,
    }


def jobset_manifest(
    name: str,
    namespace: str = "default",
    *,
    workers: int = 1,
    jobs: int = 1,
    replicated_job: str = "workers",
    replicated_jobs: list[dict] | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    duration: float | None = None,
    checkpoint: float | None = None,
    fail: bool = False,
    suspend: bool | None = None,
    restart_policy: str | None = None,
    backoff_limit: int | None = None,
    max_restarts: int | None = None,
    labels: dict | None = None,
    tolerations: list | None = None,
    node_selector: dict | None = None,
) -> dict:
    """A JobSet with one replicatedJob ``replicated_job`` of ``jobs`` Jobs, each of ``workers``
    pods (parallelism = completions), or the given ``replicated_jobs``."""
    if replicated_jobs is None:
        job_spec = _job_spec(
            workers, workers, False, restart_policy, backoff_limit, cpu, memory, gpu, tolerations, node_selector
        )
        replicated_jobs = [{"name": replicated_job, "replicas": jobs, "template": {"spec": job_spec}}]
    spec: dict = {"replicatedJobs": replicated_jobs}
    if suspend is not None:
        spec["suspend"] = suspend
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _metadata(name, namespace, labels, duration, fail, checkpoint),
        "spec": spec,
    }


def training_runtime_manifest(
    name: str = "torch-distributed",
    namespace: str | None = None,
    *,
    num_nodes: int = 1,
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    backoff_limit: int | None = None,
    tolerations: list | None = None,
    node_selector: dict | None = None,
) -> dict:
    """A ClusterTrainingRuntime (a TrainingRuntime with ``namespace``) whose JobSet template has
    one replicatedJob ``node`` (the trainer: container ``node``) of ``num_nodes`` pods."""
    job_spec = _job_spec(
        num_nodes, num_nodes, False, None, backoff_limit, cpu, memory, gpu, tolerations, node_selector,
        container="node", image="pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
    )  # fmt: skip
    node = {
        "name": "node",
        "replicas": 1,
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": job_spec,
        },
    }
    metadata: dict = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime" if namespace is not None else "ClusterTrainingRuntime",
        "metadata": metadata,
        "spec": {
            "mlPolicy": {"numNodes": num_nodes, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [node]}},
        },
    }


def trainjob_manifest(
    name: str,
    namespace: str = "default",
    *,
    runtime: str = "torch-distributed",
    runtime_kind: str = "ClusterTrainingRuntime",
    num_nodes: int | None = None,
    workers: int | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    gpu: int = 0,
    duration: float | None = None,
    checkpoint: float | None = None,
    fail: bool = False,
    suspend: bool | None = None,
    labels: dict | None = None,
) -> dict:
    """A TrainJob on ``runtime``; ``num_nodes`` (or ``workers``) and the pod size, when given,
    become ``spec.trainer.numNodes`` and ``resourcesPerNode``."""
    trainer: dict = {}
    nodes = num_nodes if num_nodes is not None else workers
    if nodes is not None:
        trainer["numNodes"] = nodes
    if cpu is not None or memory is not None or gpu:
        trainer["resourcesPerNode"] = _resources(cpu, memory, gpu)
    spec: dict = {"runtimeRef": {"name": runtime, "kind": runtime_kind}}
    if trainer:
        spec["trainer"] = trainer
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": _metadata(name, namespace, labels, duration, fail, checkpoint),
        "spec": spec,
    }
