"""One table of GPU-sharing device models: which resources a pod asks a share of a card by.

A model is data, so a cluster running another sharing device plugin adds a row
(``register``) instead of code.  Two rows ship:

- ``gpushare`` (Alibaba's gpushare-scheduler-extender): a pod asks ``aliyun.com/gpu-mem``
  MiB on one card; a node reports the total as ``aliyun.com/gpu-mem`` and its cards as
  ``aliyun.com/gpu-count``.  Its nodes share by memory only, so a pod asking whole cards
  (``nvidia.com/gpu``) does not go there.
- ``hami`` (HAMi): a pod asks ``nvidia.com/gpu`` vGPUs of ``nvidia.com/gpumem`` MiB each,
  each vGPU on a different card; its total for quota is memory x count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceModel:
    name: str
    memory: str  # the resource a pod asks MiB of (per card)
    count: str | None = None  # the resource saying on how many cards (None: always one)
    # A whole-card resource such a node never hands out: a node shares or allocates, never both.
    whole: str | None = None
    node_count: str | None = None  # the node's allocatable card count, if reported apart

    def demand(self, requests: Mapping[str, int]) -> tuple[int, int] | None:
        """(MiB per card, cards) a pod asks, or None if it asks no share of this model."""
        memory = requests.get(self.memory, 0)
        if memory <= 0:
            return None
        cards = requests.get(self.count, 1) if self.count is not None else 1
        return memory, max(cards, 1)

    def quota_total(self, requests: Mapping[str, int]) -> int:
        """The MiB the pod takes in all, what a memory quota counts."""
        demand = self.demand(requests)
        return 0 if demand is None else demand[0] * demand[1]


MODELS: dict[str, DeviceModel] = {}


def register(model: DeviceModel) -> DeviceModel:
    MODELS[model.name] = model
    return model


GPUSHARE = register(
    DeviceModel("gpushare", "aliyun.com/gpu-mem", whole="nvidia.com/gpu", node_count="aliyun.com/gpu-count")
)
HAMI = register(DeviceModel("hami", "nvidia.com/gpumem", count="nvidia.com/gpu"))
# The pod annotation gpushare writes the chosen card's index to.
ALIYUN_COM_GPU_MEM_IDX = "ALIYUN_COM_GPU_MEM_IDX"


def model(name: str) -> DeviceModel:
    found = MODELS.get(name)
    if found is None:
        raise ValueError(f"unknown device model {name!r}; known: {sorted(MODELS)}")
    return found
