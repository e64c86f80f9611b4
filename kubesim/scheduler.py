"""The default scheduler, simplified: one pod at a time, in arrival order, not gang-aware.

A pod with scheduling gates is not queued (the SchedulingGates PreEnqueue plugin) until its
last gate is removed. Filters as kube-scheduler's plugins, in their order (``nodefit``):
NodeUnschedulable (unless the pod tolerates node.kubernetes.io/unschedulable),
TaintToleration (NoSchedule/NoExecute), NodeAffinity (nodeSelector and required node
affinity), NodeResourcesFit (free allocatable capacity incl. the pod count). Scores by
NodeResourcesFit's scoring strategy alone: LeastAllocated (kube-scheduler's default:
spread), MostAllocated (bin-packing) or RequestedToCapacityRatio (a shape of utilization
-> score), over weighted resources; ties go to the first node by name (kube-scheduler
picks one of them at random). The other score plugins (BalancedAllocation, preferred
affinity, topology spread, ...) are not modelled. After the filters, the GPU-sharing
extenders (``extender.py``) check the cards of the nodes that passed and, at bind, write the
cards chosen on the pod. A pod that fits nowhere gets PodScheduled=False/Unschedulable with
kube-scheduler's "0/N nodes are available: ..." message and is retried when capacity
is freed. Because pods are bound one by one as they come, two jobs can each get part of
their gang -- the node-level half of the deadlock.

Node allocations (sum of requests of bound, non-terminated pods) are kept
incrementally from store events.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Mapping

from .clock import rfc3339
from .extender import DeviceExtenders
from .model import Event, Store, evolve, key_of
from .nodefit import SCORING_STRATEGIES, Scorer, filter_reason, nonzero_requests
from .quota import canonical, is_terminal, pod_requests
from .resources import NODES, PODS, ResourceType

Key = tuple[str, str]
__all__ = ["SCORING_STRATEGIES", "Scheduler", "set_pod_condition"]


def set_pod_condition(status: dict, ctype: str, value: str, now: float, reason: str = "", message: str = "") -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != ctype]
    condition = {"type": ctype, "status": value, "lastProbeTime": None, "lastTransitionTime": rfc3339(now)}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    status["conditions"] = conditions + [condition]


class Scheduler:
    """default-scheduler, one pod at a time in arrival order, not gang-aware; scoring by
    `scoring` (SCORING_STRATEGIES) over `resources` with `shape` (RequestedToCapacityRatio)."""

    name = "scheduler"

    def __init__(
        self,
        store: Store,
        scoring: str = "LeastAllocated",
        resources: list[dict] | None = None,
        shape: list[dict] | None = None,
    ):
        if scoring not in SCORING_STRATEGIES:
            raise ValueError(f"scoring must be one of {SCORING_STRATEGIES}, got {scoring!r}")
        self.store = store
        self.scorer = Scorer(scoring, resources, shape)
        self._lock = threading.Lock()
        self._queue: dict[Key, None] = {}  # pending unbound pods, insertion-ordered
        self._fresh: set[Key] = set()  # never tried since capacity last grew
        self._capacity_grew = False
        self.allocated: dict[str, Counter] = {}
        self.nonzero: dict[str, Counter] = {}  # cpu/memory with the defaults for unset requests
        self._charges: dict[Key, tuple[str, dict, dict]] = {}
        self._eligible_cache: dict[str, tuple[list, Counter]] = {}
        self._pod_requests: dict[str, dict] = {}  # uid -> requests: a pod's never change
        self._pod_nonzero: dict[str, dict] = {}
        store.hooks.append(self._on_event)
        self.extenders = DeviceExtenders(store)

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if rt is NODES:
            with self._lock:
                self._capacity_grew = True
                self._eligible_cache.clear()
            return
        if rt is not PODS:
            return
        key, pod = key_of(event.obj), event.obj
        spec = pod.get("spec") or {}
        alive = event.type != "DELETED" and not is_terminal(pod)
        with self._lock:
            if (
                alive
                and not spec.get("nodeName")
                and not spec.get("schedulingGates")  # PreEnqueue (SchedulingGates): not queued while gated
                and spec.get("schedulerName", "default-scheduler") == "default-scheduler"
            ):
                if key not in self._queue:
                    self._queue[key] = None
                    self._fresh.add(key)
            else:
                self._queue.pop(key, None)
                self._fresh.discard(key)
            charge = None
            if alive and spec.get("nodeName"):
                charge = (spec["nodeName"], self._requests(pod), self._nonzero(pod))
            if event.type == "DELETED":
                uid = pod["metadata"].get("uid", "")
                self._pod_requests.pop(uid, None)
                self._pod_nonzero.pop(uid, None)
            old = self._charges.pop(key, None)
            if charge is not None:
                self._charges[key] = charge
            if old == charge:
                return
            if old is not None:
                self.allocated[old[0]].subtract(old[1])
                self.nonzero[old[0]].subtract(old[2])
                self._capacity_grew = True
            if charge is not None:
                self.allocated.setdefault(charge[0], Counter()).update(charge[1])
                self.nonzero.setdefault(charge[0], Counter()).update(charge[2])

    def _requests(self, pod: dict) -> dict:
        uid = pod["metadata"].get("uid", "")
        requests = self._pod_requests.get(uid)
        if requests is None:
            requests = pod_requests(pod.get("spec") or {}, "requests")
            requests["pods"] = 1
            self._pod_requests[uid] = requests
        return requests

    def _nonzero(self, pod: dict) -> dict:
        uid = pod["metadata"].get("uid", "")
        nonzero = self._pod_nonzero.get(uid)
        if nonzero is None:
            nonzero = self._pod_nonzero[uid] = nonzero_requests(pod.get("spec") or {})
        return nonzero

    def next_deadline(self) -> float | None:
        return None

    def step(self, now: float) -> bool:
        with self._lock:
            if self._capacity_grew:
                candidates = list(self._queue)
            else:
                candidates = [k for k in self._queue if k in self._fresh]
            self._capacity_grew = False
            self._fresh.clear()
        if not candidates:
            return False
        nodes = sorted(self.store.items(NODES), key=lambda n: n["metadata"]["name"])
        for key in candidates:
            self._schedule(key, nodes, now)
        return True

    def _schedule(self, key: Key, nodes: list[dict], now: float) -> None:
        """Bind one pod, or record why it cannot be (read-modify-write under the store lock)."""
        with self.store.lock:
            self._bind(key, nodes, now)

    def _bind(self, key: Key, nodes: list[dict], now: float) -> None:
        pod = self.store.find(PODS, *key)
        if pod is None or (pod.get("spec") or {}).get("nodeName"):
            return
        node, choice, reasons = self._pick(pod, nodes)
        status = dict(pod.get("status") or {})
        updated = evolve(pod, status=status)
        if node is not None:
            updated["spec"] = {**pod["spec"], "nodeName": node["metadata"]["name"]}
            if choice is not None:
                written = self.extenders.bind_annotations(choice, self._requests(pod), node, now)
                updated["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}), **written}
            set_pod_condition(status, "PodScheduled", "True", now)
        else:
            message = (
                f"0/{len(nodes)} nodes are available: "
                + ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
                + "."
            )
            old = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
            if old is not None and old.get("message") == message:
                return
            set_pod_condition(status, "PodScheduled", "False", now, "Unschedulable", message)
        self.store.update(PODS, updated)

    def _eligible(self, spec: dict, nodes: list[dict]) -> tuple[list[tuple[dict, dict]], Counter]:
        """Nodes a pod may go to by the filters before NodeResourcesFit, with the reasons
        for the others. Memoized per pod shape until the nodes change: the pods of one
        replica type all share it."""
        shape = json.dumps([spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")], sort_keys=True)
        cached = self._eligible_cache.get(shape)
        if cached is not None:
            return cached
        eligible: list[tuple[dict, dict]] = []
        reasons: Counter = Counter()
        for node in nodes:
            reason = filter_reason(spec, node)
            if reason is not None:
                reasons[reason] += 1
                continue
            status = node.get("status") or {}
            allocatable = status.get("allocatable") or status.get("capacity") or {}
            eligible.append((node, {r: canonical(r, v) for r, v in allocatable.items()}))
        self._eligible_cache[shape] = (eligible, reasons)
        return eligible, reasons

    def _pick(self, pod: dict, nodes: list[dict]) -> tuple[dict | None, list | int | None, Counter]:
        """The node for the pod and the cards an extender chose there, or the reasons per node."""
        pod_requests_ = self._requests(pod)
        nonzero = self._nonzero(pod)
        requests = [(r, amount) for r, amount in pod_requests_.items() if amount > 0]
        eligible, filtered = self._eligible(pod.get("spec") or {}, nodes)
        best, best_choice, best_score = None, None, -1
        short_of: Counter = Counter()
        refused: Counter = Counter()  # the extenders' reasons, for nodes that passed the filters
        extended = self.extenders.interested(pod_requests_)
        for node, allocatable in eligible:
            name = node["metadata"]["name"]
            used: Mapping[str, int] = self.allocated.get(name) or {}
            ignored = self.extenders.ignored(node) if extended else frozenset()
            short = [
                r for r, amount in requests if r not in ignored and allocatable.get(r, 0) - used.get(r, 0) < amount
            ]
            if short:
                short_of.update(short)
                continue
            choice = self.extenders.choose(pod, pod_requests_, node) if extended else None
            if isinstance(choice, str):
                refused[choice] += 1
                continue
            score = self.scorer.score(pod_requests_, nonzero, used, self.nonzero.get(name) or {}, allocatable)
            if score > best_score:
                best, best_choice, best_score = node, choice, score
        if best is not None:
            return best, best_choice, Counter()
        reasons = Counter(filtered) + refused
        for r, count in short_of.items():
            reasons["Too many pods" if r == "pods" else f"Insufficient {r}"] += count
        return None, None, reasons
