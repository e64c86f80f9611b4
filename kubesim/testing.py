"""In-process kubesim for tests: ``with running_kubesim(config) as sim: ...``.

The HTTP server listens on 127.0.0.1 on a free port in a background thread and a
kubeconfig for it is written to a temporary file, so code under test talks to it
through the official client exactly as it would to a cluster:

    with running_kubesim({"namespaces": [{"name": "team-a", "quota": {"pods": "4"}}]},
                         manual_clock=True) as sim:
        kubernetes.config.load_kube_config(config_file=sim.kubeconfig_path)
        ...                             # or: api = CustomObjectsApi(sim.api_client("alice"))
        sim.advance(30)                 # virtual time: controllers react, pods start, ...
        sim.cluster.pods("team-a")      # direct, read-only inspection
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .clock import Clock, ManualClock
from .cluster import Cluster
from .config import Config, from_dict, write_kubeconfig
from .manifests import (
    batch_job_manifest,
    jaxjob_manifest,
    jobset_manifest,
    mpijob_manifest,
    paddlejob_manifest,
    pytorchjob_manifest,
    tfjob_manifest,
    training_runtime_manifest,
    trainjob_manifest,
    xgboostjob_manifest,
)
from .server import KubesimServer
from .tls import serving_certificate

__all__ = [
    "RunningKubesim",
    "batch_job_manifest",
    "jaxjob_manifest",
    "jobset_manifest",
    "mpijob_manifest",
    "paddlejob_manifest",
    "pytorchjob_manifest",
    "running_kubesim",
    "tfjob_manifest",
    "training_runtime_manifest",
    "trainjob_manifest",
    "xgboostjob_manifest",
]


class RunningKubesim:
    def __init__(self, cluster: Cluster, server: KubesimServer, kubeconfig_path: str, workdir: str):
        self.cluster = cluster
        self.server = server
        self.url = server.url
        self.kubeconfig_path = kubeconfig_path
        self._workdir = workdir
        self._stopped = False
        self.ca_pem: bytes | None = None  # the CA of the HTTPS certificate (tls=True)

    @property
    def model(self):
        """The object store (read-only dicts; see kubesim.model)."""
        return self.cluster.store

    @property
    def clock(self) -> Clock:
        return self.cluster.clock

    def token_for(self, username: str) -> str:
        return self.cluster.token_for(username)

    def api_client(self, username: str | None = None):
        """An official-client ApiClient authenticated as ``username`` (default: the first user)."""
        from kubernetes import client

        users = self.cluster.config.users
        token = self.token_for(username) if username else users[0]["token"]
        configuration = client.Configuration()
        configuration.host = self.url
        if self.ca_pem is not None:
            ca_file = Path(self._workdir) / "tls" / "ca.crt"
            configuration.ssl_ca_cert = str(ca_file)
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return client.ApiClient(configuration)

    def advance(self, seconds: float) -> None:
        self.cluster.advance(seconds)

    def settle(self) -> int:
        return self.cluster.settle()

    # Node events, through the API as a kubelet or kubectl makes them; the controllers react
    # at the next settle/advance (manual clock) or by themselves (real clock).

    def fail_node(self, name: str, status: str = "Unknown") -> dict:
        """Ready goes Unknown (kubelet silent: the unreachable taints) or False (not-ready taints)."""
        return self.cluster.fail_node(name, status)

    def recover_node(self, name: str) -> dict:
        return self.cluster.recover_node(name)

    def cordon(self, name: str) -> dict:
        return self.cluster.cordon(name)

    def uncordon(self, name: str) -> dict:
        return self.cluster.cordon(name, unschedulable=False)

    def drain(self, name: str) -> list[str]:
        """Cordon, then evict every pod on the node through the Eviction API."""
        return self.cluster.drain(name)

    def delete_node(self, name: str) -> dict:
        """The Node object is deleted; PodGC deletes its pods after its 40 s quarantine."""
        return self.cluster.delete_node(name)

    def lend(self, name: str, until: float, pool: str | None = None, notice_seconds: float | None = None) -> dict:
        """Annotate the node ``jobdash.io/lent-until`` (and -pool, -notice-seconds) and uncordon it."""
        return self.cluster.lend(name, until, pool, notice_seconds)

    def reclaim(self, name: str) -> list[str]:
        """Drain the node through the Eviction API and delete it."""
        return self.cluster.reclaim(name)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.cluster.stop()
        self.server.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)


@contextlib.contextmanager
def running_kubesim(
    config: Config | dict | None = None,
    *,
    manual_clock: bool = False,
    clock: Clock | None = None,
    kubeconfig_path: str | None = None,
    verbose: bool = False,
    tls: bool | None = None,
) -> Iterator[RunningKubesim]:
    """Start kubesim in this process; with ``manual_clock`` (or ``clock: manual`` in the config)
    no controller thread runs: time and reactions move only by ``advance``/``settle``.
    ``tls`` (default: the config's ``tls``): serve HTTPS with a self-signed CA, written into
    the kubeconfig, as kubectl needs; ``sim.ca_pem`` is the CA."""
    cfg = config if isinstance(config, Config) else from_dict(config)
    if clock is None and manual_clock:
        clock = ManualClock(cfg.start_time or ManualClock.DEFAULT_START)
    cluster = Cluster(cfg, clock)
    workdir = tempfile.mkdtemp(prefix="kubesim-")
    certificate = serving_certificate(Path(workdir) / "tls") if (cfg.tls if tls is None else tls) else None
    server = KubesimServer(cluster, "127.0.0.1", 0, verbose=verbose, tls=certificate.pair if certificate else None)
    path = kubeconfig_path or str(Path(workdir) / "kubeconfig")
    ca_pem = certificate.ca_pem if certificate else None
    write_kubeconfig(path, server.url, cfg.users, ca_pem=ca_pem)
    server.start_background()
    cluster.start()
    sim = RunningKubesim(cluster, server, path, workdir)
    sim.ca_pem = ca_pem
    try:
        yield sim
    finally:
        sim.stop()
