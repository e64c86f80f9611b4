"""`make run`'s whole stack in one process, as a cluster would have it: kubesim on a
loopback port over HTTPS with jobdash's admission webhook registered (on its own TLS listener, which
kubesim calls with the API server's client certificate, as in production), the dispatcher
loop (election `none`) and its watch cache.

Two kubeconfigs under the var directory: `kubeconfig` for people (a demo member as the
current context, the cluster admin as another), so that `kubectl` or the Python client can
create jobs on the cluster and watch them go through the queue; `jobdash.kubeconfig` for
jobdash's own identity, whose writes the webhook lets through (fenced by the term). RBAC is
on (embedded_cluster.yaml): the member edits jobs in team-a only, jobdash holds deploy/'s
ClusterRole and no more (rbac.py).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from django.conf import settings

from jobdash.cluster.kube import KubeGateway
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.loop import DispatcherLoop
from kubesim.cluster import Cluster
from kubesim.config import load, write_kubeconfig
from kubesim.server import KubesimServer
from webhooks import registration
from webhooks.listener import WebhookListener

from . import rbac

ENTRYPOINT = Path(__file__).resolve().parents[2] / "deploy/docker/entrypoint.sh"


class EmbeddedStack:
    def __init__(self, var_dir: Path, cluster_config: Path, tick_seconds: float):
        self.var_dir = Path(var_dir)
        self.cluster_config = Path(cluster_config)
        self.tick_seconds = tick_seconds
        self.people_kubeconfig = self.var_dir / "kubeconfig"
        self.jobdash_kubeconfig = self.var_dir / "jobdash.kubeconfig"

    def start(self) -> EmbeddedStack:
        tls = self.var_dir / "webhook-tls"
        # The certificates compose's `webhook-certs` makes, kept between runs; and the API
        # server's own, so that kubectl sends its token (it does so only over HTTPS).
        subprocess.run(["sh", str(ENTRYPOINT), "certs", str(tls)], check=True, capture_output=True)
        api_cert, api_key = self.var_dir / "kubesim-tls" / "tls.crt", self.var_dir / "kubesim-tls" / "tls.key"
        subprocess.run(
            ["sh", str(ENTRYPOINT), "self-signed", str(api_cert), str(api_key)],
            check=True,
            capture_output=True,
            env={**os.environ, "JOBDASH_TLS_SANS": "DNS:localhost,IP:127.0.0.1"},
        )
        self.listener = WebhookListener(str(tls / "webhook.crt"), str(tls / "webhook.key"), str(tls / "client-ca.crt"))
        self.listener.start()
        config = load(self.cluster_config)
        webhook = registration.webhook_configuration((tls / "webhook.crt").read_bytes())
        config.services[registration.service_key(webhook)] = self.listener.url
        config.admission_config = str(
            registration.admission_configuration(tls, tls / "apiserver.crt", tls / "apiserver.key")
        )
        config.objects.append(webhook)
        # Created with the cluster, as a fresh cluster's installer would: every start is a
        # new cluster, so there is nothing to reconcile with.
        config.objects += rbac.cluster_objects(rbac.MEMBERS)
        config.objects.append(registration.queued_deletes_configuration((tls / "webhook.crt").read_bytes()))
        self.cluster = Cluster(config)
        self.server = KubesimServer(self.cluster, "127.0.0.1", 0, tls=(str(api_cert), str(api_key)))
        own = set(settings.JOBDASH_OWN_IDENTITIES)
        people = [u for u in config.users if u["username"] not in own]
        ca = api_cert.read_bytes()
        write_kubeconfig(self.people_kubeconfig, self.server.url, people, ca_pem=ca)  # current: the first, a member
        ours = [u for u in config.users if u["username"] in own]
        write_kubeconfig(self.jobdash_kubeconfig, self.server.url, ours, ca_pem=ca)
        self.server.start_background()
        self.cluster.start()
        self.gateway = KubeGateway.from_settings("kubeconfig", str(self.jobdash_kubeconfig))
        self.loop = DispatcherLoop(Dispatcher(self.gateway), tick_seconds=self.tick_seconds, leader="none")
        self.gateway.start(on_event=self.loop.on_cluster_event, timeout=30)
        self.loop.start()
        return self

    def member_command(self, manifest: str = "examples/<any>.yaml") -> str:
        """What `make run` tells a person to type to create a job as the demo member. kubectl's
        own validation stays on: kubesim serves the OpenAPI schemas it checks against."""
        return shlex.join(
            ["kubectl", "--kubeconfig", str(self.people_kubeconfig), "-n", "team-a", "create", "-f", manifest]
        )

    def stop(self) -> None:
        self.loop.stop()
        self.gateway.stop()
        self.cluster.stop()
        self.server.stop()
        self.listener.stop()

    def __enter__(self) -> EmbeddedStack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
