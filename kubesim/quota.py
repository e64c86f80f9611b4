"""ResourceQuota: the admission check and the quota controller's status.used.

Usage per namespace is kept incrementally from store events (a store hook), so the
check at pod creation is O(quota keys) and exact. The check and the create run under
the store lock, which makes them atomic the way the API server's quota admission
(compare-and-swap on the quota object) is. ``status.used`` is rewritten in the same
critical section, so a client that reads the quota after a pod write sees it counted.

What is charged follows the pod evaluator in kube-apiserver:
- ``requests.X``/``X`` (cpu, memory, ephemeral-storage), ``limits.X``, ``requests.<extended>``
  and ``pods`` for pods that are not terminal (Succeeded/Failed release their charge);
- ``count/pods`` for every pod in storage; ``count/<plural>.<group>`` for every object of a
  job kind (``count/tfjobs.kubeflow.org``, ``count/pytorchjobs.kubeflow.org``,
  ``count/mpijobs.kubeflow.org``, ``count/jobs.batch``, ``count/jobsets.jobset.x-k8s.io``,
  ``count/trainjobs.trainer.kubeflow.org``, ...), as the object count evaluator does.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Any

from queueing.quantity import canonical as _canonical
from queueing.quantity import format_quantity

from .errors import forbidden
from .model import Event, Store, evolve, key_of
from .resources import PODS, RESOURCEQUOTAS, TFJOBS, WORKLOADS, ResourceType

_STANDARD = ("cpu", "memory", "ephemeral-storage")
TFJOB_COUNT = f"count/{TFJOBS.qualified}"
_COUNTED = {rt: f"count/{rt.qualified}" for rt in WORKLOADS}


@lru_cache(maxsize=65536)
def _canonical_cached(resource_name: str, value: Any) -> int:
    return _canonical(resource_name, value)


def canonical(resource_name: str, value: Any) -> int:
    """queueing.quantity.canonical, memoized: exact parsing is costly and manifests repeat a few values.

    ``value`` is whatever JSON the manifest holds; the parser refuses what is not a quantity.
    """
    try:
        return _canonical_cached(resource_name, value)
    except TypeError:  # unhashable value: not a quantity, let the parser say so
        return _canonical(resource_name, value)


def _base(resource_key: str) -> str:
    """The resource a quota key measures ('requests.cpu' -> 'cpu'), for parsing and formatting."""
    for prefix in ("requests.", "limits."):
        if resource_key.startswith(prefix):
            return resource_key[len(prefix) :]
    return resource_key


def _amount(resource_key: str, value: object) -> int:
    return canonical(_base(resource_key), value)


def pod_requests(spec: dict, section: str) -> dict[str, int]:
    """Effective pod requests/limits: sum over containers, at least any init container, plus overhead."""
    total: Counter = Counter()
    for container in spec.get("containers") or []:
        for name, value in (((container.get("resources") or {}).get(section)) or {}).items():
            total[name] += canonical(name, value)
    for container in spec.get("initContainers") or []:
        for name, value in (((container.get("resources") or {}).get(section)) or {}).items():
            total[name] = max(total[name], canonical(name, value))
    for name, value in (spec.get("overhead") or {}).items():
        total[name] += canonical(name, value)
    return dict(total)


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_usage(pod: dict) -> dict[str, int]:
    if is_terminal(pod):
        return {"count/pods": 1}
    return _live_pod_usage(pod)


def _live_pod_usage(pod: dict) -> dict[str, int]:
    usage = {"count/pods": 1, "pods": 1}
    spec = pod.get("spec") or {}
    for name, amount in pod_requests(spec, "requests").items():
        usage[f"requests.{name}"] = amount
        if name in _STANDARD:
            usage[name] = amount
    for name, amount in pod_requests(spec, "limits").items():
        usage[f"limits.{name}"] = amount
    return usage


def _missing_constraints(pod: dict, hard: dict) -> list[str]:
    """Compute resources a quota constrains but some container does not declare (kube's 'must specify')."""
    missing = []
    containers = (pod.get("spec") or {}).get("containers") or []
    for key in sorted(hard):
        if key in _STANDARD:
            section, name = "requests", key
        elif key.startswith("requests.") and _base(key) in _STANDARD:
            section, name = "requests", _base(key)
        elif key.startswith("limits.") and _base(key) in _STANDARD:
            section, name = "limits", _base(key)
        else:
            continue
        lacking = [
            c.get("name", "") for c in containers if name not in (((c.get("resources") or {}).get(section)) or {})
        ]
        if lacking:
            missing.append(f"{key} for: {','.join(lacking)}")
    return missing


class QuotaTracker:
    def __init__(self, store: Store):
        self.store = store
        self.usage: dict[str, Counter] = {}
        self._charges: dict[tuple[str, str], dict[str, int]] = {}
        self._quotas: dict[str, set[str]] = {}  # namespace -> names of its ResourceQuotas
        self._live: dict[str, dict[str, int]] = {}  # pod uid -> charge while not terminal
        store.hooks.append(self._on_event)

    # --- admission ------------------------------------------------------------------------

    def admit(self, rt: ResourceType, obj: dict) -> None:
        """Raise 403 Forbidden if creating ``obj`` would exceed a ResourceQuota. Call under store lock."""
        namespace = obj["metadata"].get("namespace") or ""
        quotas = self.store.items(RESOURCEQUOTAS, namespace)
        if not quotas:
            return
        if rt is PODS:
            delta = pod_usage(obj)
        elif rt in _COUNTED:
            delta = {_COUNTED[rt]: 1}
        else:
            return
        used = self.usage.get(namespace, Counter())
        name = obj["metadata"].get("name", "")
        for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
            hard = (quota.get("spec") or {}).get("hard") or {}
            if rt is PODS:
                missing = _missing_constraints(obj, hard)
                if missing:
                    raise forbidden(
                        rt.group,
                        rt.plural,
                        name,
                        f"failed quota: {quota['metadata']['name']}: must specify {'; '.join(missing)}",
                    )
            exceeded = []
            for key in sorted(hard):
                requested = delta.get(key, 0)
                limit = _amount(key, hard[key])
                if requested > 0 and used[key] + requested > limit:
                    exceeded.append((key, requested, used[key], limit))
            if exceeded:

                def fmt(index: int, exceeded=exceeded) -> str:
                    return ",".join(f"{e[0]}={format_quantity(_base(e[0]), e[index])}" for e in exceeded)

                raise forbidden(
                    rt.group,
                    rt.plural,
                    name,
                    f"exceeded quota: {quota['metadata']['name']}, requested: {fmt(1)}, used: {fmt(2)}, limited: {fmt(3)}",
                )

    # --- usage tracking (store hook) -------------------------------------------------------

    def _counter(self, namespace: str) -> Counter:
        counter = self.usage.get(namespace)
        if counter is None:
            counter = self.usage[namespace] = Counter()
        return counter

    def _on_event(self, rt: ResourceType, event: Event) -> None:
        namespace, name = key_of(event.obj)
        if rt is RESOURCEQUOTAS:
            names = self._quotas.setdefault(namespace, set())
            if event.type == "DELETED":
                names.discard(name)
            else:
                names.add(name)
                self._write_status(event.obj)
            return
        if rt is PODS:
            key = (namespace, name)
            uid = event.obj["metadata"].get("uid", "")
            if event.type == "DELETED":
                new = {}
                self._live.pop(uid, None)
            elif is_terminal(event.obj):
                new = {"count/pods": 1}
            else:  # a pod's requests never change: compute its charge once
                if uid not in self._live:
                    self._live[uid] = pod_usage(event.obj)
                new = self._live[uid]
            old = self._charges.pop(key, {})
            if new:
                self._charges[key] = new
            if new == old:
                return
            counter = self._counter(namespace)
            counter.subtract(old)
            counter.update(new)
        elif rt in _COUNTED and event.type in ("ADDED", "DELETED"):
            self._counter(namespace)[_COUNTED[rt]] += 1 if event.type == "ADDED" else -1
        else:
            return
        for quota_name in self._quotas.get(namespace, ()):
            self._write_status(self.store.get(RESOURCEQUOTAS, namespace, quota_name))

    def _write_status(self, quota: dict) -> None:
        namespace = quota["metadata"]["namespace"]
        hard = (quota.get("spec") or {}).get("hard") or {}
        used_counter = self.usage.get(namespace) or Counter()
        status = {
            "hard": {k: format_quantity(_base(k), _amount(k, v)) for k, v in hard.items()},
            "used": {k: format_quantity(_base(k), used_counter[k]) for k in hard},
        }
        if quota.get("status") == status:
            return
        self.store.update(RESOURCEQUOTAS, evolve(quota, status=status))

    def used(self, namespace: str) -> dict[str, int]:
        return {k: v for k, v in self.usage.get(namespace, Counter()).items() if v}
