"""A trace row -> a TFJob, and the cluster it runs on (the convention of ../shared/traces/README.md).

- namespace = the VC id; its ResourceQuota ``requests.nvidia.com/gpu`` = VC nodes x 8;
- the cluster = every VC's nodes together (352), each 8 GPUs, 96 CPUs, 768 GiB;
- a job of g GPUs = ceil(g / 8) Worker replicas, each asking min(g, 8) GPUs and
  12 CPUs and 96 GiB per GPU; kubesim runs it ``duration`` seconds once all its pods run
  (the ``kubesim.io/duration-seconds`` annotation).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from queueing import Workload, workload_from_manifest

GPUS_PER_NODE = 8
CPUS_PER_GPU = 12
GIB_PER_GPU = 96
GI = 2**30
GPU = "nvidia.com/gpu"
QUOTA_KEY = "requests.nvidia.com/gpu"
DURATION_ANNOTATION = "kubesim.io/duration-seconds"


def pods_of(gpus: int) -> tuple[int, int]:
    """(Worker replicas, GPUs per Worker) for a job of ``gpus`` GPUs."""
    return math.ceil(gpus / GPUS_PER_NODE), min(gpus, GPUS_PER_NODE)


def job_name(job_id: int) -> str:
    return f"job-{job_id}"


def job_id_of(name: str) -> int | None:
    if name.startswith("job-"):
        try:
            return int(name[4:])
        except ValueError:
            return None
    return None


def pod_resources(per_pod_gpus: int) -> dict[str, dict[str, str]]:
    return {
        "requests": {
            "cpu": str(CPUS_PER_GPU * per_pod_gpus),
            "memory": f"{GIB_PER_GPU * per_pod_gpus}Gi",
            GPU: str(per_pod_gpus),
        },
        "limits": {GPU: str(per_pod_gpus)},
    }


def tfjob_manifest(
    job_id: int, namespace: str, gpus: int, duration: float | None, nodes: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """The TFJob a user of VC ``namespace`` would submit for this trace row.

    ``nodes`` (an experiment, not what jobdash does today): restrict the Workers to these
    nodes with a required node affinity on ``kubernetes.io/hostname``."""
    workers, per_pod = pods_of(gpus)
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "tensorflow", "image": "philly/replay:1", "resources": pod_resources(per_pod)}]
    }
    if nodes:
        pod_spec["affinity"] = node_affinity(nodes)
    metadata: dict[str, Any] = {"name": job_name(job_id), "namespace": namespace}
    if duration is not None:
        metadata["annotations"] = {DURATION_ANNOTATION: repr(float(duration))}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": metadata,
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {"replicas": workers, "restartPolicy": "Never", "template": {"spec": pod_spec}}
            }
        },
    }


def node_affinity(nodes: tuple[str, ...]) -> dict[str, Any]:
    """Pods restricted to these nodes (a required node affinity on ``kubernetes.io/hostname``)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(set(nodes))}
                        ]
                    }
                ]
            }
        }
    }


@cache
def workload_of(gpus: int) -> Workload:
    """The Workload the queueing adapter builds from such a manifest; one per job size,
    shared by every job of that size (as a dispatcher interning parsed manifests would)."""
    return workload_from_manifest(tfjob_manifest(0, "shape", gpus, None))


def per_pod_requests(gpus: int) -> dict[str, int]:
    """Node-allocatable amounts one Worker takes (``pods`` included), canonical units."""
    _, per_pod = pods_of(gpus)
    return {"cpu": CPUS_PER_GPU * per_pod * 1000, "memory": GIB_PER_GPU * per_pod * GI, GPU: per_pod, "pods": 1}


def cluster_config(
    vc_nodes: dict[str, int],
    start_time: float,
    *,
    start_delay_s: float = 1.0,
    operator_max_backoff_s: float = 30.0,
    quota_gpus: dict[str, int] | None = None,
    checkpoint_s: float = 1800.0,
) -> dict[str, Any]:
    """kubesim's config: one node group of sum(VC nodes) nodes, one namespace per VC with its
    quota (VC nodes x 8 GPUs, or ``quota_gpus[vc]``: elastic quota makes it the whole cluster)."""
    total = sum(vc_nodes.values())
    quota = quota_gpus if quota_gpus is not None else {vc: nodes * GPUS_PER_NODE for vc, nodes in vc_nodes.items()}
    return {
        "clock": "manual",
        "start_time": start_time,
        "nodes": [
            {
                "prefix": "node",
                "count": total,
                "capacity": {
                    "cpu": str(CPUS_PER_GPU * GPUS_PER_NODE),
                    "memory": f"{GIB_PER_GPU * GPUS_PER_NODE}Gi",
                    GPU: str(GPUS_PER_NODE),
                    "pods": "110",
                },
            }
        ],
        "namespaces": [{"name": vc, "quota": {QUOTA_KEY: str(quota[vc])}} for vc in sorted(vc_nodes)],
        "kubelet": {"start_delay_seconds": start_delay_s},
        "operator": {"backoff_seconds": 1.0, "max_backoff_seconds": operator_max_backoff_s},
        # A suspended (preempted) job keeps its work up to the last checkpoint.
        "workload": {"default_checkpoint_seconds": checkpoint_s},
        # Nobody watches: keep the per-resource event log short.
        "watch": {"history": 256},
    }
