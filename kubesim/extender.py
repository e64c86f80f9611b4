"""The GPU-sharing scheduler extenders and device plugins, as kube-scheduler and the kubelet call them.

kube-scheduler calls an extender after its own filter plugins, with the nodes that passed
them, and only for pods asking a resource it manages: gpushare's for ``aliyun.com/gpu-mem``
(``gpushare.py``), HAMi's for ``nvidia.com/gpu`` on the nodes that registered HAMi cards
(``hami.py``). A node the extender refuses counts under its reason in "0/N nodes are
available: ...". At bind the extender records the chosen cards on the pod; when the kubelet
starts the pod, the device plugin marks them handed over.

Per-card use is kept incrementally from store events, like the scheduler's node allocations:
a pod bound to a node and not terminated holds the cards its annotations name.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping

from . import gpushare, hami
from .model import Event, Store, key_of
from .quota import is_terminal, pod_requests
from .resources import NODES, PODS, ResourceType

Key = tuple[str, str]
# A card: (node, gpushare index or HAMi uuid); what is charged on it: MiB, cores, vGPUs.
Charge = tuple[tuple[tuple[str, object], int, int], ...]
MANAGED = (gpushare.GPU_MEM, hami.GPU, *sorted(hami.IGNORED_BY_SCHEDULER))


class DeviceExtenders:
    """gpushare's and HAMi's extenders over one store: filter and bind per card."""

    def __init__(self, store: Store):
        self._lock = threading.Lock()
        self._charges: dict[Key, Charge] = {}
        self.mem: Counter = Counter()  # (node, card) -> MiB in use
        self.cores: Counter = Counter()
        self.vgpus: Counter = Counter()
        self._nodes: dict[str, tuple[list[int] | None, list[hami.Card] | None]] = {}
        store.hooks.append(self._on_event)

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        if rt is NODES:
            with self._lock:
                self._nodes.pop(event.obj["metadata"]["name"], None)
            return
        if rt is not PODS:
            return
        pod = event.obj
        node = (pod.get("spec") or {}).get("nodeName")
        charge: Charge = ()
        if node and event.type != "DELETED" and not is_terminal(pod):
            charge = _charge(pod, node)
        key = key_of(pod)
        with self._lock:
            old = self._charges.pop(key, ())
            if charge:
                self._charges[key] = charge
            if old == charge:
                return
            for card, mem, cores in old:
                self.mem[card] -= mem
                self.cores[card] -= cores
                self.vgpus[card] -= 1
            for card, mem, cores in charge:
                self.mem[card] += mem
                self.cores[card] += cores
                self.vgpus[card] += 1

    def _cards(self, node: Mapping) -> tuple[list[int] | None, list[hami.Card] | None]:
        name = node["metadata"]["name"]
        with self._lock:
            cached = self._nodes.get(name)
            if cached is None:
                cached = self._nodes[name] = (gpushare.cards(node), hami.cards(node))
            return cached

    @staticmethod
    def interested(requests: Mapping[str, int]) -> bool:
        """Whether any extender manages a resource the pod asks (kube-scheduler's IsInterested)."""
        return any(requests.get(r, 0) > 0 for r in MANAGED)

    def ignored(self, node: Mapping) -> frozenset[str]:
        """Resources NodeResourcesFit does not check on this node (an extender manages them)."""
        return hami.IGNORED_BY_SCHEDULER if self._cards(node)[1] is not None else frozenset()

    def choose(self, pod: Mapping, requests: Mapping[str, int], node: Mapping) -> list | int | str | None:
        """An extender's Filter on a node that passed the scheduler's filters: the cards the pod
        would get (a gpushare index, or HAMi's vGPUs per container), why it cannot have any, or
        None when no extender is interested in the pod on this node."""
        name = node["metadata"]["name"]
        shared, vgpu_cards = self._cards(node)
        mem = requests.get(gpushare.GPU_MEM, 0)
        if mem > 0 and shared is not None:
            with self._lock:
                used = {i: self.mem[(name, i)] for i in range(len(shared))}
            return gpushare.choose(shared, used, mem, gpushare.pinned(pod))
        if vgpu_cards is not None:
            asked = hami.requests(pod.get("spec") or {})
            if asked:
                with self._lock:
                    usage = {
                        c.uuid: (self.mem[(name, c.uuid)], self.cores[(name, c.uuid)], self.vgpus[(name, c.uuid)])
                        for c in vgpu_cards
                    }
                return hami.choose(vgpu_cards, usage, asked, hami.pinned_devices(pod))
        return None

    def bind_annotations(self, choice: list | int, requests: Mapping[str, int], node: Mapping, now: float) -> dict:
        """What the extender that made ``choice`` writes on the pod when it binds it."""
        if isinstance(choice, int):
            totals = self._cards(node)[0] or []
            return gpushare.bind_annotations(choice, requests[gpushare.GPU_MEM], totals[choice], now)
        return hami.bind_annotations(choice, node["metadata"]["name"], now)


def _charge(pod: dict, node: str) -> Charge:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if gpushare.IDX in annotations:
        requested = pod_requests(pod.get("spec") or {}, "requests").get(gpushare.GPU_MEM, 0)
        held = gpushare.charge(pod, requested)
        return (((node, held[0]), held[1], 0),) if held is not None else ()
    return tuple(((node, uuid), mem, cores) for uuid, mem, cores in hami.charge(pod))


def device_plugin_annotations(pod: Mapping) -> dict[str, str]:
    """What the device plugins write on a pod when the kubelet starts it (empty if nothing)."""
    return {**gpushare.started_annotations(pod), **hami.started_annotations(pod)}
