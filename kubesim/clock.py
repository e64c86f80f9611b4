"""Clocks that drive the simulated cluster.

All of kubesim's notion of time goes through a ``Clock`` so that the same
controllers run in scaled real time (``RealClock``) for ``make run`` and the
HTTP benchmarks, and in virtual time (``ManualClock``) for deterministic tests
and trace replays, where nothing happens until someone advances the clock.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from functools import lru_cache


class Clock:
    """``now()`` is seconds since the epoch in cluster time."""

    def now(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def real_seconds_until(self, when: float) -> float:
        """How long to really sleep before cluster time reaches ``when`` (None: never by itself)."""
        raise NotImplementedError  # pragma: no cover - interface

    @property
    def manual(self) -> bool:
        return False


class RealClock(Clock):
    """Wall-clock time sped up by ``speed`` (2.0: a simulated minute passes in 30 real seconds)."""

    def __init__(self, speed: float = 1.0, start: float | None = None):
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self._start = time.time() if start is None else start
        self._origin = time.monotonic()

    def now(self) -> float:
        return self._start + (time.monotonic() - self._origin) * self.speed

    def real_seconds_until(self, when: float) -> float:
        return max(0.0, (when - self.now()) / self.speed)


class ManualClock(Clock):
    """Virtual time that only moves when ``advance``/``set`` is called.

    The default start is a fixed instant so that timestamps in tests are reproducible.
    """

    DEFAULT_START = 1_700_000_000.0  # 2023-11-14T22:13:20Z

    def __init__(self, start: float = DEFAULT_START):
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def set(self, when: float) -> None:
        with self._lock:
            if when < self._now:
                raise ValueError("a clock does not go backwards")
            self._now = float(when)

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += seconds
            return self._now

    def real_seconds_until(self, when: float) -> float:
        return float("inf")

    @property
    def manual(self) -> bool:
        return True


def rfc3339(ts: float) -> str:
    """metav1.Time: second precision, UTC, 'Z'."""
    return _rfc3339_seconds(int(ts))


@lru_cache(maxsize=1024)
def _rfc3339_seconds(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(ts: float) -> str:
    """metav1.MicroTime, as a Lease's renewTime is written."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """Parse an RFC 3339 timestamp (with 'Z' or an offset, optional fraction) to epoch seconds."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
