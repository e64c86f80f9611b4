"""A whole simulated cluster: store, API semantics, admission, controllers, users, faults.

``Cluster`` is what the HTTP server serves and what tests inspect. With a manual clock
nothing runs in the background: call ``settle()`` to let the controllers react at the
current time and ``advance(seconds)`` to move time on (stopping at every controller
deadline). With a real clock ``start()`` runs the controllers in a thread.
"""

from __future__ import annotations

import copy
import threading

from . import nodeops
from .admission import Admission, UserInfo
from .api import Api
from .barepods import BarePods
from .clock import Clock, ManualClock, RealClock, rfc3339, rfc3339_micro
from .config import Config, from_dict, node_objects
from .controllers import Controllers, Kubelet, WorkClock
from .errors import ApiError
from .faults import Faults
from .jobcontroller import JobController
from .jobsetcontroller import JobSetController
from .lentpools import NODE_LEASE_NAMESPACE, LentPools
from .model import Store
from .mpioperator import MPIOperator
from .nodelifecycle import NodeLifecycle
from .operator import TrainingOperator
from .ownership import Owners
from .quota import QuotaTracker
from .rbac import Authorizer
from .rbac_defaults import Aggregator, default_objects
from .resources import (
    ALL,
    BY_API_VERSION_KIND,
    CLUSTERROLES,
    JOBS,
    JOBSETS,
    LEASES,
    MPIJOBS,
    NAMESPACES,
    NODES,
    PODS,
    RBAC_TYPES,
    RESOURCEQUOTAS,
    SERVICES,
    TFJOBS,
    TRAINING_TYPES,
    TRAINJOBS,
    ResourceType,
)
from .scheduler import Scheduler
from .service import kubernetes_service
from .trainercontroller import TrainJobController
from .webhook_clients import ClientCredentials


class Cluster:
    def __init__(self, config: Config | dict | None = None, clock: Clock | None = None):
        self.config = config if isinstance(config, Config) else from_dict(config)
        cfg = self.config
        if clock is None:
            clock = (
                ManualClock(cfg.start_time or ManualClock.DEFAULT_START)
                if cfg.clock == "manual"
                else RealClock(cfg.speed, cfg.start_time)
            )
        self.clock = clock
        self.store = Store(clock, history=cfg.watch_history)
        self.quota = QuotaTracker(self.store)
        credentials = ClientCredentials.from_admission_config(cfg.admission_config) if cfg.admission_config else None
        self.admission = Admission(self.store, cfg.services, credentials)
        self.audit: list[dict] = []
        self.api = Api(self.store, self.quota, self.admission, self.audit)
        self.faults = Faults(cfg.faults)
        # Cut off (a partition, issue 49): the API server answers nothing, its watches end,
        # while the cluster behind it runs on. Only the /kubesim/ control plane still answers.
        self.cut = threading.Event()
        self.authorizer = Authorizer(self.store, cfg.rbac, RBAC_TYPES)
        self.store.hooks.append(Aggregator(self.store, CLUSTERROLES).on_event)
        self.owners = Owners(self.store, (PODS, JOBS, JOBSETS))
        backoff = (cfg.backoff_seconds, cfg.max_backoff_seconds)
        self.operator = TrainingOperator(self.api, self.owners, *backoff)
        self.mpi_operator = MPIOperator(self.api, self.owners, *backoff)
        self.job_controller = JobController(self.api, self.owners, *backoff)
        self.jobset_controller = JobSetController(self.api, self.owners, self.job_controller, *backoff)
        self.trainer = TrainJobController(self.api, self.owners, self.jobset_controller, *backoff)
        self.scheduler = Scheduler(self.store, cfg.scheduler_scoring, cfg.scheduler_resources, cfg.scheduler_shape)
        self.kubelet = Kubelet(self.store, clock, cfg.start_delay_seconds, cfg.unpullable_images)
        self.node_lifecycle = NodeLifecycle(self.store)
        self.lent_pools = LentPools(self.api, cfg.lent_pools)
        self.work = WorkClock(
            self.store,
            self.owners,
            self.kubelet,
            cfg.default_duration_seconds,
            cfg.default_checkpoint_seconds,
            api=self.api,
        )
        for rt in TRAINING_TYPES:
            self.work.register(rt, self.operator)
        self.work.register(MPIJOBS, self.mpi_operator)
        self.work.register(JOBS, self.job_controller)
        self.work.register(JOBSETS, self.jobset_controller)
        self.work.register(TRAINJOBS, self.trainer)
        self.work.register(PODS, BarePods())
        # Owners before what they own: a TrainJob's JobSet, Jobs and pods appear in one step.
        self.controllers = Controllers(
            clock,
            [
                self.operator,
                self.mpi_operator,
                self.trainer,
                self.jobset_controller,
                self.job_controller,
                self.lent_pools,
                self.node_lifecycle,
                self.scheduler,
                self.kubelet,
                self.work,
            ],
        )
        self.store.hooks.append(self.controllers.notify)
        self.users: dict[str, UserInfo] = {
            u["token"]: UserInfo(u["username"], tuple(u.get("groups") or ()), u.get("uid", "")) for u in cfg.users
        }
        self._bootstrap()

    def _bootstrap(self) -> None:
        create = self.api.create
        names = ["default"] + [ns["name"] for ns in self.config.namespaces if ns["name"] != "default"]
        labels = {ns["name"]: ns.get("labels") or {} for ns in self.config.namespaces}
        for name in names:
            create(
                NAMESPACES,
                "",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": name, "labels": dict(labels.get(name, {}))},
                },
                internal=True,
            )
        create(SERVICES, "default", kubernetes_service(), internal=True)
        for ns in self.config.namespaces:
            if ns.get("quota"):
                create(
                    RESOURCEQUOTAS,
                    ns["name"],
                    {
                        "apiVersion": "v1",
                        "kind": "ResourceQuota",
                        "metadata": {"name": ns.get("quota_name", "quota"), "namespace": ns["name"]},
                        "spec": {"hard": {k: str(v) for k, v in ns["quota"].items()}},
                    },
                    internal=True,
                )
        nodes = [node for group in self.config.nodes for node in node_objects(group)]
        started = rfc3339(self.clock.now())
        for node in nodes:  # the kubelet's first status post
            for condition in node["status"]["conditions"]:
                condition.setdefault("lastHeartbeatTime", started)
                condition.setdefault("lastTransitionTime", started)
        for node in nodes:
            create(NODES, "", node, internal=True)
        self._node_leases([n["metadata"]["name"] for n in nodes])
        self.lent_pools.step(self.clock.now())  # started inside a window: its nodes are there from the start
        if self.config.rbac:
            for obj in default_objects():
                create(RBAC_TYPES[obj["kind"]], "", obj, internal=True)
        for manifest in self.config.objects:
            rt = BY_API_VERSION_KIND.get((manifest.get("apiVersion", ""), manifest.get("kind", "")))
            if rt is None:
                raise ValueError(f"objects: kubesim does not serve {manifest.get('apiVersion')}/{manifest.get('kind')}")
            create(
                rt,
                (manifest.get("metadata") or {}).get("namespace", "default") if rt.namespaced else "",
                copy.deepcopy(manifest),
                internal=True,
            )

    def _node_leases(self, names: list[str]) -> None:
        """kube-node-lease: each node's heartbeat Lease, as its kubelet keeps it (``kubectl describe node``)."""
        create = self.api.create
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NODE_LEASE_NAMESPACE}}
        create(NAMESPACES, "", namespace, internal=True)
        now = rfc3339_micro(self.clock.now())
        for name in names:
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now},
            }
            create(LEASES, NODE_LEASE_NAMESPACE, lease, internal=True)

    # --- identities ------------------------------------------------------------------------

    def authenticate(self, token: str | None) -> UserInfo | None:
        return self.users.get(token) if token else None

    def token_for(self, username: str) -> str:
        for token, user in self.users.items():
            if user.username == username:
                return token
        raise KeyError(f"no kubesim user {username!r}")

    # --- time ------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the controllers in a background thread (real clock only)."""
        if not self.clock.manual:
            self.controllers.start()

    def stop(self) -> None:
        self.controllers.stop()

    def settle(self) -> int:
        return self.controllers.settle()

    def advance(self, seconds: float) -> None:
        self.controllers.advance(seconds)  # RuntimeError on a real clock

    # --- faults ------------------------------------------------------------------------------

    def drop_watches(self, abrupt: bool = False) -> int:
        return self.store.drop_watches(abrupt)

    def cut_off(self, off: bool) -> None:
        """Cut the API server off (`off`) or bring it back: cut, every request is closed
        unanswered and every watch ends abruptly, as a partition looks to a client."""
        if off:
            self.cut.set()
            self.store.drop_watches(True)
        else:
            self.cut.clear()

    # --- nodes ---------------------------------------------------------------------------------

    def fail_node(self, name: str, status: str = "Unknown") -> dict:
        """The node's Ready condition goes Unknown (its kubelet silent) or False (NotReady)."""
        if status not in ("Unknown", "False"):
            raise ValueError("a failed node's Ready status is Unknown or False")
        return nodeops.set_ready(self.api, name, status)

    def recover_node(self, name: str) -> dict:
        return nodeops.set_ready(self.api, name, "True")

    def cordon(self, name: str, unschedulable: bool = True) -> dict:
        return nodeops.set_unschedulable(self.api, name, unschedulable)

    def drain(self, name: str) -> list[str]:
        return nodeops.drain(self.api, name)

    def delete_node(self, name: str) -> dict:
        return nodeops.delete_node(self.api, name)

    def lend(self, name: str, until: float, pool: str | None = None, notice_seconds: float | None = None) -> dict:
        """Annotate the node lent until ``until`` (epoch seconds) and uncordon it, as an operator would."""
        return nodeops.lend(self.api, name, until, pool, notice_seconds)

    def reclaim(self, name: str) -> list[str]:
        """Evict the node's pods (Eviction API) and delete it; returns the evicted pods."""
        return nodeops.reclaim(self.api, name)

    # --- inspection helpers (read-only views) --------------------------------------------------

    def pods(self, namespace: str | None = None, job: str | None = None) -> list[dict]:
        pods = self.store.items(PODS, namespace)
        if job is not None:
            pods = [p for p in pods if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name") == job]
        return sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))

    def tfjob(self, namespace: str, name: str) -> dict | None:
        return self.store.find(TFJOBS, namespace, name)

    def job(self, kind: str, namespace: str, name: str) -> dict | None:
        """Any served object: ``kind`` is ``<plural>.<group>`` ("pytorchjobs.kubeflow.org",
        "jobs.batch"), a plural ("jobsets") or a Kind ("TrainJob")."""
        rt = resource_type(kind)
        return self.store.find(rt, namespace if rt.namespaced else "", name)

    def pods_of(self, kind: str, namespace: str, name: str) -> list[dict]:
        """The pods under a job of any kind, down its controller references (TrainJob ->
        JobSet -> Jobs -> pods; MPIJob -> workers and launcher Job -> pod), sorted by name."""
        top = self.job(kind, namespace, name)
        if top is None:
            return []
        pods: list[dict] = []
        owners = [top]
        while owners:
            owner = owners.pop()
            pods += self.owners.children(owner, PODS)
            owners += self.owners.children(owner, JOBS) + self.owners.children(owner, JOBSETS)
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def quota_status(self, namespace: str, name: str = "quota") -> dict:
        return self.store.get(RESOURCEQUOTAS, namespace, name).get("status") or {}

    def create_tfjob(self, manifest: dict, user: str | None = None) -> dict:
        """Create a TFJob without HTTP (webhooks still run), e.g. from a trace replay."""
        userinfo = UserInfo(user or "kubernetes-admin", ("system:authenticated",))
        namespace = (manifest.get("metadata") or {}).get("namespace", "default")
        obj, _warnings = self.api.create(TFJOBS, namespace, manifest, userinfo)
        return obj

    def create(self, manifest: dict, user: str | None = None) -> dict:
        """Create any served object from its manifest without HTTP (webhooks still run)."""
        rt = BY_API_VERSION_KIND.get((manifest.get("apiVersion", ""), manifest.get("kind", "")))
        if rt is None:
            raise ValueError(f"kubesim does not serve {manifest.get('apiVersion')}/{manifest.get('kind')}")
        userinfo = UserInfo(user or "kubernetes-admin", ("system:authenticated",))
        namespace = (manifest.get("metadata") or {}).get("namespace", "default") if rt.namespaced else ""
        obj, _warnings = self.api.create(rt, namespace, manifest, userinfo)
        return obj


def resource_type(kind: str) -> ResourceType:
    for rt in ALL:
        if kind in (rt.qualified, rt.plural, rt.kind):
            return rt
    raise KeyError(f"kubesim serves no {kind!r}")


__all__ = ["ApiError", "Cluster", "resource_type"]
