"""Elastic quota settings of a namespace (issue #15): what an admin may set, checked.

A namespace's ResourceQuota `hard` stays its ceiling. On top of it an admin sets:

- `guaranteed`: {quota key: quantity}, the share it always gets back (empty: not elastic);
- `cohort`: the namespaces that lend each other idle guaranteed capacity ("" the cluster-wide one);
- `borrowing_limit`: {guaranteed key: quantity}, the most it may borrow beyond its guarantee.

Keys are ResourceQuota compute keys: `requests.<resource>`, or bare `cpu`, `memory`,
`ephemeral-storage` (which ResourceQuota reads as their requests). A guaranteed key must be
one the namespace's ResourceQuota limits, the guarantee at most its hard (when the last cycle
saw the quota), and a cohort cannot
guarantee more of a resource than the cluster's schedulable nodes hold in all.

The values are stored as written (quantity strings); `amounts()` gives the canonical integers
the planner uses (queueing.snapshot.NamespaceQuota.guaranteed / borrowing_limit).

Every refusal is a django ValidationError keyed by the field ("guaranteed", "cohort",
"borrowing_limit") whose message names the key and the numbers: the admin shows it on the
field, the API answers 400 with the field as the path.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from queueing import canonical, format_quantity, parse_quantity
from queueing.quantity import is_whole

FIELDS = ("guaranteed", "cohort", "borrowing_limit")
# ResourceQuota reads these bare names as their requests (queueing/workload.py).
BARE = ("cpu", "memory", "ephemeral-storage")
COHORT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# A resource name as Kubernetes validates it: an optional DNS-subdomain prefix and a name.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
EXTENDED = re.compile(rf"{_PREFIX}/{_NAME}")
HUGEPAGES = re.compile(r"hugepages-[0-9]+[KMGTPE]i?")
ACCEPTED = "requests.cpu (or cpu), requests.memory (or memory), requests.ephemeral-storage, requests.nvidia.com/gpu"


def resource_of(key: str) -> str:
    """The node resource a quota key charges: `requests.nvidia.com/gpu` -> `nvidia.com/gpu`, `cpu` -> `cpu`."""
    return key.removeprefix("requests.")


def key_problem(key: Any) -> str | None:
    """Why `key` cannot have a guarantee, or None if it is a compute key."""
    if not isinstance(key, str) or not key:
        return "a quota key is a non-empty string"
    shown = key if len(key) <= 80 else key[:80] + "…"
    if key.startswith("limits."):
        return (
            f"{shown}: limits are not guaranteed or lent; guarantee the requests instead "
            f"(requests.{key.removeprefix('limits.')})"
        )
    if key.startswith("count/"):
        return f"{shown}: an object count cannot be guaranteed, only compute resources: {ACCEPTED}"
    if key in BARE:
        return None
    if key.startswith("requests."):
        name = key.removeprefix("requests.")
        if name in BARE or HUGEPAGES.fullmatch(name) or (len(name) <= 317 and EXTENDED.fullmatch(name)):
            return None
        if name == "storage":
            return (
                f"{shown}: storage is claimed by PersistentVolumeClaims, not by pods on nodes; it cannot be guaranteed"
            )
        return (
            f"{shown}: not a compute resource; an extended resource is named <domain>/<name>, "
            f"e.g. requests.nvidia.com/gpu"
        )
    return f"{shown}: not a compute resource quota key; use {ACCEPTED} or requests.<domain>/<name>"


def _quantity(field: str, key: str, value: Any) -> tuple[str, int]:
    """(the text to store, the canonical amount), or a ValidationError on `field`."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValidationError({field: f"{key}: a quantity such as 16, 500m or 64Gi, got {type(value).__name__}"})
    text = value.strip() if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    resource = resource_of(key)
    try:
        parsed = parse_quantity(text)
        amount = canonical(resource, text)
    except ValueError as error:
        raise ValidationError({field: f"{key}: {error}"}) from None
    if parsed < 0:
        raise ValidationError({field: f"{key}: must be >= 0, got {text}"})
    if resource != "cpu" and not is_whole(parsed):
        raise ValidationError({field: f"{key}: {text} is not a whole number of {resource}"})
    return text, amount


def _amounts_field(field: str, values: Any) -> tuple[dict[str, str], dict[str, int]]:
    if values is None or values == "":
        return {}, {}
    if not isinstance(values, Mapping):
        raise ValidationError({field: 'an object of quota keys and quantities, e.g. {"requests.nvidia.com/gpu": "16"}'})
    texts: dict[str, str] = {}
    amounts: dict[str, int] = {}
    seen: dict[str, str] = {}
    problems = []
    for key, value in values.items():
        problem = key_problem(key)
        if problem is not None:
            problems.append(problem)
            continue
        resource = resource_of(key)
        if resource in seen:
            problems.append(f"{seen[resource]} and {key} are the same resource: give one of them")
            continue
        seen[resource] = key
        try:
            texts[key], amounts[key] = _quantity(field, key, value)
        except ValidationError as error:
            problems.extend(error.message_dict[field])
    if problems:
        raise ValidationError({field: problems})
    return texts, amounts


def amounts(values: Mapping[str, Any] | None) -> dict[str, int]:
    """Stored quantities as canonical integers (cpu in millicores): what the planner reads.
    Entries that do not parse are left out (they cannot be saved through this module)."""
    found: dict[str, int] = {}
    for key, value in (values or {}).items():
        try:
            found[key] = canonical(resource_of(key), value)
        except (TypeError, ValueError):
            continue
    return found


def _clean_cohort(cohort: Any) -> str:
    if cohort is None:
        return ""
    if not isinstance(cohort, str):
        raise ValidationError({"cohort": "a cohort is a name (text)"})
    cohort = cohort.strip()
    if cohort and not COHORT_NAME.fullmatch(cohort):
        raise ValidationError(
            {
                "cohort": "a cohort name is at most 63 lower-case letters, digits and '-', starting and ending alphanumeric"
            }
        )
    return cohort


def cohort_shown(cohort: str) -> str:
    return f"cohort {cohort!r}" if cohort else "the cluster-wide cohort"


@dataclass(frozen=True)
class Member:
    """Another namespace as the cohort check sees it."""

    pk: int
    name: str
    cohort: str
    guaranteed: Mapping[str, Any]


def capacity(nodes: Iterable[Mapping[str, Any]]) -> dict[str, int] | None:
    """Allocatable per node resource over the schedulable nodes; None when no node is known yet."""
    nodes = list(nodes or [])
    if not nodes:
        return None
    total: dict[str, int] = {}
    for node in nodes:
        if node.get("unschedulable"):
            continue
        for resource, amount in (node.get("allocatable") or {}).items():
            total[resource] = total.get(resource, 0) + int(amount)
    return total


def _check_hard(name: str, guaranteed: Mapping[str, int], texts: Mapping[str, str], hard: Mapping[str, int]) -> None:
    """Each guaranteed key is one the namespace's ResourceQuota limits (its status reports the
    usage of those keys only: the planner could not see what the namespace holds of another),
    and the guarantee is at most its hard. Skipped while the cluster's quota is unknown."""
    if not hard:
        return
    problems = []
    for key, amount in guaranteed.items():
        resource = resource_of(key)
        if key not in hard:
            tracked = [alias for alias in (f"requests.{resource}", resource) if alias != key and alias in hard]
            if tracked:
                problems.append(f"{key}: the ResourceQuota of {name} limits {tracked[0]}, not {key}; guarantee that")
            else:
                problems.append(
                    f"{key}: the ResourceQuota of {name} does not limit it (hard: {', '.join(sorted(hard))}), "
                    "so its usage is unknown; add it to the ResourceQuota first"
                )
        elif amount > hard[key]:
            problems.append(
                f"{key}: {texts[key]} is more than the ResourceQuota hard of {name} "
                f"({format_quantity(resource, hard[key])})"
            )
    if problems:
        raise ValidationError({"guaranteed": problems})


def _check_cohort(
    pk: int | None,
    name: str,
    cohort: str,
    guaranteed: Mapping[str, int],
    others: Iterable[Member],
    nodes: Iterable[Mapping[str, Any]],
) -> None:
    """The cohort's guarantees, this namespace's new ones included, must fit the cluster.
    Only a change that adds to the cohort's total of a resource is refused: an admin
    lowering a guarantee in a cohort already over (nodes were removed) is not in the way."""
    total = capacity(nodes)
    if total is None:
        return
    before: dict[str, int] = {}  # what this namespace guaranteed in this cohort until now
    shares: dict[str, list[tuple[str, int]]] = {}
    for member in others:
        if member.cohort != cohort:
            continue
        for key, amount in amounts(member.guaranteed).items():
            resource = resource_of(key)
            if member.pk == pk:
                before[resource] = before.get(resource, 0) + amount
            elif amount:
                shares.setdefault(resource, []).append((member.name, amount))
    problems = []
    for key, amount in guaranteed.items():
        resource = resource_of(key)
        others_sum = sum(a for _, a in shares.get(resource, []))
        held = total.get(resource, 0)
        if amount + others_sum <= held or amount <= before.get(resource, 0):
            continue
        parts = ", ".join(f"{n} {format_quantity(resource, a)}" for n, a in [(name, amount), *shares.get(resource, [])])
        problems.append(
            f"{key}: {cohort_shown(cohort)} would guarantee {format_quantity(resource, amount + others_sum)} "
            f"{resource} in all ({parts}), more than the {format_quantity(resource, held)} the cluster's "
            f"schedulable nodes hold"
        )
    if problems:
        raise ValidationError({"guaranteed": problems})


def clean(
    *,
    pk: int | None,
    name: str,
    guaranteed: Any,
    cohort: Any,
    borrowing_limit: Any,
    others: Iterable[Member],
    hard: Mapping[str, int] | None,
    nodes: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """The three fields as they will be stored, or a ValidationError keyed by field (all
    fields' problems at once). `others`: every namespace as stored (this one included, by
    pk, for what it guaranteed before); `hard` and `nodes`: the cluster as the last cycle saw it."""
    errors: dict[str, list[str]] = {}
    texts: dict[str, str] = {}
    amounts_: dict[str, int] = {}
    limits: dict[str, str] = {}
    cohort_name = ""
    try:
        texts, amounts_ = _amounts_field("guaranteed", guaranteed)
    except ValidationError as error:
        errors.update(error.message_dict)
    try:
        cohort_name = _clean_cohort(cohort)
    except ValidationError as error:
        errors.update(error.message_dict)
    try:
        limits, _ = _amounts_field("borrowing_limit", borrowing_limit)
        strays = [key for key in limits if key not in texts]
        if strays and "guaranteed" not in errors:
            keys = ", ".join(texts) if texts else "none"
            raise ValidationError(
                {
                    "borrowing_limit": [
                        f"{key}: not a guaranteed key; a borrowing limit applies beyond a guarantee "
                        f"(guaranteed keys: {keys})"
                        for key in strays
                    ]
                }
            )
    except ValidationError as error:
        errors.update(error.message_dict)
    if errors:
        raise ValidationError(errors)
    _check_hard(name, amounts_, texts, hard or {})
    _check_cohort(pk, name, cohort_name, amounts_, others, nodes)
    return {"guaranteed": texts, "cohort": cohort_name, "borrowing_limit": limits}
