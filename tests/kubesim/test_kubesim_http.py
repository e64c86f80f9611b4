"""The HTTP surface itself, with a raw HTTP/1.1 client: Status bodies, keep-alive, watch framing."""

import http.client
import json
from urllib.parse import urlsplit

import pytest

from kubesim.testing import tfjob_manifest


@pytest.fixture
def conn(sim):
    connection = http.client.HTTPConnection(urlsplit(sim.url).netloc, timeout=5)
    yield connection
    connection.close()


def call(conn, method, path, body=None, token="jobdash-token", content_type="application/json"):
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    payload = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    conn.request(method, path, body=payload, headers=headers)
    response = conn.getresponse()
    return response.status, response.getheader("Content-Type"), response.read()


def test_errors_are_status_objects_and_the_connection_stays_usable(conn):
    status, ctype, body = call(conn, "POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", b"{not json", token=None)
    assert status == 401 and ctype == "application/json"
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    status, _, body = call(conn, "POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", b"{not json")
    assert status == 400 and json.loads(body)["reason"] == "BadRequest"
    status, _, body = call(conn, "GET", "/api/v1/namespaces/team-a/pods?limit=abc")
    assert status == 400
    status, _, body = call(conn, "GET", "/api/v1/namespaces/team-a/widgets")
    assert status == 404
    status, _, body = call(conn, "PATCH", "/api/v1/namespaces/team-a", {"metadata": {}}, content_type="text/plain")
    assert status == 415
    status, _, body = call(conn, "GET", "/api/v1/namespaces/team-a")  # same connection, still in step
    assert status == 200 and json.loads(body)["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team-a"


def test_custom_resources_must_name_their_kind(conn):
    manifest = tfjob_manifest("nokind", "team-a")
    del manifest["kind"]
    status, _, body = call(conn, "POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", manifest)
    assert status == 400 and "Kind" in json.loads(body)["message"]
    manifest = tfjob_manifest("wrongns", "team-b")
    status, _, body = call(conn, "POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", manifest)
    assert status == 400 and "namespace" in json.loads(body)["message"]


def test_health_version_and_discovery(conn):
    assert call(conn, "GET", "/healthz", token=None)[0] == 200
    status, _, body = call(conn, "GET", "/version", token=None)
    assert status == 200 and json.loads(body)["gitVersion"].startswith("v1.")
    groups = {g["name"]: g for g in json.loads(call(conn, "GET", "/apis")[2])["groups"]}
    assert set(groups) == {
        "kubeflow.org",
        "batch",
        "jobset.x-k8s.io",
        "trainer.kubeflow.org",
        "admissionregistration.k8s.io",
        "coordination.k8s.io",
        "scheduling.k8s.io",
        "rbac.authorization.k8s.io",
        "authorization.k8s.io",
        "jobdash.io",
    }
    # Two versions in one group (the training-operator's v1, the MPI operator's v2beta1): GA preferred.
    assert [v["version"] for v in groups["kubeflow.org"]["versions"]] == ["v1", "v2beta1"]
    assert groups["kubeflow.org"]["preferredVersion"]["groupVersion"] == "kubeflow.org/v1"
    resources = json.loads(call(conn, "GET", "/apis/kubeflow.org/v1")[2])
    assert [(r["name"], r["kind"], r["namespaced"]) for r in resources["resources"]] == [
        (f"{plural}{sub}", kind, True)
        for plural, kind in [
            ("tfjobs", "TFJob"),
            ("pytorchjobs", "PyTorchJob"),
            ("xgboostjobs", "XGBoostJob"),
            ("paddlejobs", "PaddleJob"),
            ("jaxjobs", "JAXJob"),
        ]
        for sub in ("", "/status")
    ]
    mpi = json.loads(call(conn, "GET", "/apis/kubeflow.org/v2beta1")[2])
    assert [r["name"] for r in mpi["resources"]] == ["mpijobs", "mpijobs/status"]
    trainer = json.loads(call(conn, "GET", "/apis/trainer.kubeflow.org/v1alpha1")[2])
    assert {r["name"]: r["namespaced"] for r in trainer["resources"]} == {
        "trainjobs": True,
        "trainjobs/status": True,
        "trainingruntimes": True,
        "clustertrainingruntimes": False,
    }
    group = json.loads(call(conn, "GET", "/apis/batch")[2])
    assert group["kind"] == "APIGroup" and group["preferredVersion"]["groupVersion"] == "batch/v1"


def test_watch_is_chunked_newline_delimited_json(conn, sim):
    status, _, body = call(
        conn, "POST", "/apis/kubeflow.org/v1/namespaces/team-a/tfjobs", tfjob_manifest("raw", "team-a", suspend=True)
    )
    rv = json.loads(body)["metadata"]["resourceVersion"]
    sim.settle()  # the operator writes the Created/Suspended conditions
    conn.request(
        "GET",
        f"/apis/kubeflow.org/v1/namespaces/team-a/tfjobs?watch=true&resourceVersion={int(rv) - 1}&timeoutSeconds=1",
        headers={"Authorization": "Bearer jobdash-token"},
    )
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Transfer-Encoding") == "chunked"
    lines = response.read().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events][:2] == ["ADDED", "MODIFIED"]  # created, then the operator's status
    assert events[0]["object"]["metadata"]["name"] == "raw"


def test_watch_from_a_too_old_version_is_an_error_event(conn, sim):
    sim.model.compact()
    conn.request(
        "GET",
        "/api/v1/namespaces/team-a/pods?watch=1&resourceVersion=1",
        headers={"Authorization": "Bearer jobdash-token"},
    )
    response = conn.getresponse()
    events = [json.loads(line) for line in response.read().splitlines()]
    assert response.status == 200
    assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in events] == [("ERROR", 410, "Expired")]


def test_control_plane_advances_a_manual_clock_and_compacts(conn, sim):
    before = sim.clock.now()
    status, _, body = call(conn, "POST", "/kubesim/advance", {"seconds": 90}, token=None)
    assert status == 200 and json.loads(body)["now"] == before + 90 == sim.clock.now()
    status, _, body = call(conn, "POST", "/kubesim/compact", token=None)
    assert status == 200 and json.loads(body)["compacted"] == sim.model.resource_version
    state = json.loads(call(conn, "GET", "/kubesim/state", token=None)[2])
    assert state["resourceVersion"] == sim.model.resource_version and state["errors"] == []
    assert call(conn, "GET", "/kubesim/nothing-here", token=None)[0] == 404


def test_delete_options_that_are_not_an_object_are_400(conn):
    status, _, body = call(conn, "DELETE", "/api/v1/namespaces/team-a/pods/nothing", ["Foreground"])
    assert status == 400
    assert json.loads(body)["message"] == "the body of the request must be a JSON object, not list"


def test_https_with_the_ca_in_the_kubeconfig(tmp_path):
    """kubectl sends a bearer token only over HTTPS: kubesim serves it when given a certificate,
    and the kubeconfig it writes carries the CA."""
    import trustme
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from kubesim.cluster import Cluster
    from kubesim.config import write_kubeconfig
    from kubesim.server import KubesimServer

    ca = trustme.CA()
    served = ca.issue_cert("127.0.0.1", "localhost")
    served.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    served.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    users = [{"token": "t", "username": "alice", "groups": []}]
    cluster = Cluster({"users": users, "namespaces": [{"name": "team-a"}]})
    server = KubesimServer(cluster, tls=(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")))
    server.start_background()
    try:
        assert server.url.startswith("https://127.0.0.1:")
        write_kubeconfig(tmp_path / "kubeconfig", server.url, users, ca_pem=ca.cert_pem.bytes())
        api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(tmp_path / "kubeconfig")))
        assert "team-a" in {ns.metadata.name for ns in api.list_namespace().items}
    finally:
        server.stop()
