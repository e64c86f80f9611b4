"""Node failure, recovery, cordon, drain and deletion: the node lifecycle controller's taints,
the taint manager's evictions, PodGC, the Eviction API, and the job controllers' reactions."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from kubesim.testing import batch_job_manifest, jobset_manifest, mpijob_manifest, running_kubesim, tfjob_manifest
from tests.kubesim.conftest import BASE_CONFIG, JOBDASH

CONFIG = {
    **BASE_CONFIG,
    "nodes": [{"prefix": "node", "count": 3, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
    "namespaces": [{"name": "team-a"}],
    "workload": {"default_duration_seconds": 36000},
}


@pytest.fixture
def config():
    return CONFIG


def pod(name: str, node: str, **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            "nodeSelector": {"kubernetes.io/hostname": node},
            **spec,
        },
    }


def taints(core: client.CoreV1Api, node: str) -> list[tuple[str, str]]:
    return [(t.key, t.effect) for t in core.read_node(node).spec.taints or []]


def pods_on(sim, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in sim.cluster.pods() if p["spec"].get("nodeName") == node)


def test_an_unreachable_node_is_tainted_and_its_pods_evicted_after_their_toleration(sim, core):
    core.create_namespaced_pod("team-a", pod("default", "node-0"))
    quick = {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    }
    core.create_namespaced_pod("team-a", pod("quick", "node-0", tolerations=[quick]))
    now = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}
    core.create_namespaced_pod("team-a", pod("now", "node-0", tolerations=[now]))
    ever = {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}
    core.create_namespaced_pod("team-a", pod("ever", "node-0", tolerations=[ever]))
    sim.advance(5)
    assert pods_on(sim, "node-0") == ["default", "ever", "now", "quick"]
    sim.fail_node("node-0")
    sim.settle()
    node = core.read_node("node-0")
    assert {(c.type, c.status, c.reason) for c in node.status.conditions} == {
        (t, "Unknown", "NodeStatusUnknown") for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    }
    assert sorted(taints(core, "node-0")) == [
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
    ]
    assert all(t.time_added is not None for t in node.spec.taints)
    assert pods_on(sim, "node-0") == ["default", "ever", "quick"]  # tolerationSeconds 0: at once
    ready = [c for c in core.read_namespaced_pod("default", "team-a").status.conditions if c.type == "Ready"]
    assert ready[0].status == "False"  # MarkPodsNotReady
    sim.advance(29)
    assert pods_on(sim, "node-0") == ["default", "ever", "quick"]
    sim.advance(2)
    assert pods_on(sim, "node-0") == ["default", "ever"]
    sim.advance(300)
    assert pods_on(sim, "node-0") == ["ever"]
    # No new pod goes there.
    core.create_namespaced_pod("team-a", pod("late", "node-0"))
    sim.settle()
    message = core.read_namespaced_pod("late", "team-a").status.conditions[0].message
    assert "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }" in message


def test_a_recovered_node_loses_its_taints_and_pending_evictions(sim, core):
    core.create_namespaced_pod("team-a", pod("stays", "node-1"))
    sim.advance(5)
    sim.fail_node("node-1", status="False")
    sim.settle()
    assert sorted(taints(core, "node-1")) == [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/not-ready", "NoSchedule"),
    ]
    ready = [c for c in core.read_node("node-1").status.conditions if c.type == "Ready"][0]
    assert (ready.status, ready.reason) == ("False", "KubeletNotReady")
    sim.advance(200)
    sim.recover_node("node-1")
    sim.advance(200)
    assert taints(core, "node-1") == []
    assert pods_on(sim, "node-1") == ["stays"]
    ready = [c for c in core.read_node("node-1").status.conditions if c.type == "Ready"][0]
    assert (ready.status, ready.reason) == ("True", "KubeletReady")


def test_node_changes_are_seen_through_a_watch(sim, core):
    rv = core.list_node().metadata.resource_version
    sim.fail_node("node-2")
    sim.settle()
    seen = []
    for event in watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=1):
        node = event["object"]
        if node.metadata.name == "node-2":
            seen.append(
                (
                    [c.status for c in node.status.conditions if c.type == "Ready"],
                    [t.key for t in node.spec.taints or []],
                )
            )
    assert seen[0] == (["Unknown"], [])
    assert seen[-1] == (["Unknown"], ["node.kubernetes.io/unreachable", "node.kubernetes.io/unreachable"])


def test_cordon_taints_the_node_and_keeps_new_pods_away_until_uncordoned(sim, core):
    sim.cordon("node-0")
    sim.settle()
    node = core.read_node("node-0")
    assert node.spec.unschedulable is True
    assert taints(core, "node-0") == [("node.kubernetes.io/unschedulable", "NoSchedule")]
    core.create_namespaced_pod("team-a", pod("waits", "node-0"))
    sim.settle()
    assert "1 node(s) were unschedulable" in core.read_namespaced_pod("waits", "team-a").status.conditions[0].message
    sim.uncordon("node-0")
    sim.settle()
    assert taints(core, "node-0") == []
    assert core.read_namespaced_pod("waits", "team-a").spec.node_name == "node-0"


def test_the_eviction_api_deletes_the_pod_with_a_disruption_condition(sim, core):
    core.create_namespaced_pod("team-a", pod("victim", "node-0"))
    sim.advance(5)
    rv = core.list_namespaced_pod("team-a").metadata.resource_version
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="victim", namespace="team-a"))
    core.create_namespaced_pod_eviction("victim", "team-a", body)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("victim", "team-a")
    assert exc.value.status == 404
    deleted = [
        e["object"]
        for e in watch.Watch().stream(core.list_namespaced_pod, "team-a", resource_version=rv, timeout_seconds=1)
        if e["type"] == "DELETED"
    ]
    condition = [c for c in deleted[0].status.conditions if c.type == "DisruptionTarget"][0]
    assert (condition.reason, condition.message) == ("EvictionByEvictionAPI", "Eviction API: evicting")
    wrong = client.V1Eviction(metadata=client.V1ObjectMeta(name="other", namespace="team-a"))
    core.create_namespaced_pod("team-a", pod("other2", "node-0"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod_eviction("other2", "team-a", wrong)
    assert (exc.value.status, json.loads(exc.value.body)["message"]) == (
        400,
        "name in URL does not match name in Eviction object",
    )


def test_a_training_job_on_a_failed_node_gets_its_pods_back_elsewhere(sim, custom, core):
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", "team-a", "tfjobs", tfjob_manifest("tf", "team-a", workers=2, cpu="6", memory="1Gi")
    )
    sim.advance(5)
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in sim.cluster.pods("team-a")}
    assert sorted(placed) == ["tf-worker-0", "tf-worker-1"]
    failed = placed["tf-worker-0"]
    old_uid = core.read_namespaced_pod("tf-worker-0", "team-a").metadata.uid
    sim.fail_node(failed)
    sim.advance(299)
    assert core.read_namespaced_pod("tf-worker-0", "team-a").metadata.uid == old_uid
    sim.advance(10)
    back = core.read_namespaced_pod("tf-worker-0", "team-a")
    assert back.metadata.uid != old_uid
    assert back.spec.node_name not in (None, failed) and back.status.phase == "Running"


def test_a_batch_job_counts_an_evicted_pod_as_failed_and_replaces_it(sim, custom):
    job = batch_job_manifest("bj", "team-a", parallelism=2, completions=2, cpu="6", memory="1Gi")
    sim.cluster.create(job)
    sim.advance(5)
    node = sim.cluster.pods("team-a")[0]["spec"]["nodeName"]
    sim.drain(node)
    sim.advance(30)
    status = sim.cluster.job("jobs.batch", "team-a", "bj")["status"]
    assert status["failed"] == 1 and status["active"] == 2
    nodes = {p["spec"]["nodeName"] for p in sim.cluster.pods("team-a") if p["status"]["phase"] == "Running"}
    assert node not in nodes and len(nodes) == 2


def test_jobset_and_mpijob_pods_come_back_after_a_drain(sim):
    sim.cluster.create(jobset_manifest("js", "team-a", jobs=1, workers=2, cpu="3", memory="1Gi"))
    sim.cluster.create(mpijob_manifest("mpi", "team-a", workers=2, cpu="1", memory="1Gi"))
    sim.advance(10)
    before = {p["metadata"]["uid"] for p in sim.cluster.pods("team-a")}
    nodes = {p["spec"]["nodeName"] for p in sim.cluster.pods("team-a")}
    drained = sorted(nodes)[0]
    evicted = sim.drain(drained)
    assert evicted
    sim.advance(60)
    pods = sim.cluster.pods("team-a")
    assert all(p["spec"].get("nodeName") != drained for p in pods)
    assert len(sim.cluster.pods_of("JobSet", "team-a", "js")) == 2
    assert len([p for p in sim.cluster.pods_of("MPIJob", "team-a", "mpi") if "worker" in p["metadata"]["name"]]) == 2
    assert before - {p["metadata"]["uid"] for p in pods}  # some were replaced
    assert all(p["status"]["phase"] == "Running" for p in pods)


def test_pods_of_a_deleted_node_are_collected_after_the_quarantine(sim, core):
    core.create_namespaced_pod("team-a", pod("orphan", "node-2"))
    sim.advance(5)
    sim.delete_node("node-2")
    sim.advance(39)
    assert core.read_namespaced_pod("orphan", "team-a").spec.node_name == "node-2"
    sim.advance(2)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("orphan", "team-a")
    assert exc.value.status == 404


def test_thin_helpers_refuse_nonsense():
    with running_kubesim(CONFIG, manual_clock=True) as sim:
        with pytest.raises(ValueError):
            sim.fail_node("node-0", status="True")
        core = client.CoreV1Api(sim.api_client(JOBDASH))
        with pytest.raises(ApiException) as exc:
            core.create_namespaced_pod_eviction(
                "missing", "team-a", client.V1Eviction(metadata=client.V1ObjectMeta(name="missing"))
            )
        assert exc.value.status == 404


def test_no_kubelet_starts_a_pod_on_a_failed_node_and_a_recovered_one_reports_its_pods_ready(sim, core):
    ever = [{"operator": "Exists"}]  # tolerates everything: stays bound through the failure
    core.create_namespaced_pod("team-a", pod("running", "node-1", tolerations=ever))
    sim.advance(5)
    sim.fail_node("node-1")
    core.create_namespaced_pod("team-a", pod("late", "node-1", tolerations=ever))
    sim.advance(60)
    late = core.read_namespaced_pod("late", "team-a")
    assert late.spec.node_name == "node-1" and late.status.phase == "Pending"
    ready = [c.status for c in core.read_namespaced_pod("running", "team-a").status.conditions if c.type == "Ready"]
    assert ready == ["False"]
    sim.recover_node("node-1")
    sim.advance(5)
    assert core.read_namespaced_pod("late", "team-a").status.phase == "Running"
    ready = [c.status for c in core.read_namespaced_pod("running", "team-a").status.conditions if c.type == "Ready"]
    assert ready == ["True"]
