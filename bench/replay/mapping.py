"""A trace row -> a TFJob, and the cluster it runs on (the convention of ../shared/traces/README.md).

- namespace = the VC id; its ResourceQuota ``requests.nvidia.com/gpu`` = VC nodes x 8;
- the cluster = every VC's nodes together (352), each 8 GPUs, 96 CPUs, 768 GiB;
- a job of g GPUs = ceil(g / 8) Worker replicas, each asking min(g, 8) GPUs and
  12 CPUs and 96 GiB per GPU; kubesim runs it ``duration`` seconds once all its pods run
  (the ``kubesim.io/duration-seconds`` annotation);
- topology (issue #31; the trace has none, so it is made up the way ``make run``'s cluster
  is, jobdash/embedded/embedded_cluster.yaml): racks of ``RACK_NODES`` nodes in node order
  (``topology.jobdash.io/rack``), blocks of ``BLOCK_RACKS`` racks
  (``topology.jobdash.io/block``); the snapshot's levels are ``TOPOLOGY_LEVELS``, the
  dispatcher's default (JOBDASH_TOPOLOGY_LEVELS). Jobs carry no topology annotation.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from kubesim.kubeflow import CHECKPOINT_ANNOTATION
from queueing import CHECKPOINTS_ANNOTATION, Workload, workload_from_manifest
from queueing.checkpoint_names import CHECKPOINT_EVERY
from queueing.clusters import CLUSTER_LABEL

GPUS_PER_NODE = 8
CPUS_PER_GPU = 12
GIB_PER_GPU = 96
GI = 2**30
GPU = "nvidia.com/gpu"
QUOTA_KEY = "requests.nvidia.com/gpu"
DURATION_ANNOTATION = "kubesim.io/duration-seconds"
HOSTNAME = "kubernetes.io/hostname"
RACK = "topology.jobdash.io/rack"
BLOCK = "topology.jobdash.io/block"
TOPOLOGY_LEVELS = (BLOCK, RACK, HOSTNAME)
RACK_NODES = 8
BLOCK_RACKS = 4


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


def checkpoint_seconds(seconds: float) -> dict[str, str]:
    """kubesim's annotation of a job that checkpoints every ``seconds`` of its run (0: never):
    set explicitly, kubesim also reports each checkpoint on the job's object (issue 48)."""
    return {CHECKPOINT_ANNOTATION: f"{seconds:g}"}


def declared_checkpoints(every_s: float) -> dict[str, str]:
    """What a job that checkpoints every ``every_s`` tells jobdash (issue 48): its interval
    (``jobdash.io/checkpoint-every``) and, for lent nodes, that a reclaim costs it nothing
    (``jobdash.io/checkpoints: "true"``: it writes one within the notice and leaves then)."""
    return {CHECKPOINT_EVERY: f"{every_s:g}s", CHECKPOINTS_ANNOTATION: "true"}


def _metadata(job_id: int, namespace: str, duration: float | None, annotations: dict[str, str] | None) -> dict:
    metadata: dict[str, Any] = {"name": job_name(job_id), "namespace": namespace}
    said = dict(annotations or {})
    if duration is not None:
        said[DURATION_ANNOTATION] = repr(float(duration))
    if said:
        metadata["annotations"] = said
    return metadata


def tfjob_manifest(
    job_id: int, namespace: str, gpus: int, duration: float | None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """The TFJob a user of VC ``namespace`` would submit for this trace row (``annotations``
    besides kubesim's duration: its checkpoints, issue 48)."""
    workers, per_pod = pods_of(gpus)
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "tensorflow", "image": "philly/replay:1", "resources": pod_resources(per_pod)}]
    }
    metadata = _metadata(job_id, namespace, duration, annotations)
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


def elastic_minimum(gpus: int) -> int:
    """An elastic job's minimum Workers: half of them (at least one)."""
    return max(1, gpus // 2)


def pytorchjob_manifest(
    job_id: int,
    namespace: str,
    gpus: int,
    duration: float | None,
    workers: int | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The elastic PyTorchJob a user of VC ``namespace`` would write for this trace row (issue
    35): ``gpus`` Workers of 1 GPU, elasticPolicy minReplicas half of them (at least 1),
    maxReplicas all; ``workers``: the replicas it is sent with (a partial admission's)."""
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "pytorch", "image": "philly/replay:1", "resources": pod_resources(1)}]
    }
    metadata = _metadata(job_id, namespace, duration, annotations)
    worker = {
        "replicas": gpus if workers is None else workers,
        "restartPolicy": "Never",
        "template": {"spec": pod_spec},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": metadata,
        "spec": {
            "elasticPolicy": {"minReplicas": elastic_minimum(gpus), "maxReplicas": gpus},
            "pytorchReplicaSpecs": {"Worker": worker},
        },
    }


@cache
def elastic_workload_of(gpus: int, checkpoint_every_s: float | None = None) -> Workload:
    """The Workload of the elastic PyTorchJob of ``gpus`` GPUs (one per job size, and per
    checkpoint interval declared: ``declared_checkpoints``)."""
    said = declared_checkpoints(checkpoint_every_s) if checkpoint_every_s is not None else None
    return workload_from_manifest(pytorchjob_manifest(0, "shape", gpus, None, annotations=said))


@cache
def workload_of(gpus: int, checkpoint_every_s: float | None = None) -> Workload:
    """The Workload the queueing adapter builds from such a manifest; one per job size (and
    checkpoint interval declared), shared by every job of that size (as a dispatcher
    interning parsed manifests would)."""
    said = declared_checkpoints(checkpoint_every_s) if checkpoint_every_s is not None else None
    return workload_from_manifest(tfjob_manifest(0, "shape", gpus, None, annotations=said))


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
    clusters: int = 0,
) -> dict[str, Any]:
    """kubesim's config: sum(VC nodes) nodes in racks and blocks, one namespace per VC with its
    quota (VC nodes x 8 GPUs, or ``quota_gpus[vc]``: elastic quota makes it the whole cluster);
    with ``clusters`` (0: not split, no label) each node labelled with its cluster (``cluster_of_racks``)."""
    total = sum(vc_nodes.values())
    names = cluster_of_racks(total, clusters) if clusters else None
    capacity = {
        "cpu": str(CPUS_PER_GPU * GPUS_PER_NODE),
        "memory": f"{GIB_PER_GPU * GPUS_PER_NODE}Gi",
        GPU: str(GPUS_PER_NODE),
        "pods": "110",
    }
    quota = quota_gpus if quota_gpus is not None else {vc: nodes * GPUS_PER_NODE for vc, nodes in vc_nodes.items()}
    return {
        "clock": "manual",
        "start_time": start_time,
        # One group per node (named node-0, node-1, ...), each with its rack and block.
        "nodes": [
            {
                "name": f"node-{i}",
                "count": 1,
                "capacity": capacity,
                "labels": topology_labels(i) if names is None else {**topology_labels(i), CLUSTER_LABEL: names[i]},
            }
            for i in range(total)
        ],
        "namespaces": [{"name": vc, "quota": {QUOTA_KEY: str(quota[vc])}} for vc in sorted(vc_nodes)],
        "kubelet": {"start_delay_seconds": start_delay_s},
        "operator": {"backoff_seconds": 1.0, "max_backoff_seconds": operator_max_backoff_s},
        # A suspended (preempted) job keeps its work up to the last checkpoint.
        "workload": {"default_checkpoint_seconds": checkpoint_s},
        # Nobody watches: keep the per-resource event log short.
        "watch": {"history": 256},
    }


def topology_labels(number: int) -> dict[str, str]:
    """The rack and block labels of the node numbered ``number`` (racks of ``RACK_NODES``)."""
    rack = number // RACK_NODES
    return {RACK: f"rack-{rack:02d}", BLOCK: f"block-{rack // BLOCK_RACKS:02d}"}


def cluster_of_racks(nodes: int, clusters: int) -> list[str]:
    """Each node's cluster (``c0`` .. ``c{clusters-1}``), racks kept whole (issue 49,
    ``--clusters``): the racks in node order, contiguous, each to the cluster in whose equal
    share of the GPUs its middle lies (cluster ``floor(clusters x (GPUs before the rack + half
    the rack's) / all GPUs)``), so each cluster is a run of whole racks. Racks being equal here
    (8 nodes of 8 GPUs), 44 racks make 2 clusters of 22 (176 nodes each; block 05 split
    between them) or 3 of 15, 14 and 15; a block is split only where a cluster's share ends."""
    racks = math.ceil(nodes / RACK_NODES)
    if not 1 <= clusters <= racks:
        raise ValueError(f"{clusters} clusters of whole racks need 1..{racks} of them ({nodes} nodes)")
    names = []
    for number in range(nodes):
        rack = number // RACK_NODES
        first, size = rack * RACK_NODES, min(RACK_NODES, nodes - rack * RACK_NODES)
        middle = (first + size / 2) / nodes  # (every node has the same GPUs: nodes count for them)
        names.append(f"c{min(clusters - 1, int(clusters * middle))}")
    return names
