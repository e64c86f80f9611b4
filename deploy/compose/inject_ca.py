"""Register the admission webhook with the cluster, its CA bundle injected.

    python deploy/compose/inject_ca.py --ca /tls/tls.crt [--manifest deploy/base/webhook.yaml]

What cert-manager's CA injector does in Kubernetes (annotation cert-manager.io/inject-ca-from),
done once for `docker compose up`: the web generates a self-signed certificate at start, and
this sets it as the caBundle of every webhook in the manifest's Mutating/Validating
WebhookConfigurations and creates them, or replaces them if they exist. It talks to the
cluster named by KUBECONFIG with the official client; it waits for the certificate and
the cluster (bounded by --wait seconds).
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

KINDS = {
    "MutatingWebhookConfiguration": (
        "create_mutating_webhook_configuration",
        "read_mutating_webhook_configuration",
        "replace_mutating_webhook_configuration",
    ),
    "ValidatingWebhookConfiguration": (
        "create_validating_webhook_configuration",
        "read_validating_webhook_configuration",
        "replace_validating_webhook_configuration",
    ),
}


def with_ca(document: dict, ca_pem: bytes) -> dict:
    bundle = base64.b64encode(ca_pem).decode()
    for hook in document.get("webhooks") or []:
        hook.setdefault("clientConfig", {})["caBundle"] = bundle
    return document


def apply(api: client.AdmissionregistrationV1Api, document: dict) -> str:
    create, read, replace = (getattr(api, name) for name in KINDS[document["kind"]])
    name = document["metadata"]["name"]
    try:
        create(document)
        return "created"
    except ApiException as error:
        if error.status != 409:
            raise
    document["metadata"]["resourceVersion"] = read(name).metadata.resource_version
    replace(name, document)
    return "replaced"


def wait_for(what: str, check, seconds: float):
    deadline = time.monotonic() + seconds
    while True:
        try:
            return check()
        except Exception as error:
            if time.monotonic() > deadline:
                sys.exit(f"inject_ca: {what} not ready after {seconds:.0f}s: {error}")
            time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ca", required=True, help="PEM file of the CA that signed the webhook's certificate")
    parser.add_argument("--manifest", default=str(Path(__file__).resolve().parents[1] / "base" / "webhook.yaml"))
    parser.add_argument("--kubeconfig", help="default: KUBECONFIG")
    parser.add_argument("--wait", type=float, default=120.0)
    args = parser.parse_args(argv)

    ca_pem = wait_for("the certificate", lambda: _non_empty(Path(args.ca).read_bytes()), args.wait)
    documents = [d for d in yaml.safe_load_all(Path(args.manifest).read_text()) if d and d.get("kind") in KINDS]
    if not documents:
        sys.exit(f"inject_ca: no webhook configuration in {args.manifest}")
    api_client = config.new_client_from_config(config_file=args.kubeconfig)
    api = client.AdmissionregistrationV1Api(api_client)
    for document in documents:
        outcome = wait_for("the cluster", lambda d=document: apply(api, with_ca(d, ca_pem)), args.wait)
        print(f"inject_ca: {document['kind']} {document['metadata']['name']} {outcome}", flush=True)
    return 0


def _non_empty(data: bytes) -> bytes:
    if b"BEGIN CERTIFICATE" not in data:
        raise ValueError("no certificate yet")
    return data


if __name__ == "__main__":
    sys.exit(main())
