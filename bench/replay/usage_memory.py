"""Fair share with memory in the replay (issue 37): each VC's past GPU-hours, decayed with the
policy's half-life (``Policy.usage_half_life_days``, in the replay's own seconds), given to the
planner as ``Snapshot.usage`` as the dispatcher gives it the usage table's (jobdash/usage).

A run counts when it ends (finished or preempted); what runs now is the fair share's other term.
"""

from __future__ import annotations

DAY = 86_400.0


class UsageMemory:
    def __init__(self, half_life_days: float | None):
        self.half_life_s = None if half_life_days is None else half_life_days * DAY
        self.hours: dict[str, tuple[float, float]] = {}  # vc -> (decayed GPU-hours, as of)

    def add(self, vc: str, gpu_s: float, now: float) -> None:
        if self.half_life_s is None or not gpu_s > 0:
            return
        self.hours[vc] = (self._at(vc, now) + gpu_s / 3600.0, now)

    def _at(self, vc: str, now: float) -> float:
        assert self.half_life_s is not None
        value, since = self.hours.get(vc, (0.0, now))
        return value * 0.5 ** (max(now - since, 0.0) / self.half_life_s)

    def usage(self, now: float) -> dict[str, float]:
        if self.half_life_s is None:
            return {}
        return {vc: self._at(vc, now) for vc in self.hours}
