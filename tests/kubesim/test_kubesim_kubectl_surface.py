"""What kubectl needs of kubesim, through the official client and raw HTTP: HTTPS with the CA
in the kubeconfig (`serve --tls`, `running_kubesim(tls=True)`), Tables, server-side apply's
field ownership, RBAC with SelfSubjectAccessReview, field validation, OpenAPI and discovery."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes import config as kube_config

from kubesim import openapi
from kubesim.apply import from_fields_v1, to_fields_v1
from kubesim.resources import TFJOBS
from kubesim.tables import human_duration, wants_table
from kubesim.testing import running_kubesim, tfjob_manifest
from kubesim.tls import serving_certificate

REPO = Path(__file__).resolve().parents[2]
TF = ("kubeflow.org", "v1")
USERS = [
    {"token": "admin-token", "username": "admin", "groups": ["system:masters"]},
    {"token": "alice-token", "username": "alice", "groups": ["ml-team"]},
]
BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "RoleBinding",
    "metadata": {"name": "ml-team-edit", "namespace": "team-a"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
    "subjects": [{"kind": "Group", "name": "ml-team", "apiGroup": "rbac.authorization.k8s.io"}],
}


@pytest.fixture
def sim():
    config = {"users": USERS, "namespaces": [{"name": "team-a"}, {"name": "team-b"}], "rbac": True}
    job_roles = yaml.safe_load_all((REPO / "deploy/base/job-roles.yaml").read_text())
    config["objects"] = [BINDING, *job_roles]  # the job kinds in `edit`, as jobdash installs them
    with running_kubesim(config, manual_clock=True, tls=True) as running:
        yield running


def request(sim, method: str, path: str, body=None, token="admin-token", headers=None):
    import http.client
    import ssl

    context = ssl.create_default_context(cadata=sim.ca_pem.decode())
    host, port = sim.url.removeprefix("https://").split(":")
    conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, data, {"Authorization": f"Bearer {token}", **(headers or {})})
    reply = conn.getresponse()
    payload = reply.read()
    conn.close()
    return reply.status, dict(reply.getheaders()), json.loads(payload) if payload else None


def test_serve_tls_writes_the_ca_into_the_kubeconfig(tmp_path):
    config = tmp_path / "kubesim.yaml"
    config.write_text(yaml.safe_dump({"users": USERS, "namespaces": [{"name": "team-a"}]}))
    kubeconfig = tmp_path / "out" / "kubeconfig"
    process = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "serve", "--tls", "--config", str(config), "--port", "0"]
        + ["--kubeconfig-out", str(kubeconfig)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("kubesim serving https://127.0.0.1:")
        written = yaml.safe_load(kubeconfig.read_text())
        assert written["clusters"][0]["cluster"]["certificate-authority-data"]
        assert (tmp_path / "out" / "kubesim-tls" / "ca.crt").exists()
        api = client.CoreV1Api(kube_config.new_client_from_config(str(kubeconfig)))
        assert "team-a" in {ns.metadata.name for ns in api.list_namespace().items}
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_the_certificate_is_kept_while_it_is_good(tmp_path):
    first = serving_certificate(tmp_path)
    pem = first.cert.read_bytes()
    assert serving_certificate(tmp_path).cert.read_bytes() == pem  # reused
    assert serving_certificate(tmp_path, host="sim.example").cert.read_bytes() != pem  # a new name: remade
    remade = serving_certificate(tmp_path, names=("kubesim",)).cert.read_bytes()
    assert serving_certificate(tmp_path, names=("kubesim",)).cert.read_bytes() == remade


def test_tables_for_list_get_and_include_object(sim):
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    status, _, listed = request(sim, "GET", "/api/v1/namespaces", headers=accept)
    assert status == 200 and listed["kind"] == "Table" and listed["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in listed["columnDefinitions"]] == ["Name", "Status", "Age"]
    assert listed["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    _, _, one = request(sim, "GET", "/api/v1/namespaces/team-a?includeObject=Object", headers=accept)
    assert one["rows"][0]["cells"][:2] == ["team-a", "Active"] and one["rows"][0]["object"]["kind"] == "Namespace"
    _, _, plain = request(sim, "GET", "/api/v1/namespaces/team-a")
    assert plain["kind"] == "Namespace"
    assert not wants_table("application/json, application/json;as=Table;v=v1;g=meta.k8s.io")
    assert [human_duration(s) for s in (5, 125, 600, 3 * 3600 + 60, 50 * 3600)] == ["5s", "2m5s", "10m", "3h1m", "2d2h"]


def test_server_side_apply_owns_and_removes_fields(sim):
    path = "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs/owned"
    manifest = tfjob_manifest("owned", "team-a", labels={"a": "1", "b": "2"})
    apply = {"Content-Type": "application/apply-patch+yaml"}
    status, _, created = request(
        sim, "PATCH", path + "?fieldManager=ci", yaml.safe_dump(manifest).encode(), headers=apply
    )
    assert status == 201 and created["metadata"]["managedFields"][0]["manager"] == "ci"
    del manifest["metadata"]["labels"]["b"]  # no longer applied by its only owner: removed
    status, _, updated = request(sim, "PATCH", path + "?fieldManager=ci", manifest, headers=apply)
    assert status == 200 and updated["metadata"]["labels"] == {"a": "1"}
    other = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "owned", "labels": {"a": "2"}}}
    status, _, conflict = request(sim, "PATCH", path + "?fieldManager=other", other, headers=apply)
    assert status == 409 and conflict["details"]["causes"][0]["field"] == ".metadata.labels.a"
    status, _, forced = request(sim, "PATCH", path + "?fieldManager=other&force=true", other, headers=apply)
    assert status == 200 and forced["metadata"]["labels"] == {"a": "2"}
    assert [m["manager"] for m in forced["metadata"]["managedFields"]] == ["ci", "other"]
    status, _, missing = request(sim, "PATCH", path, manifest, headers=apply)
    assert status == 400 and "fieldManager" in missing["message"]
    fields = {("spec", "x"), ("metadata", "labels", "a")}
    assert from_fields_v1(to_fields_v1(fields)) == fields


def test_rbac_decides_requests_and_access_reviews(sim):
    tfjobs = client.CustomObjectsApi(sim.api_client("alice"))
    tfjobs.create_namespaced_custom_object(*TF, "team-a", "tfjobs", tfjob_manifest("mine", "team-a"))
    with pytest.raises(client.ApiException) as refused:
        tfjobs.create_namespaced_custom_object(*TF, "team-b", "tfjobs", tfjob_manifest("mine", "team-b"))
    assert refused.value.status == 403
    assert (
        'User "alice" cannot create resource "tfjobs" in API group "kubeflow.org"'
        in json.loads(refused.value.body)["message"]
    )
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "delete", "group": "kubeflow.org", "resource": "tfjobs"}},
    }
    for namespace, allowed in (("team-a", True), ("team-b", False)):
        review["spec"]["resourceAttributes"]["namespace"] = namespace
        status, _, answer = request(
            sim, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, "alice-token"
        )
        assert status == 201 and answer["status"]["allowed"] is allowed
    as_alice = {"Impersonate-User": "alice", "Impersonate-Group": "ml-team"}
    status, _, _ = request(sim, "GET", "/api/v1/namespaces/team-a/pods", headers=as_alice)
    assert status == 200
    status, _, denied = request(sim, "GET", "/api/v1/namespaces/team-b/pods", headers=as_alice)
    assert status == 403 and denied["reason"] == "Forbidden"


def test_field_validation_strict_and_warn(sim):
    manifest = tfjob_manifest("typo", "team-a")
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["replica"] = 2
    path = "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs"
    status, _, refused = request(sim, "POST", path + "?fieldValidation=Strict", manifest)
    assert status == 400
    assert refused["message"].endswith('strict decoding error: unknown field "spec.tfReplicaSpecs.Worker.replica"')
    status, headers, _ = request(sim, "POST", path + "?fieldValidation=Warn", manifest)
    assert status == 201 and headers["Warning"] == '299 - "unknown field \\"spec.tfReplicaSpecs.Worker.replica\\""'
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "imag": "x"}]},
    }
    status, _, refused = request(sim, "POST", "/api/v1/namespaces/team-a/pods?fieldValidation=Strict", pod)
    assert status == 400 and 'unknown field "spec.containers[0].imag"' in refused["message"]
    assert openapi.unknown_fields(TFJOBS, tfjob_manifest("fine", "team-a")) == []


def test_openapi_and_discovery(sim):
    status, _, root = request(sim, "GET", "/openapi/v3")
    assert status == 200 and "apis/kubeflow.org/v1" in root["paths"] and "api/v1" in root["paths"]
    _, _, doc = request(sim, "GET", root["paths"]["apis/kubeflow.org/v1"]["serverRelativeURL"])
    schema = doc["components"]["schemas"]["org.kubeflow.v1.TFJob".replace("v1.", "v.")]
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "kubeflow.org", "kind": "TFJob", "version": "v1"}]
    patch = doc["paths"]["/apis/kubeflow.org/v1/namespaces/{namespace}/tfjobs/{name}"]["patch"]
    assert {"dryRun", "fieldValidation", "fieldManager", "force"} <= {p["name"] for p in patch["parameters"]}
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    status, _, swagger = request(sim, "GET", "/openapi/v2", headers={"Accept": "application/json"})
    assert status == 200 and swagger["swagger"] == "2.0" and "io.k8s.api.core.v1.Pod" in swagger["definitions"]
    status, _, refusal = request(sim, "GET", "/openapi/v2", headers={"Accept": "application/xml"})
    assert status == 406 and refusal["reason"] == "NotAcceptable"  # (protobuf: test_kubectl_unserved.py)
    _, _, core = request(sim, "GET", "/api/v1")
    short = {r["name"]: r.get("shortNames") for r in core["resources"]}
    assert short["namespaces"] == ["ns"] and short["pods"] == ["po"] and short["resourcequotas"] == ["quota"]
    assert next(r for r in core["resources"] if r["name"] == "pods")["categories"] == ["all"]
    _, _, authz = request(sim, "GET", "/apis/authorization.k8s.io/v1")
    assert authz["resources"][0]["name"] == "selfsubjectaccessreviews" and authz["resources"][0]["verbs"] == ["create"]
    _, _, leases = request(sim, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
    assert len(leases["items"]) == 3 and leases["items"][0]["spec"]["holderIdentity"] == "node-0"


@pytest.mark.parametrize("path", sorted(p.name for p in (REPO / "examples").glob("*.yaml")))
def test_the_examples_pass_strict_field_validation(path):
    """kubectl apply validates strictly: every example must be declared by kubesim's schemas."""
    from kubesim.resources import BY_API_VERSION_KIND

    for manifest in yaml.safe_load_all((REPO / "examples" / path).read_text()):
        rt = BY_API_VERSION_KIND[(manifest["apiVersion"], manifest["kind"])]
        assert openapi.unknown_fields(rt, manifest) == []


def test_strategic_merge_patch_of_built_in_kinds():
    from kubesim.patch import apply_patch

    pod = {
        "metadata": {"finalizers": ["a"]},
        "spec": {
            "containers": [
                {"name": "c", "image": "1", "env": [{"name": "A", "value": "1"}]},
                {"name": "d", "image": "1"},
            ],
            "tolerations": [{"key": "x"}],
        },
    }
    patch = {
        "metadata": {"finalizers": ["b"]},
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "d"}],
            "containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}, {"name": "d", "$patch": "delete"}],
            "tolerations": [{"key": "y"}],
        },
    }
    smp = "application/strategic-merge-patch+json"
    patched = apply_patch(pod, smp, patch)
    assert patched["metadata"]["finalizers"] == ["a", "b"]
    assert patched["spec"]["containers"] == [
        {"name": "c", "image": "1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    ]
    assert patched["spec"]["tolerations"] == [{"key": "y"}]  # not keyed: replaced
    replaced = apply_patch(pod, smp, {"spec": {"containers": [{"$patch": "replace"}, {"name": "e", "image": "2"}]}})
    assert replaced["spec"]["containers"] == [{"name": "e", "image": "2"}]
    dropped = apply_patch(pod, smp, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert dropped["metadata"]["finalizers"] == []
    with pytest.raises(Exception) as refused:
        apply_patch(pod, smp, {"spec": {}}, custom=True)
    assert getattr(refused.value, "code", None) == 415
