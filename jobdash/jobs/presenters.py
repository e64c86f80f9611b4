"""How stored numbers read to people: the API and the pages show the same words."""

from queueing import format_quantity


def demand_summary(workload: dict) -> dict:
    """Total requests as Kubernetes quantities, plus the pod count."""
    requests = workload.get("requests", {})
    summary = {name: format_quantity(name, amount) for name, amount in sorted(requests.items())}
    summary["pods"] = workload.get("pods", 0)
    return summary
