"""Finished jobs' run times by (namespace, shape): what the dispatcher's snapshot_phase.history()
gives the planner, and the no-oracle duration estimate made from it."""

from __future__ import annotations

import statistics
from collections import deque

from queueing.eta import shape_key

from .mapping import workload_of


class DurationHistory:
    """The last ``size`` runs per (namespace, shape), among the last ``window`` finished jobs
    (snapshot_phase.history() reads the latest 2000 finished jobs and keeps 20 per key)."""

    def __init__(self, size: int, window: int):
        self.size = size
        self.window = window
        self.runs: dict[tuple[str, str], deque] = {}  # key -> (finish number, run seconds), newest first
        self.finished = 0
        self._shapes: dict[int, str] = {}
        self._map: dict[tuple[str, str], tuple[float, ...]] | None = None

    def shape(self, gpus: int) -> str:
        found = self._shapes.get(gpus)
        if found is None:
            found = self._shapes[gpus] = shape_key(workload_of(gpus))
        return found

    def record(self, vc: str, gpus: int, seconds: float) -> None:
        self.finished += 1
        self._map = None
        key = (vc, self.shape(gpus))
        runs = self.runs.get(key)
        if runs is None:
            runs = self.runs[key] = deque(maxlen=self.size)
        runs.appendleft((self.finished, seconds))

    def _recent(self, runs) -> tuple[float, ...]:
        cut = self.finished - self.window
        return tuple(seconds for number, seconds in runs if number > cut)

    def estimate(self, vc: str, gpus: int) -> float | None:
        """eta.duration_of's history branch: the median of the namespace's recent runs of this shape."""
        runs = self.runs.get((vc, self.shape(gpus)))
        recent = self._recent(runs) if runs else ()
        return float(statistics.median(recent)) if recent else None

    def as_map(self) -> dict[tuple[str, str], tuple[float, ...]]:
        """Snapshot.history; rebuilt only after a job finished."""
        if self._map is None:
            result = {}
            for key, runs in self.runs.items():
                recent = self._recent(runs)
                if recent:
                    result[key] = recent
            self._map = result
        return self._map
