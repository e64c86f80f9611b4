"""A whole simulated cluster: store, API semantics, admission, controllers, users, faults.

``Cluster`` is what the HTTP server serves and what tests inspect. With a manual clock
nothing runs in the background: call ``settle()`` to let the controllers react at the
current time and ``advance(seconds)`` to move time on (stopping at every controller
deadline). With a real clock ``start()`` runs the controllers in a thread.
"""

from __future__ import annotations

import copy

from .admission import Admission, UserInfo
from .api import Api
from .clock import Clock, ManualClock, RealClock
from .config import Config, from_dict, node_objects
from .controllers import Controllers, Kubelet, WorkClock
from .errors import ApiError
from .faults import Faults
from .model import Store
from .operator import JobPods, TrainingOperator
from .quota import QuotaTracker
from .resources import BY_API_VERSION_KIND, NAMESPACES, NODES, PODS, RESOURCEQUOTAS, TFJOBS
from .scheduler import Scheduler
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
        self.index = JobPods(self.store)
        self.operator = TrainingOperator(self.api, self.index, cfg.backoff_seconds, cfg.max_backoff_seconds)
        self.scheduler = Scheduler(self.store)
        self.kubelet = Kubelet(self.store, clock, cfg.start_delay_seconds)
        self.work = WorkClock(self.store, self.index, self.kubelet, cfg.default_duration_seconds)
        self.controllers = Controllers(clock, [self.operator, self.scheduler, self.kubelet, self.work])
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
        for group in self.config.nodes:
            for node in node_objects(group):
                create(NODES, "", node, internal=True)
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

    # --- inspection helpers (read-only views) --------------------------------------------------

    def pods(self, namespace: str | None = None, job: str | None = None) -> list[dict]:
        pods = self.store.items(PODS, namespace)
        if job is not None:
            pods = [p for p in pods if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name") == job]
        return sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))

    def tfjob(self, namespace: str, name: str) -> dict | None:
        return self.store.find(TFJOBS, namespace, name)

    def quota_status(self, namespace: str, name: str = "quota") -> dict:
        return self.store.get(RESOURCEQUOTAS, namespace, name).get("status") or {}

    def create_tfjob(self, manifest: dict, user: str | None = None) -> dict:
        """Create a TFJob without HTTP (webhooks still run), e.g. from a trace replay."""
        userinfo = UserInfo(user or "kubernetes-admin", ("system:authenticated",))
        namespace = (manifest.get("metadata") or {}).get("namespace", "default")
        obj, _warnings = self.api.create(TFJOBS, namespace, manifest, userinfo)
        return obj


__all__ = ["ApiError", "Cluster"]
