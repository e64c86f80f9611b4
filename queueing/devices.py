"""One table of GPU-sharing device models: which resources a pod asks a share of a card by.

A model is data, so a cluster running another sharing device plugin adds a row
(``register``) instead of code.  Two rows ship:

- ``gpushare`` (Alibaba's gpushare-scheduler-extender): a pod asks ``aliyun.com/gpu-mem``
  MiB on one card; a node reports the total as ``aliyun.com/gpu-mem`` and its cards as
  ``aliyun.com/gpu-count``.  Its nodes share by memory only, so a pod asking whole cards
  (``nvidia.com/gpu``) does not go there.
- ``hami`` (HAMi): a pod asks ``nvidia.com/gpu`` vGPUs of ``nvidia.com/gpumem`` MiB each,
  each vGPU on a different card (no memory asked: a whole card each); its total for quota is
  memory x count, the derived key ``nvidia.com/total-gpumem`` (as Kueue's
  ResourceTransformation), which the API server does not count and jobdash does.

MIG slices (``nvidia.com/mig-1g.5gb`` ...) and time-sliced GPUs (``nvidia.com/gpu.shared``)
need no row: their device plugins publish each slice or replica as a countable resource,
which the planner and the API server count as any other.

``protocol`` names how the cluster shows the cards and how a pod is pinned to one
(jobdash/cluster/devices.py): a site's own model reuses one of the two.
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
    total: str | None = None  # a derived resource: memory x count, for quota (None: not derived)
    protocol: str = "gpushare"  # "gpushare" | "hami": how the cluster shows and pins cards

    def demand(self, requests: Mapping[str, int], whole_card: int = 0) -> tuple[int, int] | None:
        """(MiB per card, cards) a pod asks, or None if it asks no share of this model.
        A pod asking cards of a model that counts them but no memory takes ``whole_card``
        MiB on each (HAMi gives it the whole card); 0: unknown, no share."""
        memory = requests.get(self.memory, 0)
        cards = requests.get(self.count, 0) if self.count is not None else 0
        if memory <= 0:
            if cards <= 0 or whole_card <= 0:
                return None
            memory = whole_card
        return memory, max(cards, 1)

    def quota_total(self, requests: Mapping[str, int]) -> int:
        """The MiB the pod takes in all, what a memory quota counts."""
        demand = self.demand(requests)
        return 0 if demand is None else demand[0] * demand[1]

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> DeviceModel:
        """A row from configuration (JOBDASH_DEVICE_MODELS); a ValueError names what is wrong."""
        fields = {"name", "memory", "count", "whole", "node_count", "total", "protocol"}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}; known: {sorted(fields)}")
        for required in ("name", "memory"):
            if not isinstance(data.get(required), str) or not data[required]:
                raise ValueError(f"{required!r} must be a non-empty string")
        values = {key: data[key] for key in fields if data.get(key) is not None}
        for key, value in values.items():
            if not isinstance(value, str):
                raise ValueError(f"{key!r} must be a string")
        if values.get("protocol", "gpushare") not in PROTOCOLS:
            raise ValueError(f"'protocol' must be one of {list(PROTOCOLS)}")
        return cls(**values)  # type: ignore[arg-type]


PROTOCOLS = ("gpushare", "hami")
MODELS: dict[str, DeviceModel] = {}


def register(model: DeviceModel) -> DeviceModel:
    MODELS[model.name] = model
    return model


GPUSHARE = register(
    DeviceModel("gpushare", "aliyun.com/gpu-mem", whole="nvidia.com/gpu", node_count="aliyun.com/gpu-count")
)
HAMI = register(
    DeviceModel("hami", "nvidia.com/gpumem", count="nvidia.com/gpu", total="nvidia.com/total-gpumem", protocol="hami")
)
# The pod annotation gpushare writes the chosen card's index to.
ALIYUN_COM_GPU_MEM_IDX = "ALIYUN_COM_GPU_MEM_IDX"


def model(name: str) -> DeviceModel:
    found = MODELS.get(name)
    if found is None:
        raise ValueError(f"unknown device model {name!r}; known: {sorted(MODELS)}")
    return found


def derived_totals(requests: Mapping[str, int]) -> dict[str, int]:
    """The derived resources (``DeviceModel.total``) one pod with these requests takes."""
    totals: dict[str, int] = {}
    for found in MODELS.values():
        if found.total is not None and (amount := found.quota_total(requests)):
            totals[found.total] = totals.get(found.total, 0) + amount
    return totals
