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
from .server import KubesimServer


class RunningKubesim:
    def __init__(self, cluster: Cluster, server: KubesimServer, kubeconfig_path: str, workdir: str):
        self.cluster = cluster
        self.server = server
        self.url = server.url
        self.kubeconfig_path = kubeconfig_path
        self._workdir = workdir
        self._stopped = False

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
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return client.ApiClient(configuration)

    def advance(self, seconds: float) -> None:
        self.cluster.advance(seconds)

    def settle(self) -> int:
        return self.cluster.settle()

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
) -> Iterator[RunningKubesim]:
    """Start kubesim in this process; with ``manual_clock`` (or ``clock: manual`` in the config)
    no controller thread runs: time and reactions move only by ``advance``/``settle``."""
    cfg = config if isinstance(config, Config) else from_dict(config)
    if clock is None and manual_clock:
        clock = ManualClock(cfg.start_time or ManualClock.DEFAULT_START)
    cluster = Cluster(cfg, clock)
    server = KubesimServer(cluster, "127.0.0.1", 0, verbose=verbose)
    workdir = tempfile.mkdtemp(prefix="kubesim-")
    path = kubeconfig_path or str(Path(workdir) / "kubeconfig")
    write_kubeconfig(path, server.url, cfg.users)
    server.start_background()
    cluster.start()
    sim = RunningKubesim(cluster, server, path, workdir)
    try:
        yield sim
    finally:
        sim.stop()


def tfjob_manifest(
    name: str,
    namespace: str = "default",
    *,
    workers: int = 1,
    chief: bool = False,
    ps: int = 0,
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    duration: float | None = None,
    fail: bool = False,
    suspend: bool | None = None,
    success_policy: str | None = None,
    clean_pod_policy: str | None = None,
    restart_policy: str = "Never",
    backoff_limit: int | None = None,
    labels: dict | None = None,
    tolerations: list | None = None,
    node_selector: dict | None = None,
) -> dict:
    """A TFJob manifest for tests: ``workers`` Workers (+ a Chief, + ``ps`` PS) of the given size.

    ``duration`` and ``fail`` become the kubesim.io annotations that drive the work clock.
    """
    resources = {"cpu": cpu, "memory": memory}
    if gpu:
        resources["nvidia.com/gpu"] = str(gpu)
    pod_spec: dict = {
        "containers": [
            {
                "name": "tensorflow",
                "image": "tensorflow/tensorflow:2.15.0",
                "resources": {"requests": dict(resources), "limits": dict(resources)},
            }
        ]
    }
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if node_selector:
        pod_spec["nodeSelector"] = node_selector

    def replica(count: int) -> dict:
        return {"replicas": count, "restartPolicy": restart_policy, "template": {"spec": pod_spec}}

    specs = {}
    if chief:
        specs["Chief"] = replica(1)
    if ps:
        specs["PS"] = replica(ps)
    if workers:
        specs["Worker"] = replica(workers)
    annotations = {}
    if duration is not None:
        annotations["kubesim.io/duration-seconds"] = str(duration)
    if fail:
        annotations["kubesim.io/fail"] = "true"
    spec: dict = {"tfReplicaSpecs": specs}
    run_policy: dict[str, object] = {}
    if suspend is not None:
        run_policy["suspend"] = suspend
    if clean_pod_policy is not None:
        run_policy["cleanPodPolicy"] = clean_pod_policy
    if backoff_limit is not None:
        run_policy["backoffLimit"] = backoff_limit
    if run_policy:
        spec["runPolicy"] = run_policy
    if success_policy is not None:
        spec["successPolicy"] = success_policy
    metadata: dict = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": metadata, "spec": spec}
