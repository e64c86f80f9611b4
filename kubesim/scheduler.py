"""The default scheduler, simplified: one pod at a time, in arrival order, not gang-aware.

Filters like kube-scheduler (unschedulable nodes, nodeSelector, required node affinity,
NoSchedule/NoExecute taints, free allocatable capacity incl. the pod count) and scores
by NodeResourcesFit's scoring strategy: LeastAllocated (kube-scheduler's default: spread)
or MostAllocated (bin-packing, what batch clusters configure to keep whole nodes free for
large pods). A pod that fits nowhere gets PodScheduled=False/Unschedulable with
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
from .model import Event, Store, evolve, key_of
from .quota import canonical, is_terminal, pod_requests
from .resources import NODES, PODS, ResourceType

Key = tuple[str, str]
# NodeResourcesFit's scoringStrategy.type in a KubeSchedulerConfiguration.
SCORING_STRATEGIES = ("LeastAllocated", "MostAllocated")


def set_pod_condition(status: dict, ctype: str, value: str, now: float, reason: str = "", message: str = "") -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != ctype]
    condition = {"type": ctype, "status": value, "lastProbeTime": None, "lastTransitionTime": rfc3339(now)}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    status["conditions"] = conditions + [condition]


def _tolerates(pod_spec: dict, taint: dict) -> bool:
    for tol in pod_spec.get("tolerations") or []:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol["key"] == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def _affinity_terms(pod_spec: dict) -> list[dict]:
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return required.get("nodeSelectorTerms") or []


def _affinity_matches(terms: list[dict], labels: dict, name: str = "") -> bool:
    """`name`: the node's, for matchFields (metadata.name is the one field a node selector
    term may match, with In or NotIn)."""
    if not terms:
        return True
    fields = {"metadata.name": name}

    def field_ok(expr: dict) -> bool:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if key not in fields or op not in ("In", "NotIn"):
            return False
        return (fields[key] in values) == (op == "In")

    def expr_ok(expr: dict) -> bool:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        value = labels.get(key)
        if op == "In":
            return value in values
        if op == "NotIn":
            return value not in values
        if op == "Exists":
            return key in labels
        if op == "DoesNotExist":
            return key not in labels
        if op in ("Gt", "Lt") and value is not None and value.isdigit() and values:
            # Only for Gt/Lt: In's values need not be numbers.
            return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
        return False

    return any(
        all(expr_ok(e) for e in term.get("matchExpressions") or [])
        and all(field_ok(f) for f in term.get("matchFields") or [])
        for term in terms
    )


class Scheduler:
    """default-scheduler, one pod at a time in arrival order, not gang-aware; scoring by
    `scoring` (SCORING_STRATEGIES)."""

    name = "scheduler"

    def __init__(self, store: Store, scoring: str = "LeastAllocated"):
        if scoring not in SCORING_STRATEGIES:
            raise ValueError(f"scoring must be one of {SCORING_STRATEGIES}, got {scoring!r}")
        self.store = store
        self.most_allocated = scoring == "MostAllocated"
        self._lock = threading.Lock()
        self._queue: dict[Key, None] = {}  # pending unbound pods, insertion-ordered
        self._fresh: set[Key] = set()  # never tried since capacity last grew
        self._capacity_grew = False
        self.allocated: dict[str, Counter] = {}
        self._charges: dict[Key, tuple[str, dict]] = {}
        self._eligible_cache: dict[str, tuple[list, Counter]] = {}
        self._pod_requests: dict[str, dict] = {}  # uid -> requests: a pod's never change
        store.hooks.append(self._on_event)

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
            charge = (spec["nodeName"], self._requests(pod)) if alive and spec.get("nodeName") else None
            if event.type == "DELETED":
                self._pod_requests.pop(pod["metadata"].get("uid", ""), None)
            old = self._charges.pop(key, None)
            if charge is not None:
                self._charges[key] = charge
            if old == charge:
                return
            if old is not None:
                self.allocated[old[0]].subtract(old[1])
                self._capacity_grew = True
            if charge is not None:
                self.allocated.setdefault(charge[0], Counter()).update(charge[1])

    def _requests(self, pod: dict) -> dict:
        uid = pod["metadata"].get("uid", "")
        requests = self._pod_requests.get(uid)
        if requests is None:
            requests = pod_requests(pod.get("spec") or {}, "requests")
            requests["pods"] = 1
            self._pod_requests[uid] = requests
        return requests

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
        node, reasons = self._pick(pod, nodes)
        status = dict(pod.get("status") or {})
        updated = evolve(pod, status=status)
        if node is not None:
            updated["spec"] = {**pod["spec"], "nodeName": node}
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

    def _eligible(self, spec: dict, nodes: list[dict]) -> tuple[list[tuple[str, dict]], Counter]:
        """Nodes a pod may go to by selector, affinity and taints (not capacity), with the
        reasons for the others. Memoized per pod shape until the nodes change: the pods of
        one replica type all share it."""
        shape = json.dumps([spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")], sort_keys=True)
        cached = self._eligible_cache.get(shape)
        if cached is not None:
            return cached
        selector, terms = spec.get("nodeSelector") or {}, _affinity_terms(spec)
        eligible: list[tuple[str, dict]] = []
        reasons: Counter = Counter()
        for node in nodes:
            node_spec, status = node.get("spec") or {}, node.get("status") or {}
            labels = node["metadata"].get("labels") or {}
            if node_spec.get("unschedulable"):
                reasons["node(s) were unschedulable"] += 1
                continue
            if any(labels.get(k) != v for k, v in selector.items()) or not _affinity_matches(
                terms, labels, node["metadata"]["name"]
            ):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            taint = next(
                (
                    t
                    for t in node_spec.get("taints") or []
                    if t.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec, t)
                ),
                None,
            )
            if taint is not None:
                reasons[f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"] += 1
                continue
            allocatable = status.get("allocatable") or status.get("capacity") or {}
            eligible.append((node["metadata"]["name"], {r: canonical(r, v) for r, v in allocatable.items()}))
        self._eligible_cache[shape] = (eligible, reasons)
        return eligible, reasons

    def _pick(self, pod: dict, nodes: list[dict]) -> tuple[str | None, Counter]:
        requests = [(r, amount) for r, amount in self._requests(pod).items() if amount > 0]
        eligible, filtered = self._eligible(pod.get("spec") or {}, nodes)
        best, best_score = None, -1.0
        short_of: Counter = Counter()
        for name, allocatable in eligible:
            used: Mapping[str, int] = self.allocated.get(name) or {}
            short = [r for r, amount in requests if allocatable.get(r, 0) - used.get(r, 0) < amount]
            if short:
                short_of.update(short)
                continue
            # LeastAllocated: prefer the node left with the largest free share of cpu and
            # memory; MostAllocated: the smallest.
            score = 0.0
            for r in ("cpu", "memory"):
                capacity = allocatable.get(r, 0)
                if capacity > 0:
                    free = (capacity - used.get(r, 0)) / capacity
                    score += 1.0 - free if self.most_allocated else free
            if score > best_score:
                best, best_score = name, score
        if best is not None:
            return best, Counter()
        reasons = Counter(filtered)
        for r, count in short_of.items():
            reasons["Too many pods" if r == "pods" else f"Insufficient {r}"] += count
        return None, reasons
