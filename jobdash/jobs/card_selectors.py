"""Reads of the shared GPUs the dispatcher publishes (issue 34): a node's cards with the pods
on each (gpushare, HAMi: ClusterState.nodes[i]["cards"], jobdash/dispatch/card_usage.py),
its MIG slices and time-sliced replicas (plain resources in allocatable), and its whole GPUs
as a whole-card pod sees them. The cluster page, GET /api/v1/cluster/, the submit check and
/metrics read through here.

The rows are JSON another process wrote: an entry of the wrong shape is left out, not
trusted, so that one odd card cannot break a page.
"""

from typing import Any

from queueing.devices import MODELS

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"  # nvidia.com/mig-1g.5gb ... (the device plugin's mixed strategy)
TIME_SLICED = "nvidia.com/gpu.shared"  # the device plugin's time-slicing, renameByDefault
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
MODEL_NAMES = {"gpushare": "gpushare", "hami": "HAMi"}


def _count(value: Any) -> int | None:
    """A non-negative integer from JSON, or None (a bool is no count)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value >= 0 and value == int(value):
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _card_pod(entry: Any) -> dict | None:
    if not isinstance(entry, dict):
        return None
    memory = _count(entry.get("memory"))
    if memory is None:
        return None
    return {
        "pod": str(entry.get("pod") or ""),
        "job": str(entry.get("job") or ""),
        "memory": memory,
        "bound": entry.get("bound") is True,
    }


def cards_of(node: dict) -> list[dict]:
    """The node's shared cards in index order: {index, id, model, memory, used, free, pods}
    (MiB); [] for a node that does not share its cards by memory."""
    raw = node.get("cards")
    if not isinstance(raw, list):
        return []
    cards = []
    for position, entry in enumerate(raw):
        if not isinstance(entry, dict):
            continue
        memory, used = _count(entry.get("memory")), _count(entry.get("used"))
        if not memory or used is None:
            continue
        index = _count(entry.get("index"))
        index = position if index is None else index
        pods = entry.get("pods")
        shown = [pod for pod in map(_card_pod, pods if isinstance(pods, list) else []) if pod is not None]
        cards.append(
            {
                "index": index,
                "id": str(entry.get("id") or index),
                "model": str(entry.get("model") or ""),
                "memory": memory,
                "used": used,
                # a pod that fits no card is still charged (to the roomiest): used may pass memory
                "free": max(memory - used, 0),
                "pods": shown,
            }
        )
    return sorted(cards, key=lambda card: card["index"])


def sharing_model(cards: list[dict]) -> str:
    """The device model the node's cards are shared by ("" when none)."""
    return next((card["model"] for card in cards if card["model"]), "")


def whole_gpus(node: dict, cards: list[dict]) -> dict[str, int]:
    """The node's GPUs as a pod asking whole ones (nvidia.com/gpu) sees them. A node that
    shares its cards publishes no whole GPUs of its own: HAMi's nvidia.com/gpu counts vGPUs,
    so its whole GPUs are its cards, free when nothing is on them; a model that never hands
    out whole cards (gpushare: DeviceModel.whole) has none."""
    if not cards:
        allocatable, allocated = node.get("allocatable") or {}, node.get("allocated") or {}
        total, used = _count(allocatable.get(GPU)) or 0, _count(allocated.get(GPU)) or 0
        return {"allocatable": total, "allocated": used, "free": max(total - used, 0)}
    found = MODELS.get(sharing_model(cards))
    if found is not None and found.whole is not None:
        return {"allocatable": 0, "allocated": 0, "free": 0}
    free = sum(1 for card in cards if card["used"] == 0)
    return {"allocatable": len(cards), "allocated": len(cards) - free, "free": free}


def slices_of(node: dict) -> list[dict]:
    """The node's MIG slices per profile and time-sliced replicas: {resource, kind,
    allocatable, allocated, free} each, MIG profiles first by name."""
    allocatable, allocated = node.get("allocatable") or {}, node.get("allocated") or {}
    if not isinstance(allocatable, dict) or not isinstance(allocated, dict):
        return []
    rows = []
    for resource in sorted(allocatable, key=lambda name: (name == TIME_SLICED, name)):
        if not (resource.startswith(MIG_PREFIX) or resource == TIME_SLICED):
            continue
        total, used = _count(allocatable.get(resource)), _count(allocated.get(resource)) or 0
        if not total:
            continue
        rows.append(
            {
                "resource": resource,
                "kind": "MIG" if resource.startswith(MIG_PREFIX) else "time-slicing",
                "allocatable": total,
                "allocated": used,
                "free": max(total - used, 0),
            }
        )
    return rows


def replicas_of(node: dict) -> int | None:
    """How many pods share each time-sliced card (the device plugin's label), if said."""
    labels = node.get("labels") or {}
    return _count(labels.get(REPLICAS_LABEL)) if isinstance(labels, dict) else None
