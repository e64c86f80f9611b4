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
