"""ResourceQuota admission and status.used, through the official client."""

import json

import pytest
from kubernetes import client

from kubesim.testing import tfjob_manifest

G, V, P = "kubeflow.org", "v1", "tfjobs"


def pod(name, cpu="2", memory="4Gi", limits=True):
    resources = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = {"cpu": cpu, "memory": memory}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": resources}]},
    }


def used(core, namespace="team-a"):
    return core.read_namespaced_resource_quota("quota", namespace).status.used


def test_status_used_tracks_pods(core, sim):
    core.create_namespaced_pod("team-a", pod("p1", cpu="2", memory="4Gi"))
    core.create_namespaced_pod("team-a", pod("p2", cpu="500m", memory="512Mi"))
    assert used(core) == {
        "requests.cpu": "2500m",
        "requests.memory": "4608Mi",
        "requests.nvidia.com/gpu": "0",
        "pods": "2",
    }
    core.delete_namespaced_pod("p1", "team-a")
    assert used(core)["requests.cpu"] == "500m" and used(core)["pods"] == "1"


def test_over_quota_pod_is_403_exceeded_quota(core):
    for i in range(6):
        core.create_namespaced_pod("team-a", pod(f"fill-{i}", cpu="2", memory="1Gi"))
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_pod("team-a", pod("one-too-many", cpu="1", memory="1Gi"))
    body = json.loads(caught.value.body)
    assert caught.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods "one-too-many" is forbidden: exceeded quota: quota, '
        "requested: requests.cpu=1, used: requests.cpu=12, limited: requests.cpu=12"
    )
    assert used(core)["requests.cpu"] == "12" and used(core)["pods"] == "6"  # the refused pod charged nothing


def test_quota_needs_requests_on_every_container(core):
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_pod("team-a", bare)
    assert caught.value.status == 403 and "must specify requests.cpu" in json.loads(caught.value.body)["message"]
    core.create_namespaced_pod("team-b", bare)  # no quota in team-b: fine


def test_limits_alone_default_the_requests(core):
    limited = pod("limited", cpu="3", memory="1Gi")
    del limited["spec"]["containers"][0]["resources"]["requests"]
    created = core.create_namespaced_pod("team-a", limited)
    assert created.spec.containers[0].resources.requests == {"cpu": "3", "memory": "1Gi"}
    assert used(core)["requests.cpu"] == "3"


def test_finished_pods_release_their_quota(custom, core, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("short", "team-a", workers=2, cpu="2", duration=10)
    )
    sim.settle()
    assert used(core)["requests.cpu"] == "4"
    sim.advance(15)  # started after 2 s, done 10 s later
    job = custom.get_namespaced_custom_object(G, V, "team-a", P, "short")
    assert [c["type"] for c in job["status"]["conditions"] if c["status"] == "True"] == ["Created", "Succeeded"]
    assert {p.status.phase for p in core.list_namespaced_pod("team-a").items} == {"Succeeded"}
    assert used(core) == {"requests.cpu": "0", "requests.memory": "0", "requests.nvidia.com/gpu": "0", "pods": "0"}


@pytest.fixture
def config(config):
    namespaces = config["namespaces"] + [
        {"name": "counted", "quota": {"count/tfjobs.kubeflow.org": "2", "count/pods": "10"}}
    ]
    return {**config, "namespaces": namespaces}


def test_tfjob_object_count_quota(custom, core):
    for name in ("one", "two"):
        custom.create_namespaced_custom_object(G, V, "counted", P, tfjob_manifest(name, "counted", suspend=True))
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "counted", P, tfjob_manifest("three", "counted", suspend=True))
    assert caught.value.status == 403 and "count/tfjobs.kubeflow.org=1" in json.loads(caught.value.body)["message"]
    assert used(core, "counted") == {"count/tfjobs.kubeflow.org": "2", "count/pods": "0"}
    custom.delete_namespaced_custom_object(G, V, "counted", P, "one")
    assert used(core, "counted")["count/tfjobs.kubeflow.org"] == "1"


def test_quota_created_later_counts_existing_pods(core, sim):
    core.create_namespaced_pod("team-b", pod("early", cpu="1"))
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "quota"},
        "spec": {"hard": {"cpu": "4", "limits.memory": "8Gi"}},
    }
    core.create_namespaced_resource_quota("team-b", quota)
    assert used(core, "team-b") == {"cpu": "1", "limits.memory": "4Gi"}
    core.patch_namespaced_resource_quota("quota", "team-b", {"spec": {"hard": {"cpu": "1"}}})
    with pytest.raises(client.ApiException) as caught:
        core.create_namespaced_pod("team-b", pod("late", cpu="100m", memory="1Mi"))
    assert caught.value.status == 403
