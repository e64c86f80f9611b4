"""What happens to nodes and the pods on them: kube-controller-manager's node lifecycle
controller, taint eviction controller and pod garbage collector (v1.30), and the node
condition changes a kubelet (or its silence) makes.

- Taints from the Ready condition (doNoExecuteTaintingPass and doNoScheduleTaintingPass):
  False -> ``node.kubernetes.io/not-ready`` NoExecute and NoSchedule, Unknown ->
  ``node.kubernetes.io/unreachable`` NoExecute and NoSchedule, True -> neither; and
  ``spec.unschedulable`` (kubectl cordon) -> ``node.kubernetes.io/unschedulable``
  NoSchedule. Each taint the controller adds carries ``timeAdded``. When Ready leaves True,
  the pods on the node are marked not Ready (MarkPodsNotReady).
- Taint eviction (the NoExecute taint manager): a pod on a node with NoExecute taints it
  does not all tolerate is deleted at once; one that tolerates them is deleted after the
  smallest ``tolerationSeconds`` of the tolerations used (counted from when the manager
  saw the taints; none: never; <= 0: at once), unless the taints go first. Before the
  delete the pod gets the DisruptionTarget condition (DeletionByTaintManager).
- PodGC: a pod bound to a node that no longer exists is marked Failed (DisruptionTarget
  DeletionByPodGC) and deleted once the node has been gone for the 40 s quarantine.

Deletes are immediate (kubesim does not model graceful termination: a real pod on an
unreachable node would stay Terminating). The controllers of the evicted pods react to
the deletions as to any other.
"""

from __future__ import annotations

import threading

from .clock import rfc3339
from .model import Event, Store, evolve, key_of
from .nodefit import UNSCHEDULABLE_TAINT, tolerates
from .podvalidation import NOT_READY_TAINT, UNREACHABLE_TAINT
from .resources import NODES, PODS, ResourceType
from .scheduler import set_pod_condition

PodKey = tuple[str, str]
QUARANTINE_SECONDS = 40.0  # PodGC's quarantineTime: a missing node is looked up again after it
_CONTROLLER_TAINTS = {NOT_READY_TAINT, UNREACHABLE_TAINT, UNSCHEDULABLE_TAINT}


def ready_status(node: dict) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status") or "Unknown")
    return "Unknown"


def wanted_taints(node: dict) -> list[tuple[str, str]]:
    """(key, effect) of the taints the controller keeps on the node."""
    wanted: list[tuple[str, str]] = []
    status = ready_status(node)
    if status != "True":
        key = NOT_READY_TAINT if status == "False" else UNREACHABLE_TAINT
        wanted += [(key, "NoExecute"), (key, "NoSchedule")]
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.append((UNSCHEDULABLE_TAINT, "NoSchedule"))
    return wanted


def eviction_delay(pod: dict, taints: list[dict]) -> float | None:
    """Seconds until the taint manager deletes the pod (0: now), None: it tolerates them for ever."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    used: list[dict] = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates([t], taint)), None)
        if match is None:
            return 0.0
        used.append(match)
    seconds = [t["tolerationSeconds"] for t in used if t.get("tolerationSeconds") is not None]
    if any(s <= 0 for s in seconds):
        return 0.0
    return float(min(seconds)) if seconds else None


class NodeLifecycle:
    name = "node-lifecycle-controller"

    def __init__(self, store: Store):
        self.store = store
        self._lock = threading.Lock()
        self._nodes: set[str] = set()  # nodes to look at
        self._pods: set[PodKey] = set()  # pods to look at
        self._evictions: dict[PodKey, tuple[str, float]] = {}  # pod -> (uid, when it is deleted)
        self._gone: dict[str, float] = {}  # deleted node -> when it went
        store.hooks.append(self._on_event)

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if rt is NODES:
            with self._lock:
                name = event.obj["metadata"]["name"]
                self._nodes.add(name)
                if event.type == "DELETED":
                    self._gone[name] = self.store.clock.now()
                else:
                    self._gone.pop(name, None)
        elif rt is PODS and event.type != "DELETED" and (event.obj.get("spec") or {}).get("nodeName"):
            with self._lock:
                self._pods.add(key_of(event.obj))

    def next_deadline(self) -> float | None:
        with self._lock:
            deadlines = [at for _, at in self._evictions.values()]
            deadlines += [at + QUARANTINE_SECONDS for at in self._gone.values()]
        return min(deadlines, default=None)

    def step(self, now: float) -> bool:
        with self._lock:
            nodes, pods = self._nodes, self._pods
            self._nodes, self._pods = set(), set()
            due = {k for k, (_, at) in self._evictions.items() if at <= now}
            gone = [n for n, at in self._gone.items() if at + QUARANTINE_SECONDS <= now]
        did = bool(nodes or pods or due or gone)
        for name in sorted(nodes):
            node = self.store.find(NODES, "", name)
            if node is not None:
                self._taint(node, now)
                pods |= {key_of(p) for p in self._pods_on(name)}
        for key in sorted(pods | due):
            self._process(key, now)
        for name in gone:
            self._collect(name, now)
        return did

    def _pods_on(self, node: str) -> list[dict]:
        return [p for p in self.store.items(PODS) if (p.get("spec") or {}).get("nodeName") == node]

    def _taint(self, node: dict, now: float) -> None:
        """Keep the controller's taints in step with the node's Ready condition and cordon."""
        with self.store.lock:
            current = self.store.find(NODES, "", node["metadata"]["name"])
            if current is None:
                return
            spec = current.get("spec") or {}
            taints = spec.get("taints") or []
            wanted = wanted_taints(current)
            kept = [
                t for t in taints if t.get("key") not in _CONTROLLER_TAINTS or (t.get("key"), t.get("effect")) in wanted
            ]
            have = {(t.get("key"), t.get("effect")) for t in kept}
            added = [{"key": k, "effect": e, "timeAdded": rfc3339(now)} for k, e in wanted if (k, e) not in have]
            if added or len(kept) != len(taints):
                new_spec = {k: v for k, v in spec.items() if k != "taints"}
                if kept + added:
                    new_spec["taints"] = kept + added
                self.store.update(NODES, evolve(current, spec=new_spec))
            if ready_status(current) != "True":
                self._mark_pods_not_ready(current["metadata"]["name"], now)

    def _mark_pods_not_ready(self, node: str, now: float) -> None:
        """MarkPodsNotReady: the pods of a node that stopped being Ready are not Ready either."""
        for pod in self._pods_on(node):
            status = pod.get("status") or {}
            ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
            if ready is None or ready.get("status") == "False" or status.get("phase") in ("Succeeded", "Failed"):
                continue
            status = dict(status)
            set_pod_condition(status, "Ready", "False", now)
            self.store.update(PODS, evolve(pod, status=status))

    def _process(self, key: PodKey, now: float) -> None:
        """processPodOnNode: evict now, later, or never (and forget an eviction the taints no longer call for)."""
        pod = self.store.find(PODS, *key)
        node_name = (pod or {}).get("spec", {}).get("nodeName")
        node = self.store.find(NODES, "", node_name) if node_name else None
        taints = [t for t in ((node or {}).get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]
        with self._lock:
            scheduled = self._evictions.get(key)
        if pod is None or node is None or not taints or (scheduled and scheduled[0] != pod["metadata"]["uid"]):
            with self._lock:
                self._evictions.pop(key, None)
            if pod is None or node is None or not taints:
                return
            scheduled = None
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        delay = eviction_delay(pod, taints)
        if delay is None:
            with self._lock:
                self._evictions.pop(key, None)
            return
        # A pending eviction keeps its start; a shorter toleration brings it forward.
        at = now + delay if scheduled is None else min(scheduled[1], now + delay)
        if at <= now:
            with self._lock:
                self._evictions.pop(key, None)
            self._delete(pod, "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint", now)
        else:
            with self._lock:
                self._evictions[key] = (pod["metadata"]["uid"], at)

    def _collect(self, node_name: str, now: float) -> None:
        """gcOrphaned: the pods of a node that is gone."""
        with self._lock:
            self._gone.pop(node_name, None)
        if self.store.find(NODES, "", node_name) is not None:
            return
        for pod in self._pods_on(node_name):
            self._delete(pod, "DeletionByPodGC", "PodGC: node no longer exists", now, fail=True)

    def _delete(self, pod: dict, reason: str, message: str, now: float, fail: bool = False) -> None:
        """addConditionAndDeletePod: the DisruptionTarget condition, then the delete."""
        with self.store.lock:
            current = self.store.find(PODS, *key_of(pod))
            if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"]:
                return
            status = dict(current.get("status") or {})
            set_pod_condition(status, "DisruptionTarget", "True", now, reason, message)
            if fail and status.get("phase") not in ("Succeeded", "Failed"):
                status["phase"] = "Failed"
            current = self.store.update(PODS, evolve(current, status=status))
            self.store.delete(PODS, *key_of(current))
