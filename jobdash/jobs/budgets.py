"""How a namespace's GPU-hour budget reads on the pages (issue 37; the figures are the dispatcher's,
published with its quota: dispatch/phases/team_usage.py)."""

from collections.abc import Mapping
from typing import Any


def budget_words(namespace: str, budget: Mapping[str, Any] | None) -> str:
    """A namespace's GPU-hour budget this month (issue 37), said before anyone is surprised:
    from 80 % of it on, and what happens to its jobs past it (the dispatcher's figures)."""
    if not budget or not budget.get("budget"):
        return ""
    used, limit = float(budget["used"]), float(budget["budget"])
    if used < 0.8 * limit:
        return ""
    said = f"{namespace} has used {used:,.0f} of its {limit:,.0f} GPU-h budget this month"
    if used < limit:
        return said + "."
    if budget.get("mode") == "wait":
        return said + ": its jobs wait for the next month or a larger budget."
    return said + ": its jobs run only on capacity nobody else wants, and are the first to be preempted."
