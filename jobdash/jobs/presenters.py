"""How stored numbers read to people: the API and the pages show the same words."""

from queueing import format_quantity


def _quantities(amounts: dict) -> dict:
    return {name: format_quantity(name, amount) for name, amount in sorted(amounts.items())}


def demand_summary(workload: dict) -> dict:
    """Total requests as Kubernetes quantities, plus the pod count."""
    summary = _quantities(workload.get("requests", {}))
    summary["pods"] = workload.get("pods", 0)
    return summary


def pod_set_rows(workload: dict) -> list[dict]:
    """One row per replica type, per-pod requests and limits as quantities."""
    return [
        {
            "role": pod_set["role"],
            "count": pod_set["count"],
            "requests": _quantities(pod_set.get("requests", {})),
            "limits": _quantities(pod_set.get("limits", {})),
        }
        for pod_set in workload.get("pod_sets", [])
    ]


def quota_quantity(key: str, amount: int) -> str:
    """An amount of a ResourceQuota key as a quantity: ("requests.cpu", 20000) -> "20"."""
    resource = key.split(".", 1)[1] if key.startswith(("requests.", "limits.")) else key
    return format_quantity(resource, amount)


def quota_amounts(amounts: dict) -> dict:
    """ResourceQuota-keyed integers as quantities: {"requests.cpu": 20000} -> {"requests.cpu": "20"}."""
    return {key: quota_quantity(key, amount) for key, amount in sorted(amounts.items())}


def quota_summary(quota: dict | None) -> dict | None:
    """hard / used / reserved of one namespace, as quantities; None when it has no ResourceQuota."""
    if not quota:
        return None
    return {part: quota_amounts(quota.get(part, {})) for part in ("hard", "used", "reserved")}
