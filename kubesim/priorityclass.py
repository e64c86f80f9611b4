"""scheduling.k8s.io/v1 PriorityClass, validated and defaulted as the API server does."""

from __future__ import annotations

from .validation import cause, required

INT32_MAX = 2**31 - 1
# Above this, values are reserved for the system's own classes (system-cluster-critical, ...).
HIGHEST_USER_PRIORITY = 1_000_000_000
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


def validate(obj: dict) -> list[dict]:
    """scheduling.k8s.io/v1 PriorityClass, as the API server validates it: value an int32
    no higher than 1e9 (above is for system-* classes), preemptionPolicy one of two."""
    causes: list[dict] = []
    value = obj.get("value")
    if value is None:
        causes.append(required("value"))
    elif isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value <= INT32_MAX:
        causes.append(cause("value", f"Invalid value: {value!r}: must be a 32-bit integer"))
    elif value > HIGHEST_USER_PRIORITY and not str(obj["metadata"].get("name", "")).startswith("system-"):
        causes.append(
            cause(
                "value",
                f"Invalid value: {value}: maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}",
            )
        )
    default = obj.get("globalDefault", False)
    if not isinstance(default, bool):
        causes.append(cause("globalDefault", f"Invalid value: {default!r}: must be a boolean"))
    policy = obj.get("preemptionPolicy", "PreemptLowerPriority")
    if policy not in PREEMPTION_POLICIES:
        causes.append(
            cause(
                "preemptionPolicy",
                f"Unsupported value: {policy!r}: supported values: {', '.join(map(repr, PREEMPTION_POLICIES))}",
                "FieldValueNotSupported",
            )
        )
    description = obj.get("description", "")
    if not isinstance(description, str):
        causes.append(cause("description", "must be a string"))
    return causes


def default(obj: dict) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    obj.setdefault("globalDefault", False)


def validate_update(old: dict, new: dict) -> list[dict]:
    if old.get("value") != new.get("value"):
        return [cause("value", "Forbidden: may not be changed in an update.", "FieldValueForbidden")]
    if old.get("preemptionPolicy") != new.get("preemptionPolicy"):
        return [cause("preemptionPolicy", "Invalid value: field is immutable", "FieldValueInvalid")]
    return []
