"""Which client certificate kubesim presents to a webhook: kube-apiserver's lookup in the
kubeConfigFile of its AdmissionConfiguration (k8s.io/apiserver's
defaultAuthenticationInfoResolver): exact host:port, star-prefixed names, then the same
without the port when it is 443, then '*'."""

import base64

import pytest
import yaml

from kubesim.config import load
from kubesim.webhook_clients import ClientCertificate, ClientCredentials


def credentials(*names: str) -> ClientCredentials:
    return ClientCredentials({name: ClientCertificate(f"{name}.crt", f"{name}.key") for name in names})


@pytest.mark.parametrize(
    "names, host, chosen",
    [
        (["hook.ns.svc:443", "hook.ns.svc", "*"], "hook.ns.svc:443", "hook.ns.svc:443"),
        (["hook.ns.svc", "*"], "hook.ns.svc:443", "hook.ns.svc"),
        (["*.ns.svc", "*"], "hook.ns.svc:443", "*.ns.svc"),
        (["*.svc:8443", "*.svc"], "hook.ns.svc:8443", "*.svc:8443"),
        (["hook.ns.svc", "*"], "hook.ns.svc:8443", "*"),  # a port other than 443 must be named
        (["127.0.0.1:9443"], "127.0.0.1:9443", "127.0.0.1:9443"),
        (["other.ns.svc"], "hook.ns.svc:443", None),
    ],
)
def test_the_api_servers_lookup_order(names, host, chosen):
    found = credentials(*names).for_host(host)
    assert (found.certfile if found else None) == (f"{chosen}.crt" if chosen else None)


def test_an_admission_configuration_file_with_inline_and_file_credentials(tmp_path):
    (tmp_path / "kc.yaml").write_text(
        yaml.safe_dump(
            {
                "users": [
                    {"name": "a.ns.svc", "user": {"client-certificate": "a.crt", "client-key": "a.key"}},
                    {
                        "name": "*",
                        "user": {
                            "client-certificate-data": base64.b64encode(b"CERT").decode(),
                            "client-key-data": base64.b64encode(b"KEY").decode(),
                        },
                    },
                    {"name": "token-only", "user": {"token": "t"}},  # no certificate: not a client cert entry
                ]
            }
        )
    )
    plugin = {"kind": "WebhookAdmissionConfiguration", "kubeConfigFile": "kc.yaml"}
    (tmp_path / "admission.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [
                    {"name": "MutatingAdmissionWebhook", "configuration": plugin},
                    {"name": "ValidatingAdmissionWebhook", "configuration": plugin},
                    {"name": "EventRateLimit", "configuration": {"kind": "Configuration"}},
                ],
            }
        )
    )
    (tmp_path / "kubesim.yaml").write_text("admission_config: admission.yaml\n")
    config = load(tmp_path / "kubesim.yaml")  # relative to the config file, like other paths
    found = ClientCredentials.from_admission_config(config.admission_config)
    assert set(found.by_name) == {"a.ns.svc", "*"}
    assert found.for_host("a.ns.svc:443").certfile == str(tmp_path / "a.crt")
    inline = found.for_host("b.ns.svc:443")
    assert open(inline.certfile, "rb").read() == b"CERT" and open(inline.keyfile, "rb").read() == b"KEY"


def test_a_file_that_is_not_an_admission_configuration_is_refused(tmp_path):
    (tmp_path / "x.yaml").write_text("kind: Config\n")
    with pytest.raises(ValueError, match="not an AdmissionConfiguration"):
        ClientCredentials.from_admission_config(tmp_path / "x.yaml")
