"""The lender's controller: the config's ``lent_pools`` come and go on kubesim's clock.

At the lend time a pool's nodes register (Ready, schedulable, annotated
``jobdash.io/lent-until``, ``-pool`` and ``-notice-seconds``, with a Lease); at the
reclaim time minus the notice they are cordoned; at the reclaim time their pods are
evicted through the Eviction API and the nodes deleted (nodeops.reclaim); then the next
window. Everything goes through the API as a real lender's operator would, so jobdash
sees only what it would see of one. A window kubesim starts inside is lent at once; one
the clock jumped over entirely (a real clock's stall) is skipped.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from . import nodeops
from .api import Api
from .clock import rfc3339, rfc3339_micro
from .config import node_names, node_objects
from .errors import ApiError
from .resources import LEASES, NODES
from .tide import Schedule, Window

NODE_LEASE_NAMESPACE = "kube-node-lease"
WAITING, LENT, CORDONED = "waiting", "lent", "cordoned"


@dataclass
class Pool:
    name: str
    node_groups: list[dict]
    schedule: Schedule
    notice_seconds: float
    window: Window | None = None  # the current or next window; None: never again
    phase: str = WAITING

    def deadline(self) -> float | None:
        if self.window is None:
            return None
        lend, reclaim = self.window
        if self.phase == WAITING:
            return lend
        return reclaim - self.notice_seconds if self.phase == LENT else reclaim


class LentPools:
    name = "lent-pools"

    def __init__(self, api: Api, pools: list[dict]):
        self.api = api
        self.started = api.clock.now()
        self._lock = threading.Lock()
        self.pools = [Pool(p["name"], p["node_groups"], p["schedule"], p["notice_seconds"]) for p in pools]
        for pool in self.pools:
            pool.window = pool.schedule.next_window(self.started, self.started)

    def next_deadline(self) -> float | None:
        with self._lock:
            return min((d for p in self.pools if (d := p.deadline()) is not None), default=None)

    def step(self, now: float) -> bool:
        did = False
        with self._lock:
            for pool in self.pools:
                while (deadline := pool.deadline()) is not None and deadline <= now:
                    self._advance(pool, now)
                    did = True
        return did

    def _advance(self, pool: Pool, now: float) -> None:
        """One transition of the pool: lend, cordon, or reclaim and move to the next window."""
        assert pool.window is not None
        lend, reclaim = pool.window
        if pool.phase == WAITING and now < reclaim:
            self._lend(pool, reclaim)
            pool.phase = LENT
        elif pool.phase == LENT:
            for name in self._node_names(pool):
                self._cordon(name)
            pool.phase = CORDONED
        else:  # reclaimed, or a whole window missed while waiting
            if pool.phase != WAITING:
                for name in self._node_names(pool):
                    self._reclaim(name)
            # The next window starts at or after this one's end (nightly windows never overlap);
            # an `until` pool has none.
            pool.window = pool.schedule.next_window(max(reclaim, now), self.started)
            pool.phase = WAITING

    def _node_names(self, pool: Pool) -> list[str]:
        return [name for group in pool.node_groups for name in node_names(group)]

    def _cordon(self, name: str) -> None:
        try:
            nodeops.set_unschedulable(self.api, name, True)
        except ApiError as error:
            if error.code != 404:  # someone deleted it already: nothing to cordon
                raise

    def _lend(self, pool: Pool, reclaim: float) -> None:
        now = rfc3339(self.api.clock.now())
        annotations = nodeops.lent_annotations(reclaim, pool.name, pool.notice_seconds)
        for group in pool.node_groups:
            group = {**group, "annotations": {**(group.get("annotations") or {}), **annotations}}
            for node in node_objects(group):
                for condition in node["status"]["conditions"]:  # the kubelet's first status post
                    condition.update(lastHeartbeatTime=now, lastTransitionTime=now)
                name = node["metadata"]["name"]
                try:
                    self.api.create(NODES, "", node, internal=True)
                except ApiError as error:
                    if error.code != 409:
                        raise
                    # Someone kept or re-registered it: lend what is there.
                    nodeops.lend(self.api, name, reclaim, pool.name, pool.notice_seconds)
                self._lease(name)

    def _lease(self, name: str) -> None:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": 40,
                "renewTime": rfc3339_micro(self.api.clock.now()),
            },
        }
        try:
            self.api.create(LEASES, NODE_LEASE_NAMESPACE, lease, internal=True)
        except ApiError as error:
            if error.code not in (404, 409):  # no lease namespace, or the lease is still there
                raise

    def _reclaim(self, name: str) -> None:
        try:
            nodeops.reclaim(self.api, name)
        except ApiError as error:
            if error.code != 404:  # someone deleted it already
                raise
        try:
            self.api.delete(LEASES, NODE_LEASE_NAMESPACE, name)
        except ApiError as error:
            if error.code != 404:
                raise
