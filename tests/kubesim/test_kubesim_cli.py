"""`python -m kubesim serve` as a separate process, with the issue's example config."""

import json
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes import config as kube_config

from kubesim.testing import tfjob_manifest

REPO = Path(__file__).resolve().parents[2]
ISSUE_CONFIG = textwrap.dedent("""\
    speed: 1.0
    nodes:
      - prefix: gpu-node
        count: 4
        capacity: {cpu: "32", memory: 128Gi, nvidia.com/gpu: "8", pods: "110"}
        labels: {pool: gpu}
        taints: [{key: gpu, value: "true", effect: NoSchedule}]
    namespaces:
      - name: team-a
        quota: {requests.cpu: "64", requests.memory: 256Gi, requests.nvidia.com/gpu: "16"}
    users:
      - token: jobdash-token
        username: system:serviceaccount:jobdash:jobdash
        groups: [system:serviceaccounts]
      - token: katib-token
        username: system:serviceaccount:kubeflow:katib-controller
        groups: [system:serviceaccounts]
    kubelet: {start_delay_seconds: 0.1}
    workload: {default_duration_seconds: 0.2}
""")


@pytest.fixture
def served(tmp_path):
    config_path, kubeconfig = tmp_path / "kubesim.yaml", tmp_path / "out" / "kubeconfig"
    config_path.write_text(ISSUE_CONFIG)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesim",
            "serve",
            "--config",
            str(config_path),
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    assert line.startswith("kubesim serving http://127.0.0.1:"), process.stderr.read()
    yield process, kubeconfig, line.split()[2]
    if process.poll() is None:
        process.kill()
        process.wait(10)


def test_serve_writes_a_kubeconfig_the_client_loads(served):
    process, kubeconfig, url = served
    api_client = kube_config.new_client_from_config(config_file=str(kubeconfig))
    assert api_client.configuration.host == url
    core = client.CoreV1Api(api_client)
    nodes = core.list_node().items
    assert sorted(n.metadata.name for n in nodes) == [f"gpu-node-{i}" for i in range(4)]
    assert all(n.spec.taints[0].effect == "NoSchedule" and n.metadata.labels["pool"] == "gpu" for n in nodes)
    quota = core.list_namespaced_resource_quota("team-a").items[0]
    assert quota.status.hard == {"requests.cpu": "64", "requests.memory": "256Gi", "requests.nvidia.com/gpu": "16"}
    katib = kube_config.new_client_from_config(
        config_file=str(kubeconfig), context="system:serviceaccount:kubeflow:katib-controller"
    )
    assert client.CoreV1Api(katib).list_namespace().items
    api_client.close()
    katib.close()


def test_real_time_cluster_runs_a_job_to_completion(served):
    _, kubeconfig, _ = served
    api_client = kube_config.new_client_from_config(config_file=str(kubeconfig))
    custom = client.CustomObjectsApi(api_client)
    toleration = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    custom.create_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        "team-a",
        "tfjobs",
        tfjob_manifest("rt", "team-a", workers=2, gpu=1, tolerations=toleration),
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        job = custom.get_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", "rt")
        if any(c["type"] == "Succeeded" for c in job.get("status", {}).get("conditions", [])):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the job did not finish: {job.get('status')}")
    phases = {p.status.phase for p in client.CoreV1Api(api_client).list_namespaced_pod("team-a").items}
    assert phases == {"Succeeded"}
    api_client.close()


def control(url, path, body=None, method="POST"):
    request = urllib.request.Request(
        url + path, data=json.dumps(body or {}).encode(), method=method, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as reply:
        return json.loads(reply.read())


def test_control_endpoints_inject_faults_and_show_the_audit(served):
    _, kubeconfig, url = served
    api_client = kube_config.new_client_from_config(config_file=str(kubeconfig))
    custom = client.CustomObjectsApi(api_client)
    control(url, "/kubesim/faults", {"verbs": ["create"], "resources": ["tfjobs"], "status": 429, "times": 1})
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(
            "kubeflow.org", "v1", "team-a", "tfjobs", tfjob_manifest("f", "team-a", suspend=True)
        )
    assert caught.value.status == 429 and caught.value.headers["Retry-After"] == "1"
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", "team-a", "tfjobs", tfjob_manifest("f", "team-a", suspend=True)
    )
    audit = json.loads(urllib.request.urlopen(url + "/kubesim/audit", timeout=5).read())["items"]
    assert [(a["name"], a["outcome"], a["user"]) for a in audit] == [
        ("f", "Created", "system:serviceaccount:jobdash:jobdash")
    ]
    assert control(url, "/kubesim/faults", method="DELETE") == {"rules": 0}
    api_client.close()


def test_sigterm_stops_the_server(served):
    process, _, _ = served
    process.send_signal(signal.SIGTERM)
    assert process.wait(10) == 0


def test_bad_config_is_refused_with_a_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("speed: 1\nnodez: []\n")
    result = subprocess.run(
        [sys.executable, "-m", "kubesim", "serve", "--config", str(bad), "--port", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "bad config" in result.stderr and "nodez" in result.stderr
