"""Fixtures for the webhook's tests: AdmissionReviews as kube-apiserver (and kubesim) send them."""

import base64
import copy
import json
import uuid

import pytest
from django.test import Client

from jobdash.jobs.models import Namespace
from kubesim.testing import tfjob_manifest

JOBDASH = "system:serviceaccount:jobdash:jobdash"
KATIB = "system:serviceaccount:kubeflow:katib-controller"
ALICE = "alice@example.com"
URL = "/webhooks/admission/tfjobs"
TRIAL_OWNER = {
    "apiVersion": "kubeflow.org/v1beta1",
    "kind": "Trial",
    "name": "random-exp-trial-1",
    "uid": "7f1c0a52-0d3e-4c55-9d0e-6a6a2b1f0c11",
    "controller": True,
    "blockOwnerDeletion": True,
}


def trial_tfjob(name: str = "random-exp-trial-1", namespace: str = "team-a", **kwargs) -> dict:
    """A TFJob as Katib's trial controller creates it: owned by its Trial, labelled, annotated."""
    body = tfjob_manifest(name, namespace, workers=2, cpu="1", memory="1Gi", duration=5, **kwargs)
    meta = body["metadata"]
    meta["ownerReferences"] = [dict(TRIAL_OWNER, name=name)]
    meta["labels"] = {
        **meta.get("labels", {}),
        "katib.kubeflow.org/trial": name,
        "katib.kubeflow.org/experiment": "random-exp",
    }
    meta["annotations"] = {**meta.get("annotations", {}), "sidecar.istio.io/inject": "false"}
    return body


def katib_trial_job(name: str = "random-exp-trial-1") -> dict:
    """A batch/v1 Job as Katib's trial controller creates it from its default trial
    template: one container running the MNIST script, restartPolicy Never, owned by its Trial."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "ownerReferences": [dict(TRIAL_OWNER, name=name)],
            "labels": {"katib.kubeflow.org/trial": name, "katib.kubeflow.org/experiment": "random-exp"},
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "training-container",
                            "image": "docker.io/kubeflowkatib/pytorch-mnist-cpu:latest",
                            "command": [
                                "python3",
                                "/opt/pytorch-mnist/mnist.py",
                                "--epochs=1",
                                "--batch-size=16",
                                "--lr=0.01",
                                "--momentum=0.5",
                            ],
                            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
                        }
                    ],
                    "restartPolicy": "Never",
                }
            }
        },
    }


def admission_review(
    obj: dict | None,
    *,
    user: str = KATIB,
    operation: str = "CREATE",
    dry_run: bool = False,
    group: str = "kubeflow.org",
    version: str = "v1",
    kind: str = "TFJob",
    resource: str = "tfjobs",
    namespace: str | None = None,
    name: str | None = None,
    uid: str | None = None,
    sub_resource: str = "",
    old_object: dict | None = None,
    groups: tuple[str, ...] = ("system:serviceaccounts", "system:authenticated"),
) -> dict:
    meta = (obj or old_object or {}).get("metadata") or {}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": resource}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            **({"subResource": sub_resource} if sub_resource else {}),
            "name": name if name is not None else meta.get("name", ""),
            "namespace": namespace if namespace is not None else meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": user, "groups": list(groups)},
            "object": obj,
            "oldObject": old_object,
            "dryRun": dry_run,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def of_kind(adapter) -> dict:
    """admission_review's keyword arguments for a review of `adapter`'s kind."""
    group, _, version = adapter.api_version.rpartition("/")
    return {"group": group, "version": version, "kind": adapter.kind, "resource": adapter.plural}


def path_of(plural: str) -> str:
    return f"/webhooks/admission/{plural}"


class Webhook:
    """Posts reviews to the webhook through Django's test client; returns the response part.
    A review goes to the path of its resource, as the webhook configuration routes it.
    (The client certificate that the listener demands is tested with the real listener:
    test_webhook_listener.py; here the decisions.)"""

    def __init__(self):
        self.client = Client()

    def post_raw(self, body, content_type="application/json", path=URL):
        return self.client.generic("POST", path, body, content_type=content_type)

    def __call__(self, obj, path: str | None = None, **kwargs) -> dict:
        review = admission_review(obj, **kwargs)
        reply = self.post_raw(json.dumps(review), path=path or path_of(review["request"]["resource"]["resource"]))
        assert reply.status_code == 200, reply.content
        body = reply.json()
        assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
        assert body["response"]["uid"] == review["request"]["uid"]
        return body["response"]


@pytest.fixture
def webhook(settings):
    settings.ROOT_URLCONF = "webhooks.urls"  # the webhook listener's routes
    return Webhook()


@pytest.fixture
def team_a(db):
    return Namespace.objects.create(name="team-a")


@pytest.fixture
def deny_mode(settings):
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    return settings


@pytest.fixture
def suspend_mode(settings):
    settings.JOBDASH_WEBHOOK_MODE = "suspend"
    settings.JOBDASH_RELEASE_MODE = "unsuspend"
    return settings


def decoded_patch(response: dict) -> list[dict]:
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def apply_patch(obj: dict, patch: list[dict]) -> dict:
    """Apply a JSONPatch with kubesim's implementation (the one the e2e tests run)."""
    from kubesim.patch import json_patch

    return json_patch(copy.deepcopy(obj), patch)
