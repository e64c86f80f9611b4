"""The webhook configuration jobdash ships (deploy/base/webhook.yaml), registered with a
cluster by hand where no cert-manager injects its CA: the embedded stack's kubesim, tests."""

from __future__ import annotations

import base64
import copy
from pathlib import Path

import yaml

MANIFEST = Path(__file__).resolve().parents[1] / "deploy/base/webhook.yaml"
QUEUEDJOBS_MANIFEST = MANIFEST.with_name("queuedjobs.yaml")


def webhook_configuration(ca_pem: bytes | None = None) -> dict:
    """The MutatingWebhookConfiguration, its caBundle the serving certificate's CA (cert-manager's
    injection, done by hand; the annotation that asks for it dropped)."""
    (document,) = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    return _with_ca(document, ca_pem)


def _with_ca(document: dict, ca_pem: bytes | None) -> dict:
    document = copy.deepcopy(document)
    document["metadata"].pop("annotations", None)
    if ca_pem is not None:
        bundle = base64.b64encode(ca_pem).decode()
        for hook in document["webhooks"]:
            hook["clientConfig"]["caBundle"] = bundle
    return document


def queued_deletes_configuration(ca_pem: bytes | None = None) -> dict:
    """The ValidatingWebhookConfiguration of QueuedJob deletes (deploy/base/queuedjobs.yaml),
    registered the same way."""
    documents = [d for d in yaml.safe_load_all(QUEUEDJOBS_MANIFEST.read_text()) if d]
    (document,) = [d for d in documents if d["kind"] == "ValidatingWebhookConfiguration"]
    return _with_ca(document, ca_pem)


def service_key(document: dict) -> str:
    """ "namespace/name" of the Service every entry calls (kubesim's `services` map key)."""
    service = document["webhooks"][0]["clientConfig"]["service"]
    return f"{service['namespace']}/{service['name']}"


def admission_configuration(directory: Path, certfile: Path, keyfile: Path) -> Path:
    """kube-apiserver's --admission-control-config-file: present this client certificate to
    every webhook (kubesim reads it the same way). Returns the file's path."""
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "users": [{"name": "*", "user": {"client-certificate": str(certfile), "client-key": str(keyfile)}}],
    }
    (directory / "webhook-kubeconfig.yaml").write_text(yaml.safe_dump(kubeconfig))
    plugin = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": "webhook-kubeconfig.yaml",
    }
    admission = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {"name": "MutatingAdmissionWebhook", "configuration": plugin},
            {"name": "ValidatingAdmissionWebhook", "configuration": plugin},
        ],
    }
    path = directory / "admission.yaml"
    path.write_text(yaml.safe_dump(admission))
    return path
