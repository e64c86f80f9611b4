"""What the cycle reads of the usage table (issue 37): each namespace's past GPU-hours, decayed,
for fair share with memory (JOBDASH_FAIR_HALF_LIFE_DAYS), and this month's GPU-hours against
the budgets namespaces have (`Namespace.gpu_hour_budget`): the planner holds or admits last
those past theirs (queueing/holds.py Budget), the pages show every budget's use (publish).

Usage moves by the minute, not by the cycle: both are read at most every READ_EVERY_S.
"""

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from jobdash.usage.selectors import decayed_gpu_hours, month_gpu_hours
from queueing.holds import Budget

READ_EVERY_S = 60.0


class TeamUsage:
    """Kept by the Dispatcher between cycles."""

    def __init__(self, half_life_days: float | None) -> None:
        self.half_life_days = half_life_days
        self._past: tuple[float, dict[str, float]] = (float("-inf"), {})
        self._month: tuple[float, dict[str, float]] = (float("-inf"), {})

    def past(self, now: float) -> dict[str, float]:
        """Decayed GPU-hours per namespace; {} without a half-life (fair share without memory)."""
        if not self.half_life_days:
            return {}
        at, value = self._past
        if now - at >= READ_EVERY_S:
            value = decayed_gpu_hours(datetime.fromtimestamp(now, UTC), self.half_life_days)
            self._past = (now, value)
        return value

    def budgets(self, namespaces: Iterable[Mapping[str, Any]], now: float) -> tuple[dict[str, Budget], dict[str, dict]]:
        """Those past their budget (for the planner), and every budget's use (for the pages)."""
        budgeted = {row["name"]: row for row in namespaces if row.get("gpu_hour_budget")}
        if not budgeted:
            return {}, {}
        at, used = self._month
        if now - at >= READ_EVERY_S:
            used = month_gpu_hours(list(budgeted), datetime.fromtimestamp(now, UTC))
            self._month = (now, used)
        over, shown = {}, {}
        for name, row in budgeted.items():
            hours, budget, mode = used.get(name, 0.0), float(row["gpu_hour_budget"]), row["over_budget"] or "borrow"
            shown[name] = {"used": round(hours, 1), "budget": budget, "mode": mode}
            if hours >= budget:
                over[name] = Budget(hours, budget, mode)
        return over, shown
