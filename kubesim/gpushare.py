"""Alibaba's GPU sharing by memory: what gpushare-scheduler-extender and its device plugin do.

A node publishes ``aliyun.com/gpu-mem`` (MiB over all its cards) and ``aliyun.com/gpu-count``;
every card has total // count MiB. The default scheduler only sees the total, so the extender
checks each card: a pod asking ``aliyun.com/gpu-mem`` (at most one card's worth) fits a node
only if one card has that much free. The card is chosen by binpack -- the card with the
least free memory that still holds the pod, the lowest index among equals -- and recorded on
the pod at bind (``ALIYUN_COM_GPU_MEM_*``). A pod already naming a card (jobdash pins it) goes
there or nowhere. A card's use is the sum of ALIYUN_COM_GPU_MEM_POD (else the pod's request)
of the live pods bound to the node with that index.
"""

from __future__ import annotations

from collections.abc import Mapping

from .quota import canonical

GPU_MEM = "aliyun.com/gpu-mem"
GPU_COUNT = "aliyun.com/gpu-count"
IDX = "ALIYUN_COM_GPU_MEM_IDX"
POD = "ALIYUN_COM_GPU_MEM_POD"
DEV = "ALIYUN_COM_GPU_MEM_DEV"
ASSIGNED = "ALIYUN_COM_GPU_MEM_ASSIGNED"
ASSUME_TIME = "ALIYUN_COM_GPU_MEM_ASSUME_TIME"


def cards(node: Mapping) -> list[int] | None:
    """Each card's MiB on a gpushare node, None for a node that does not share by memory."""
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    capacity = status.get("capacity") or allocatable
    if GPU_MEM not in allocatable:
        return None
    total = canonical(GPU_MEM, allocatable[GPU_MEM])
    count = canonical(GPU_COUNT, capacity.get(GPU_COUNT, allocatable.get(GPU_COUNT, 0)))
    return [total // count] * count if count > 0 else []


def pinned(pod: Mapping) -> int | None:
    """The card a pod already names (ALIYUN_COM_GPU_MEM_IDX), None if none or not a number."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(IDX)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def charge(pod: Mapping, requested: int) -> tuple[int, int] | None:
    """(card, MiB) a pod bound to a gpushare node holds, None if it names no card."""
    index = pinned(pod)
    if index is None:
        return None
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(POD)
    mem = int(value) if isinstance(value, str) and value.isdigit() else requested
    return index, mem


def choose(totals: list[int], used: Mapping[int, int], mem: int, index: int | None) -> int | str:
    """The card for a pod of ``mem`` MiB (binpack, or the pinned ``index`` only), or why none."""
    if not totals:
        return f"the node reports no {GPU_COUNT}"
    if index is not None:
        if index >= len(totals):
            return f"the node has no GPU {index}"
        free = totals[index] - used.get(index, 0)
        return index if free >= mem else f"GPU {index} on the node has {free} MiB free, not {mem} MiB"
    fitting = [(totals[i] - used.get(i, 0), i) for i in range(len(totals)) if totals[i] - used.get(i, 0) >= mem]
    if not fitting:
        return f"no GPU on the node has {mem} MiB free"
    return min(fitting)[1]


def bind_annotations(index: int, mem: int, card_total: int, now: float) -> dict[str, str]:
    """What the extender writes on the pod when it binds it (the device plugin reads them)."""
    return {
        IDX: str(index),
        POD: str(mem),
        DEV: str(card_total),
        ASSIGNED: "false",
        ASSUME_TIME: str(int(now * 1_000_000_000)),
    }


def started_annotations(pod: Mapping) -> dict[str, str]:
    """The device plugin's Allocate: the card handed to the container, the pod marked assigned."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if IDX in annotations and annotations.get(ASSIGNED) == "false":
        return {ASSIGNED: "true"}
    return {}
