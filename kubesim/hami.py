"""HAMi's vGPUs: what its scheduler extender and device plugin do.

A HAMi node registers its cards in the annotation ``hami.io/node-nvidia-register``
(``<uuid>,<split>,<devmem MiB>,<devcore>,<type>,<numa>,<healthy>:`` per card, index 0..N-1;
fields after healthy are ignored) and allocatable ``nvidia.com/gpu`` = the sum of the splits.
A container asks ``nvidia.com/gpu: n`` vGPUs, each on a different card, of
``nvidia.com/gpumem`` MiB (absent: the whole card) and ``nvidia.com/gpucores`` percent (absent:
0). A card holds at most ``split`` vGPUs, ``devmem`` MiB and ``devcore`` cores; an unhealthy
card holds none; a vGPU of all the cores needs the card to itself. Cards are chosen by binpack
on free memory (the least free first, the lowest index among equals) and recorded on the pod at
bind (``hami.io/vgpu-devices-to-allocate``: ``<uuid>,NVIDIA,<mem>,<cores>:`` per vGPU, one
``;``-terminated group per container that asks GPUs). A pod already naming its cards (jobdash
pins them) goes there or nowhere. A card's use is read back from the live pods' annotations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .quota import canonical

REGISTER = "hami.io/node-nvidia-register"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"
VGPU_NODE = "hami.io/vgpu-node"
VGPU_TIME = "hami.io/vgpu-time"
BIND_PHASE = "hami.io/bind-phase"
GPU = "nvidia.com/gpu"
GPUMEM = "nvidia.com/gpumem"
GPUCORES = "nvidia.com/gpucores"
# HAMi's scheduler manages these (managedResources ... ignoredByScheduler: true): the default
# scheduler's NodeResourcesFit does not look for them on a HAMi node.
IGNORED_BY_SCHEDULER = frozenset({GPUMEM, GPUCORES})


@dataclass(frozen=True)
class Card:
    uuid: str
    split: int
    devmem: int
    devcore: int
    healthy: bool


@dataclass(frozen=True)
class VGPUs:
    """One container's ask: ``count`` vGPUs of ``mem`` MiB (None: the whole card) and ``cores``."""

    count: int
    mem: int | None
    cores: int


Usage = Mapping[str, tuple[int, int, int]]  # card uuid -> (MiB, cores, vGPUs) in use


def cards(node: Mapping) -> list[Card] | None:
    """The cards a HAMi node registered, None for a node without the annotation."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(REGISTER)
    if not isinstance(text, str):
        return None
    found: list[Card] = []
    for entry in text.split(":"):
        fields = entry.split(",")
        if len(fields) < 7:
            continue  # the trailing empty entry, or a malformed one HAMi would skip too
        try:
            split, devmem, devcore = int(fields[1]), int(fields[2]), int(fields[3])
        except ValueError:
            continue
        found.append(Card(fields[0], split, devmem, devcore, fields[6].strip().lower() == "true"))
    return found


def _amount(resources: Mapping, name: str) -> int | None:
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(name)
        if value is not None:
            return canonical(name, value)
    return None


def requests(spec: Mapping) -> list[VGPUs]:
    """The vGPUs of each container that asks for any (asking memory or cores alone means one)."""
    asked: list[VGPUs] = []
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        count, mem, cores = _amount(resources, GPU), _amount(resources, GPUMEM), _amount(resources, GPUCORES)
        if count is None and (mem or cores):
            count = 1
        if count:
            asked.append(VGPUs(count, mem, cores or 0))
    return asked


def parse_devices(text: object) -> list[list[tuple[str, int, int]]]:
    """``uuid,NVIDIA,mem,cores:...:;...`` -> per container, its (uuid, mem, cores) devices."""
    groups: list[list[tuple[str, int, int]]] = []
    if not isinstance(text, str):
        return groups
    for group in text.split(";")[:-1] if text.endswith(";") else text.split(";"):
        devices = []
        for device in group.split(":"):
            fields = device.split(",")
            if len(fields) >= 4 and fields[2].isdigit() and fields[3].isdigit():
                devices.append((fields[0], int(fields[2]), int(fields[3])))
        groups.append(devices)
    return groups


def charge(pod: Mapping) -> list[tuple[str, int, int]]:
    """The (uuid, MiB, cores) of every vGPU a pod holds, from its annotations."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ALLOCATED) or annotations.get(TO_ALLOCATE)
    return [device for group in parse_devices(text) for device in group]


def _fits(card: Card, mem: int, cores: int, used: tuple[int, int, int]) -> bool:
    used_mem, used_cores, used_count = used
    if not card.healthy or used_count >= card.split or used_mem + mem > card.devmem:
        return False
    if card.devcore and used_cores >= card.devcore:
        return False  # a vGPU holds all its cores: the card is taken
    if cores >= card.devcore and used_count > 0:
        return False  # all the cores: the card to itself
    return used_cores + cores <= card.devcore


def choose(
    node_cards: list[Card], used: Usage, asked: list[VGPUs], pinned: list[list[str]] | None
) -> list[list[tuple[str, int, int]]] | str:
    """Per container, the (uuid, MiB, cores) of its vGPUs, or why the node cannot hold them."""
    usage: dict[str, tuple[int, int, int]] = {card.uuid: used.get(card.uuid, (0, 0, 0)) for card in node_cards}
    by_uuid = {card.uuid: card for card in node_cards}
    chosen: list[list[tuple[str, int, int]]] = []
    for i, ask in enumerate(asked):
        if pinned is not None:
            names = pinned[i] if i < len(pinned) else []
            if len(names) != ask.count or len(set(names)) != len(names):
                return f"the pod's {TO_ALLOCATE} names {len(set(names))} GPUs for a container asking {ask.count}"
            missing = [name for name in names if name not in by_uuid]
            if missing:
                return f"the node has no GPU {missing[0]}"
            candidates = [by_uuid[name] for name in names]
        else:
            candidates = list(node_cards)
        fitting = []
        for index, card in enumerate(candidates):
            mem = card.devmem if ask.mem is None else ask.mem
            if _fits(card, mem, ask.cores, usage[card.uuid]):
                fitting.append((card.devmem - usage[card.uuid][0], index, card, mem))
        if len(fitting) < ask.count or (pinned is not None and len(fitting) < len(candidates)):
            return _refusal(ask, pinned is not None)
        devices = []
        for _free, _index, card, mem in sorted(fitting, key=lambda f: (f[0], f[1]))[: ask.count]:
            used_mem, used_cores, used_count = usage[card.uuid]
            usage[card.uuid] = (used_mem + mem, used_cores + ask.cores, used_count + 1)
            devices.append((card.uuid, mem, ask.cores))
        chosen.append(devices)
    return chosen


def _refusal(ask: VGPUs, pinned: bool) -> str:
    vgpu = "a vGPU of " + ("all its memory" if ask.mem is None else f"{ask.mem} MiB")
    if ask.cores:
        vgpu += f" and {ask.cores} cores"
    if pinned:
        return f"the pod's GPUs on the node have no room for {vgpu}"
    if ask.count == 1:
        return f"no GPU on the node has room for {vgpu}"
    return f"fewer than {ask.count} GPUs on the node have room for {vgpu}"


def encode(chosen: list[list[tuple[str, int, int]]]) -> str:
    return "".join("".join(f"{uuid},NVIDIA,{mem},{cores}:" for uuid, mem, cores in group) + ";" for group in chosen)


def pinned_devices(pod: Mapping) -> list[list[str]] | None:
    """The cards a pod already names, per container, None if it names none."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(TO_ALLOCATE)
    if not text:
        return None
    return [[uuid for uuid, _mem, _cores in group] for group in parse_devices(text)]


def bind_annotations(chosen: list[list[tuple[str, int, int]]], node: str, now: float) -> dict[str, str]:
    """What HAMi's scheduler writes on the pod when it binds it."""
    return {
        VGPU_NODE: node,
        VGPU_TIME: str(int(now)),
        BIND_PHASE: "allocating",
        TO_ALLOCATE: encode(chosen),
    }


def started_annotations(pod: Mapping) -> dict[str, str]:
    """HAMi's device plugin's Allocate: the devices handed over, the bind a success."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if annotations.get(TO_ALLOCATE) and annotations.get(BIND_PHASE) != "success":
        return {ALLOCATED: annotations[TO_ALLOCATE], BIND_PHASE: "success"}
    return {}
