"""How the API server authenticates itself to admission webhooks: client certificates.

kube-apiserver reads ``--admission-control-config-file``, an AdmissionConfiguration whose
MutatingAdmissionWebhook / ValidatingAdmissionWebhook plugins name a ``kubeConfigFile``.
That kubeconfig's ``users`` are keyed by the webhook's host: ``<svc>.<ns>.svc:<port>``
for a service reference, ``host:port`` for a URL; ``*.domain`` and ``*`` are wildcards.
The matched user's client certificate is presented on the TLS handshake; a webhook that
trusts only its issuing CA then knows the caller is the API server. kubesim follows the
lookup of k8s.io/apiserver's ``defaultAuthenticationInfoResolver.clientConfig``: exact
name, then star-prefixed names; then the same without the port when it is 443; then ``*``.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

WEBHOOK_PLUGINS = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")


@dataclass(frozen=True)
class ClientCertificate:
    certfile: str
    keyfile: str


class ClientCredentials:
    """Client certificates by webhook host, from an AdmissionConfiguration file."""

    def __init__(self, by_name: dict[str, ClientCertificate] | None = None):
        self.by_name = dict(by_name or {})

    @classmethod
    def from_admission_config(cls, path: str | Path) -> ClientCredentials:
        path = Path(path)
        document = yaml.safe_load(path.read_text()) or {}
        if not isinstance(document, dict) or document.get("kind") != "AdmissionConfiguration":
            raise ValueError(f"{path}: not an AdmissionConfiguration")
        kubeconfigs = set()
        for plugin in document.get("plugins") or []:
            if not isinstance(plugin, dict) or plugin.get("name") not in WEBHOOK_PLUGINS:
                continue
            if plugin.get("path"):
                configuration = yaml.safe_load((path.parent / plugin["path"]).read_text()) or {}
            else:
                configuration = plugin.get("configuration") or {}
            if configuration.get("kubeConfigFile"):
                kubeconfigs.add(path.parent / configuration["kubeConfigFile"])
        by_name: dict[str, ClientCertificate] = {}
        for kubeconfig in sorted(kubeconfigs):
            by_name.update(_users(kubeconfig))
        return cls(by_name)

    def for_host(self, host_port: str) -> ClientCertificate | None:
        host, _, port = host_port.rpartition(":")
        targets = [host_port] + ([host] if port == "443" else [])
        for target in targets:
            if target in self.by_name:
                return self.by_name[target]
            steps = target.split(".")
            for i in range(1, len(steps)):
                star = "*." + ".".join(steps[i:])
                if star in self.by_name:
                    return self.by_name[star]
        return self.by_name.get("*")


def _users(kubeconfig: Path) -> dict[str, ClientCertificate]:
    document = yaml.safe_load(kubeconfig.read_text()) or {}
    found: dict[str, ClientCertificate] = {}
    for entry in document.get("users") or []:
        user = entry.get("user") or {}
        cert = _file(kubeconfig, user, "client-certificate")
        key = _file(kubeconfig, user, "client-key")
        if cert and key:
            found[str(entry["name"])] = ClientCertificate(cert, key)
    return found


def _file(kubeconfig: Path, user: dict, field: str) -> str | None:
    """A path for ssl's load_cert_chain: the file named, or the inline data written out."""
    if user.get(field):
        return str(kubeconfig.parent / user[field])
    data = user.get(f"{field}-data")
    if not data:
        return None
    fd, name = tempfile.mkstemp(prefix="kubesim-webhook-client-", suffix=".pem")
    with os.fdopen(fd, "wb") as out:  # mkstemp's file is 0600: fine for a key
        out.write(base64.b64decode(data))
    return name


def tls_context(ca_bundle: str | None, certificate: ClientCertificate | None) -> ssl.SSLContext:
    """Verify the webhook against its caBundle (the system's CAs when empty), present ours."""
    cadata = base64.b64decode(ca_bundle).decode() if ca_bundle else None
    context = ssl.create_default_context(cadata=cadata)
    if certificate is not None:
        context.load_cert_chain(certificate.certfile, certificate.keyfile)
    return context
