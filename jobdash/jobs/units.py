"""Amounts as the pages write them: one unit per resource wherever amounts of it stand
together (a quota bar's used, reserved, hard and free; the submit check's needed, free and
hard; a node's used, total and free), so that they can be compared at a glance: CPU in
cores ("26.5 used of 64", never "26500m ... of 64"), bytes in the binary unit of the largest
amount ("42.5Gi used of 256Gi"), everything else as the count it is. The API keeps
Kubernetes' quantities (presenters.demand_summary, quota_summary)."""

from collections.abc import Mapping
from fractions import Fraction

from queueing.quantity import is_byte_resource

_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def resource_of(key: str) -> str:
    """A ResourceQuota key's resource: "requests.cpu" -> "cpu"."""
    return key.split(".", 1)[1] if key.startswith(("requests.", "limits.")) else key


def readable(resource: str, *amounts: int) -> list[str]:
    """Canonical amounts of one resource (millicores, bytes, counts) in one unit; a zero is
    "0" in any unit."""
    if resource == "cpu":
        return [_decimal(Fraction(amount, 1000), 3) for amount in amounts]
    if is_byte_resource(resource):
        top = max((abs(amount) for amount in amounts), default=0)
        suffix, shift = next(((s, n) for s, n in _BINARY if top >= 1 << n), ("", 0))
        return [_decimal(Fraction(amount, 1 << shift), 2) + suffix if amount else "0" for amount in amounts]
    return [str(amount) for amount in amounts]


def readable_one(resource: str, amount: int) -> str:
    return readable(resource, amount)[0]


def readable_all(amounts: Mapping[str, int]) -> dict[str, str]:
    """A demand ({"cpu": 8500, "memory": ...}) each in its own unit: {"cpu": "8.5", ...}."""
    return {name: readable_one(name, amount) for name, amount in sorted(amounts.items())}


def _decimal(value: Fraction, places: int) -> str:
    rounded = round(value, places)
    if rounded == 0 and value > 0:  # (a sliver still shows as something)
        return f"<0.{'0' * (places - 1)}1"
    return f"{float(rounded):.{places}f}".rstrip("0").rstrip(".")
