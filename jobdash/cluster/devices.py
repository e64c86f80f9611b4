"""How shared GPUs show in the cluster, and how a pod is pinned to a card: the device
plugins' protocols, for the models of queueing/devices.py.

- ``gpushare`` (Alibaba's scheduler extender and device plugin): a node's allocatable
  gives its total GPU memory and its card count, every card the same; the card a pod got is
  the ``ALIYUN_COM_GPU_MEM_IDX`` annotation, which the extender writes at bind and the
  device plugin reads when the pod starts.
- ``hami`` (HAMi): the device plugin registers each card (uuid, vGPU split count, memory,
  cores, health) in the node annotation ``hami.io/node-nvidia-register``; HAMi's scheduler
  writes the cards a pod got to ``hami.io/vgpu-devices-to-allocate``, which the device
  plugin moves to ``hami.io/vgpu-devices-allocated``.

jobdash pins a pod by writing what the extender would, before the scheduler sees it: the
extender then keeps the card named (docs/architecture.md, "GPUs shared by memory").
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queueing.devices import MODELS, DeviceModel

GPUSHARE_IDX = "ALIYUN_COM_GPU_MEM_IDX"
GPUSHARE_POD = "ALIYUN_COM_GPU_MEM_POD"
GPUSHARE_DEV = "ALIYUN_COM_GPU_MEM_DEV"
GPUSHARE_ASSIGNED = "ALIYUN_COM_GPU_MEM_ASSIGNED"
GPUSHARE_ASSUME_TIME = "ALIYUN_COM_GPU_MEM_ASSUME_TIME"
HAMI_REGISTER = "hami.io/node-nvidia-register"
HAMI_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
HAMI_ALLOCATED = "hami.io/vgpu-devices-allocated"
HAMI_NODE = "hami.io/vgpu-node"
HAMI_TIME = "hami.io/vgpu-time"
# The node resources HAMi's scheduler manages (not in a node's allocatable): what a node's
# registered cards hold in all, so that a node's totals can be checked like any resource.
HAMI_CORES = "nvidia.com/gpucores"


@dataclass(frozen=True)
class NodeCards:
    """A node's shared cards: ``memory`` MiB each, named ``ids`` (what pods' annotations say)."""

    model: str
    memory: tuple[int, ...]
    ids: tuple[str, ...]

    def index(self, card_id: str) -> int | None:
        try:
            return self.ids.index(card_id)
        except ValueError:
            return None


def node_cards(allocatable: Mapping[str, int], annotations: Mapping[str, str]) -> NodeCards | None:
    """The node's shared cards, by the first model whose device plugin published them."""
    for found in MODELS.values():
        if found.protocol == "hami":
            cards = _hami_cards(found, annotations.get(HAMI_REGISTER, ""))
        else:
            cards = _gpushare_cards(found, allocatable)
        if cards is not None:
            return cards
    return None


def _gpushare_cards(found: DeviceModel, allocatable: Mapping[str, int]) -> NodeCards | None:
    total = allocatable.get(found.memory, 0)
    count = allocatable.get(found.node_count, 0) if found.node_count else 0
    if total <= 0 or count <= 0:
        return None
    return NodeCards(found.name, (total // count,) * count, tuple(str(card) for card in range(count)))


def _registered(register: str) -> list[tuple[str, int, int]]:
    """HAMi's ``uuid,split,memory,cores,type,numa,healthy[,...]:...`` as (uuid, memory, cores)
    of each healthy card; an entry whose numbers do not parse is left out."""
    cards = []
    for entry in register.split(":"):
        fields = entry.split(",")
        if len(fields) < 7 or fields[6].strip().lower() != "true":
            continue
        try:
            cards.append((fields[0], int(fields[2]), int(fields[3])))
        except ValueError:
            continue
    return cards


def _hami_cards(found: DeviceModel, register: str) -> NodeCards | None:
    cards = _registered(register)
    if not cards:
        return None
    return NodeCards(found.name, tuple(memory for _, memory, _ in cards), tuple(uuid for uuid, _, _ in cards))


def hami_totals(annotations: Mapping[str, str]) -> dict[str, int]:
    """The totals HAMi's scheduler manages on a node, from its registered healthy cards."""
    cards = _registered(annotations.get(HAMI_REGISTER, ""))
    if not cards:
        return {}
    memory = sum(card[1] for card in cards)
    totals = {model.memory: memory for model in MODELS.values() if model.protocol == "hami"}
    totals[HAMI_CORES] = sum(card[2] for card in cards)
    return totals


def pod_cards(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """The cards a pod was given (or pinned to), as its node names them: () if none."""
    index = annotations.get(GPUSHARE_IDX)
    if index is not None:
        return (index.strip(),)
    devices = annotations.get(HAMI_ALLOCATED) or annotations.get(HAMI_TO_ALLOCATE) or ""
    found: list[str] = []
    for container in devices.split(";"):
        for device in container.split(":"):
            card = device.split(",")[0].strip()
            if card and card not in found:
                found.append(card)
    return tuple(found)


def pin_annotations(
    cards: NodeCards, chosen: tuple[int, ...], memory: int, node: str, now: float, cores: int = 0
) -> dict[str, str]:
    """What the extender writes to a pod it binds to ``chosen`` cards (``memory`` MiB and
    ``cores`` per cent of each)."""
    if MODELS[cards.model].protocol == "hami":
        devices = "".join(f"{cards.ids[card]},NVIDIA,{memory},{cores}:" for card in chosen)
        return {HAMI_TO_ALLOCATE: devices + ";", HAMI_NODE: node, HAMI_TIME: str(int(now))}
    card = chosen[0]
    return {
        GPUSHARE_IDX: cards.ids[card],
        GPUSHARE_POD: str(memory),
        GPUSHARE_DEV: str(cards.memory[card]),
        GPUSHARE_ASSIGNED: "false",
        GPUSHARE_ASSUME_TIME: str(int(now * 1e9)),
    }


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}
