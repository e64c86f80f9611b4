"""Loading the kubesim config and what a cluster starts with."""

import pytest

from kubesim.cluster import Cluster
from kubesim.config import from_dict, kubeconfig, load, node_objects
from kubesim.resources import MUTATING, NODES


def test_the_issue_example_loads(tmp_path):
    path = tmp_path / "kubesim.yaml"
    path.write_text(
        "speed: 1.0\n"
        "nodes:\n"
        "  - prefix: gpu-node\n"
        "    count: 4\n"
        '    capacity: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "8", pods: "110"}\n'
        "    labels: {pool: gpu}\n"
        '    taints: [{key: gpu, value: "true", effect: NoSchedule}]\n'
        "namespaces:\n"
        "  - name: team-a\n"
        '    quota: {requests.cpu: "64", requests.memory: 256Gi, requests.nvidia.com/gpu: "16"}\n'
        "users:\n"
        "  - token: jobdash-token\n"
        "    username: system:serviceaccount:jobdash:jobdash\n"
        "    groups: [system:serviceaccounts]\n"
    )
    config = load(path)
    assert config.speed == 1.0 and config.users[0]["groups"] == ["system:serviceaccounts"]
    nodes = node_objects(config.nodes[0])
    assert [n["metadata"]["name"] for n in nodes] == ["gpu-node-0", "gpu-node-1", "gpu-node-2", "gpu-node-3"]
    assert nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert nodes[0]["spec"]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"nodez": []}, "nodez"),
        ({"speed": 0}, "speed"),
        ({"nodes": [{"prefix": "n"}]}, "capacity"),
        ({"users": [{"token": "t"}]}, "username"),
        ({"kubelet": {"delay": 1}}, "delay"),
        ({"clock": "sundial"}, "clock"),
        ({"scheduler": {"scoring": "Random"}}, "scoring must be one of"),
        ({"scheduler": {"strategy": "MostAllocated"}}, "strategy"),
    ],
)
def test_bad_configs_say_what_is_wrong(bad, message):
    with pytest.raises(ValueError, match=message):
        from_dict(bad)


def test_objects_are_created_at_start_and_the_clock_can_be_manual():
    hook = {
        "name": "tfjobs.jobdash.example.com",
        "clientConfig": {"url": "http://127.0.0.1:8000/webhooks/admission/tfjobs"},
        "rules": [
            {"operations": ["CREATE"], "apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "resources": ["tfjobs"]}
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    cluster = Cluster(
        {
            "clock": "manual",
            "start_time": 1_800_000_000,
            "nodes": [{"name": "solo", "capacity": {"cpu": "4", "memory": "8Gi"}}],
            "objects": [
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "MutatingWebhookConfiguration",
                    "metadata": {"name": "jobdash"},
                    "webhooks": [hook],
                }
            ],
        }
    )
    assert cluster.clock.manual and cluster.clock.now() == 1_800_000_000
    assert [n["metadata"]["name"] for n in cluster.store.items(NODES)] == ["solo"]
    assert cluster.store.get(MUTATING, "", "jobdash")["webhooks"][0]["failurePolicy"] == "Fail"
    cluster.advance(10)
    assert cluster.clock.now() == 1_800_000_010


def test_kubeconfig_has_a_context_per_user():
    users = [{"token": "a", "username": "system:serviceaccount:jobdash:jobdash"}, {"token": "b", "username": "bob"}]
    data = kubeconfig("http://127.0.0.1:1234", users, current="bob")
    assert data["current-context"] == "bob"
    assert [c["name"] for c in data["contexts"]] == ["system:serviceaccount:jobdash:jobdash", "bob"]
    assert data["users"][1] == {"name": "bob", "user": {"token": "b"}}
