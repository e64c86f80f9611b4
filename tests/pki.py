"""Certificates for the webhook's real path, as a cluster has them: a serving certificate
(its CA is the webhook configuration's caBundle), a client CA the webhook trusts, and the
API server's client certificate from it, named for the webhook in an AdmissionConfiguration
(kube-apiserver's --admission-control-config-file) that kubesim reads. An attacker's
certificate from another CA, to show it is refused."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import trustme

from webhooks import registration
from webhooks.registration import admission_configuration


@dataclass(frozen=True)
class WebhookPKI:
    directory: Path
    serving_ca: Path
    server_cert: Path
    server_key: Path
    client_ca: Path
    apiserver_cert: Path  # the API server's webhook client certificate
    apiserver_key: Path
    stranger_cert: Path  # a well-formed client certificate from a CA nobody trusts
    stranger_key: Path
    admission_config: Path

    def ca_bundle(self) -> str:
        return base64.b64encode(self.serving_ca.read_bytes()).decode()

    def listener_files(self) -> dict[str, str]:
        return {"certfile": str(self.server_cert), "keyfile": str(self.server_key), "client_ca": str(self.client_ca)}


def make_webhook_pki(directory: Path) -> WebhookPKI:
    directory.mkdir(parents=True, exist_ok=True)
    serving = trustme.CA(organization_name="jobdash webhook serving CA")
    client = trustme.CA(organization_name="kube-apiserver webhook client CA")
    stranger = trustme.CA(organization_name="not the API server")
    server = serving.issue_cert("127.0.0.1", "localhost", "jobdash-webhook.jobdash.svc")
    apiserver = client.issue_cert("kube-apiserver.example", common_name="kube-apiserver")
    forged = stranger.issue_cert("kube-apiserver.example", common_name="kube-apiserver")

    def write(name: str, blob) -> Path:
        path = directory / name
        blob.write_to_path(str(path))
        return path

    files = {
        "serving_ca": write("serving-ca.crt", serving.cert_pem),
        "server_cert": write("server.crt", server.cert_chain_pems[0]),
        "server_key": write("server.key", server.private_key_pem),
        "client_ca": write("client-ca.crt", client.cert_pem),
        "apiserver_cert": write("apiserver.crt", apiserver.cert_chain_pems[0]),
        "apiserver_key": write("apiserver.key", apiserver.private_key_pem),
        "stranger_cert": write("stranger.crt", forged.cert_chain_pems[0]),
        "stranger_key": write("stranger.key", forged.private_key_pem),
    }
    config = admission_configuration(directory, files["apiserver_cert"], files["apiserver_key"])
    return WebhookPKI(directory=directory, admission_config=config, **files)


def webhook_configuration(pki: WebhookPKI | None = None) -> dict:
    """The MutatingWebhookConfiguration deploy/ ships; with a PKI, its caBundle as
    cert-manager would inject it."""
    return registration.webhook_configuration(pki.serving_ca.read_bytes() if pki is not None else None)


def with_webhook(config: dict, listener_url: str, pki: WebhookPKI) -> dict:
    """A kubesim config that calls jobdash's webhook listener as kube-apiserver would."""
    return {
        **config,
        "services": {**config.get("services", {}), registration.service_key(webhook_configuration()): listener_url},
        "admission_config": str(pki.admission_config),
        "objects": [*config.get("objects", []), webhook_configuration(pki)],
    }
