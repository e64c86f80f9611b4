"""A namespace's quota as the admission cycle sees it (``Snapshot.quotas``): its
ResourceQuotas' hard and used, its fair-share weight and its elastic quota."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


def _frozen(value: Mapping[str, int] | None) -> Mapping[str, int]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class NamespaceQuota:
    """ResourceQuota status of one namespace (``hard`` and ``used``), plus a fair-share weight.

    Elastic quota (elastic.py): ``guaranteed`` is the namespace's guaranteed share per
    quota key (empty: not elastic, ``hard`` is all it gets, as before); beyond it the
    namespace borrows what its ``cohort`` (namespaces lending to each other; "" is the
    default cohort) leaves idle, up to ``hard`` and to ``borrowing_limit`` more than
    its guarantee per key, if given.
    """

    namespace: str
    hard: Mapping[str, int]
    used: Mapping[str, int] = field(default_factory=dict)
    weight: int = 1
    guaranteed: Mapping[str, int] = field(default_factory=dict)
    cohort: str = ""
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hard", _frozen(self.hard))
        object.__setattr__(self, "used", _frozen(self.used))
        object.__setattr__(self, "guaranteed", _frozen(self.guaranteed))
        object.__setattr__(self, "borrowing_limit", _frozen(self.borrowing_limit))
        if self.weight <= 0:
            raise ValueError(f"weight must be positive, got {self.weight}")
        for name, amounts in (("guaranteed", self.guaranteed), ("borrowing_limit", self.borrowing_limit)):
            for key, amount in amounts.items():
                if amount < 0:
                    raise ValueError(f"{name}[{key!r}] must be >= 0, got {amount}")

    @property
    def elastic(self) -> bool:
        return bool(self.guaranteed)

    @staticmethod
    def combine(quotas: Iterable[NamespaceQuota]) -> NamespaceQuota:
        """Several ResourceQuotas in one namespace: a pod must satisfy all of
        them, so take the tightest hard per key; every quota tracking a key
        reports the same usage for it, and max() is safe if they disagree."""
        quotas = list(quotas)
        if not quotas:
            raise ValueError("combine() needs at least one quota")
        if len({q.namespace for q in quotas}) != 1:
            raise ValueError("combine() takes quotas of one namespace")
        hard: dict[str, int] = {}
        used: dict[str, int] = {}
        for quota in quotas:
            for key, amount in quota.hard.items():
                hard[key] = min(amount, hard.get(key, amount))
            for key, amount in quota.used.items():
                used[key] = max(amount, used.get(key, amount))
        first = quotas[0]
        return NamespaceQuota(
            first.namespace,
            hard,
            used,
            max(q.weight for q in quotas),
            first.guaranteed,
            first.cohort,
            first.borrowing_limit,
        )
