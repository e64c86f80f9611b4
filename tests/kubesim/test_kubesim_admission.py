"""Admission webhooks on TFJob CREATE, called by kubesim as kube-apiserver calls them."""

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client

from kubesim.testing import tfjob_manifest

G, V, P = "kubeflow.org", "v1", "tfjobs"
KATIB = "system:serviceaccount:kubeflow:katib-controller"
HOOK = "tfjobs.jobdash.example.com"


class Webhook:
    """A tiny admission webhook: ``decide(request) -> response fields``; records every review."""

    def __init__(self, decide, delay: float = 0.0):
        self.reviews: list[dict] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.reviews.append(review)
                time.sleep(delay)
                answer = {"uid": review["request"]["uid"], "allowed": True, **decide(review["request"])}
                data = json.dumps(
                    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # the caller gave up (timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhooks/admission/tfjobs"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook():
    started = []

    def start(decide=lambda request: {}, delay=0.0):
        started.append(Webhook(decide, delay))
        return started[-1]

    yield start
    for hook in started:
        hook.close()


def register(sim, url, kind="Mutating", failure_policy="Fail", timeout=10, **extra):
    api_client = sim.api_client()
    api = client.AdmissionregistrationV1Api(api_client)
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": f"{kind}WebhookConfiguration",
        "metadata": {"name": "jobdash"},
        "webhooks": [
            {
                "name": HOOK,
                "clientConfig": {"url": url},
                "failurePolicy": failure_policy,
                "timeoutSeconds": timeout,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": ["kubeflow.org"],
                        "apiVersions": ["v1"],
                        "resources": ["tfjobs"],
                    }
                ],
                **extra,
            }
        ],
    }
    if kind == "Mutating":
        api.create_mutating_webhook_configuration(body)
    else:
        api.create_validating_webhook_configuration(body)
    api_client.close()


def as_user(sim, username):
    return client.CustomObjectsApi(sim.api_client(username))


def suspend_patch(request):
    ops = [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}},
        {"op": "add", "path": "/metadata/labels", "value": {"jobdash.io/queued": "true"}},
    ]
    return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


def test_mutating_webhook_patch_is_applied_and_sees_the_caller(sim, webhook):
    hook = webhook(suspend_patch)
    register(sim, hook.url)
    created = as_user(sim, KATIB).create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("trial-1", "team-a", workers=2)
    )
    assert created["spec"]["runPolicy"] == {"suspend": True}
    assert created["metadata"]["labels"] == {"jobdash.io/queued": "true"}
    request = hook.reviews[0]["request"]
    assert hook.reviews[0]["apiVersion"] == "admission.k8s.io/v1" and hook.reviews[0]["kind"] == "AdmissionReview"
    assert request["userInfo"] == {"username": KATIB, "groups": ["system:serviceaccounts"]}
    assert (request["operation"], request["namespace"], request["name"], request["dryRun"]) == (
        "CREATE",
        "team-a",
        "trial-1",
        False,
    )
    assert request["kind"] == {"group": "kubeflow.org", "version": "v1", "kind": "TFJob"}
    assert request["resource"] == {"group": "kubeflow.org", "version": "v1", "resource": "tfjobs"}
    assert request["object"]["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 2 and request["oldObject"] is None
    sim.settle()
    assert sim.cluster.pods("team-a") == []  # suspended by the webhook: the operator creates nothing
    job = sim.cluster.tfjob("team-a", "trial-1")
    assert {c["type"]: c["status"] for c in job["status"]["conditions"]} == {"Created": "True", "Suspended": "True"}


def test_dry_run_reaches_the_webhook_and_stores_nothing(sim, webhook):
    hook = webhook(suspend_patch)
    register(sim, hook.url)
    result = as_user(sim, KATIB).create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("dry", "team-a"), dry_run="All"
    )
    assert result["spec"]["runPolicy"] == {"suspend": True}
    assert hook.reviews[0]["request"]["dryRun"] is True
    assert sim.cluster.tfjob("team-a", "dry") is None


def test_denial_becomes_the_clients_error(sim, webhook):
    hook = webhook(lambda request: {"allowed": False, "status": {"code": 403, "message": "queue is full"}})
    register(sim, hook.url, kind="Validating")
    with pytest.raises(client.ApiException) as caught:
        as_user(sim, "alice@example.com").create_namespaced_custom_object(
            G, V, "team-a", P, tfjob_manifest("no", "team-a")
        )
    body = json.loads(caught.value.body)
    assert caught.value.status == 403
    assert body["message"] == f'admission webhook "{HOOK}" denied the request: queue is full'
    assert sim.cluster.tfjob("team-a", "no") is None
    assert [(a["user"], a["name"], a["code"]) for a in sim.cluster.audit] == [("alice@example.com", "no", 403)]


def test_denial_without_a_code_is_400(sim, webhook):
    hook = webhook(lambda request: {"allowed": False})
    register(sim, hook.url, kind="Validating")
    with pytest.raises(client.ApiException) as caught:
        as_user(sim, KATIB).create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("no", "team-a"))
    assert caught.value.status == 400
    assert (
        json.loads(caught.value.body)["message"] == f'admission webhook "{HOOK}" denied the request without explanation'
    )


def test_unreachable_webhook_fails_closed_or_open_by_failure_policy(sim):
    register(sim, "http://127.0.0.1:9/unreachable", failure_policy="Fail")
    api = as_user(sim, KATIB)
    with pytest.raises(client.ApiException) as caught:
        api.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("closed", "team-a"))
    assert caught.value.status == 500 and f'failed calling webhook "{HOOK}"' in json.loads(caught.value.body)["message"]
    admission = client.AdmissionregistrationV1Api(sim.api_client())
    admission.patch_mutating_webhook_configuration(
        "jobdash",
        {
            "webhooks": [
                {
                    **admission.read_mutating_webhook_configuration("jobdash").to_dict(serialize=True)["webhooks"][0],
                    "failurePolicy": "Ignore",
                }
            ]
        },
    )
    created = api.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("open", "team-a"))
    assert created["metadata"]["name"] == "open"


def test_timeout_seconds_is_honoured(sim, webhook):
    hook = webhook(suspend_patch, delay=3.0)
    register(sim, hook.url, timeout=1)
    started = time.monotonic()
    with pytest.raises(client.ApiException) as caught:
        as_user(sim, KATIB).create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("slow", "team-a"))
    assert time.monotonic() - started < 2.5
    assert caught.value.status == 500 and "context deadline exceeded" in json.loads(caught.value.body)["message"]


def test_namespace_and_object_selectors_choose_what_is_sent(sim, webhook):
    hook = webhook(suspend_patch)
    register(
        sim,
        hook.url,
        namespaceSelector={"matchLabels": {"jobdash.io/managed": "true"}},
        objectSelector={"matchExpressions": [{"key": "jobdash.io/bypass", "operator": "DoesNotExist"}]},
    )
    api = as_user(sim, KATIB)
    unmanaged = api.create_namespaced_custom_object(G, V, "team-b", P, tfjob_manifest("b", "team-b"))
    bypass = api.create_namespaced_custom_object(
        G, V, "team-a", P, tfjob_manifest("x", "team-a", labels={"jobdash.io/bypass": "1"})
    )
    managed = api.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("a", "team-a"))
    assert "runPolicy" not in unmanaged["spec"] and "runPolicy" not in bypass["spec"]
    assert managed["spec"]["runPolicy"] == {"suspend": True}
    assert [r["request"]["name"] for r in hook.reviews] == ["a"]


def test_a_patch_that_breaks_the_object_is_422(sim, webhook):
    broken = [{"op": "remove", "path": "/spec/tfReplicaSpecs"}]
    hook = webhook(
        lambda request: {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(broken).encode()).decode()}
    )
    register(sim, hook.url)
    with pytest.raises(client.ApiException) as caught:
        as_user(sim, KATIB).create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("broken", "team-a"))
    assert caught.value.status == 422 and hook.reviews


def test_audit_records_every_create_with_its_outcome(sim):
    jobdash = as_user(sim, "system:serviceaccount:jobdash:jobdash")
    jobdash.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("once", "team-a", suspend=True))
    with pytest.raises(client.ApiException):
        jobdash.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("once", "team-a", suspend=True))
    audit = sim.cluster.audit
    assert [(a["user"], a["namespace"], a["name"], a["outcome"], a["code"]) for a in audit] == [
        ("system:serviceaccount:jobdash:jobdash", "team-a", "once", "Created", 201),
        ("system:serviceaccount:jobdash:jobdash", "team-a", "once", "AlreadyExists", 409),
    ]
    assert audit[0]["time"] == sim.clock.now()
    assert sum(1 for a in audit if a["outcome"] == "Created" and a["name"] == "once") == 1


def test_webhooks_see_every_job_kind(sim, webhook):
    from kubesim.testing import batch_job_manifest, pytorchjob_manifest

    hook = webhook(lambda request: {"allowed": False, "status": {"message": f"no {request['kind']['kind']}"}})
    rules = [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": ["batch", "kubeflow.org"],
            "apiVersions": ["v1"],
            "resources": ["jobs", "pytorchjobs"],
        }
    ]
    register(sim, hook.url, kind="Validating", rules=rules)
    api_client = sim.api_client("alice@example.com")
    with pytest.raises(client.ApiException) as caught:
        client.BatchV1Api(api_client).create_namespaced_job("team-a", batch_job_manifest("j", "team-a"))
    assert caught.value.status == 400  # a denial without a code
    assert json.loads(caught.value.body)["message"] == f'admission webhook "{HOOK}" denied the request: no Job'
    with pytest.raises(client.ApiException) as caught:
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            G, V, "team-a", "pytorchjobs", pytorchjob_manifest("p", "team-a")
        )
    assert "denied the request: no PyTorchJob" in json.loads(caught.value.body)["message"]
    request = hook.reviews[0]["request"]
    assert (request["resource"], request["operation"]) == (
        {"group": "batch", "version": "v1", "resource": "jobs"},
        "CREATE",
    )
    assert request["object"]["spec"]["selector"]  # validating webhooks see the API server's defaults
    api_client.close()
