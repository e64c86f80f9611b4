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

With JOBDASH_EMBEDDED_CLUSTERS=2 there are two clusters (issue 49): `east` as above and
`west` (embedded_cluster_west.yaml's nodes, the same namespaces and quotas), each its own
kubesim with the webhook registered; west's kubeconfigs are under `var/west/`, and
`var/clusters.yaml` names both (JOBDASH_CLUSTERS' format): one queue dispatches to both.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings

from jobdash.cluster.factory import gateway_of
from jobdash.clusters.config import ClusterConfig, write
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.loop import DispatcherLoop
from kubesim.cluster import Cluster
from kubesim.config import Config, load, write_kubeconfig
from kubesim.server import KubesimServer
from webhooks import registration
from webhooks.listener import WebhookListener

from . import rbac

ENTRYPOINT = Path(__file__).resolve().parents[2] / "deploy/docker/entrypoint.sh"
WEST_NODES = Path(__file__).resolve().parent / "embedded_cluster_west.yaml"
NAMES = ("east", "west")
LABELS = {"east": {"gpu": "a100", "region": "east"}, "west": {"gpu": "h100", "region": "west"}}


@dataclass
class EmbeddedCluster:
    """One simulated cluster: its kubesim, its API server and the kubeconfigs for it."""

    name: str
    cluster: Cluster
    server: KubesimServer
    people_kubeconfig: Path
    jobdash_kubeconfig: Path


class EmbeddedStack:
    def __init__(self, var_dir: Path, cluster_config: Path, tick_seconds: float, clusters: int = 1):
        if clusters not in (1, 2):
            raise ValueError(f"JOBDASH_EMBEDDED_CLUSTERS must be 1 or 2, not {clusters}")
        self.var_dir = Path(var_dir)
        self.cluster_config = Path(cluster_config)
        self.tick_seconds = tick_seconds
        self.count = clusters
        self.people_kubeconfig = self.var_dir / "kubeconfig"
        self.jobdash_kubeconfig = self.var_dir / "jobdash.kubeconfig"
        self.clusters: list[EmbeddedCluster] = []

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
        for number in range(self.count):
            config = load(self.cluster_config)
            directory = self.var_dir if number == 0 else self.var_dir / NAMES[number]
            if number:
                directory.mkdir(parents=True, exist_ok=True)
                config.nodes = yaml.safe_load(WEST_NODES.read_text())["nodes"]
            self.clusters.append(self._start_cluster(NAMES[number], config, directory, tls, (api_cert, api_key)))
        self.cluster, self.server = self.clusters[0].cluster, self.clusters[0].server
        if self.count == 1:
            self.gateway = gateway_of([ClusterConfig("east", str(self.jobdash_kubeconfig))])
        else:
            configs = [ClusterConfig(c.name, str(c.jobdash_kubeconfig), labels=LABELS[c.name]) for c in self.clusters]
            self.clusters_file = write(self.var_dir / "clusters.yaml", configs)
            self.gateway = gateway_of(configs)
        self.loop = DispatcherLoop(Dispatcher(self.gateway), tick_seconds=self.tick_seconds, leader="none")
        self.gateway.start(on_event=self.loop.on_cluster_event, timeout=30)
        self.loop.start()
        return self

    def _start_cluster(
        self, name: str, config: Config, directory: Path, tls: Path, api_tls: tuple[Path, Path]
    ) -> EmbeddedCluster:
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
        cluster = Cluster(config)
        server = KubesimServer(cluster, "127.0.0.1", 0, tls=(str(api_tls[0]), str(api_tls[1])))
        own = set(settings.JOBDASH_OWN_IDENTITIES)
        people = [u for u in config.users if u["username"] not in own]
        ca = api_tls[0].read_bytes()
        embedded = EmbeddedCluster(name, cluster, server, directory / "kubeconfig", directory / "jobdash.kubeconfig")
        write_kubeconfig(embedded.people_kubeconfig, server.url, people, ca_pem=ca)  # current: the first, a member
        ours = [u for u in config.users if u["username"] in own]
        write_kubeconfig(embedded.jobdash_kubeconfig, server.url, ours, ca_pem=ca)
        server.start_background()
        cluster.start()
        return embedded

    def member_command(self, manifest: str = "examples/<any>.yaml", cluster: int = 0) -> str:
        """What `make run` tells a person to type to create a job as the demo member. kubectl's
        own validation stays on: kubesim serves the OpenAPI schemas it checks against."""
        kubeconfig = self.clusters[cluster].people_kubeconfig
        return shlex.join(["kubectl", "--kubeconfig", str(kubeconfig), "-n", "team-a", "create", "-f", manifest])

    def stop(self) -> None:
        self.loop.stop()
        self.gateway.stop()
        for embedded in self.clusters:
            embedded.cluster.stop()
            embedded.server.stop()
        self.listener.stop()

    def __enter__(self) -> EmbeddedStack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
