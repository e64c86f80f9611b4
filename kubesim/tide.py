"""When a lent pool's nodes are lent: a nightly window in a time zone, or once until a time.

A nightly window is wall-clock time in its zone (zoneinfo), so 22:00-08:00 in
Europe/Berlin stays 22:00-08:00 across a DST change: that night is an hour shorter or
longer in seconds. A wall-clock time that does not exist that day (inside a spring-forward
gap) is read with the offset before the change, as zoneinfo's fold=0 does; an ambiguous
one (autumn) is its first occurrence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .clock import parse_time

Window = tuple[float, float]  # (lent from, reclaimed at), epoch seconds
_HH_MM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True)
class Nightly:
    start: time
    end: time
    zone: ZoneInfo

    def _window_of(self, day: date) -> Window:
        """The window that starts on ``day`` (local date); it ends the next day when end <= start."""
        start = datetime.combine(day, self.start, tzinfo=self.zone)
        end_day = day + timedelta(days=1) if self.end <= self.start else day
        end = datetime.combine(end_day, self.end, tzinfo=self.zone)
        return start.timestamp(), end.timestamp()

    def next_window(self, now: float, started: float) -> Window | None:
        """The window containing ``now`` (start <= now < end), else the next one to start."""
        del started  # a nightly pool does not care when kubesim started
        today = datetime.fromtimestamp(now, tz=self.zone).date()
        for offset in (-1, 0, 1):
            window = self._window_of(today + timedelta(days=offset))
            if now < window[1]:
                return window
        raise AssertionError("a window starting tomorrow ends after now")  # pragma: no cover


@dataclass(frozen=True)
class Until:
    until: float

    def next_window(self, now: float, started: float) -> Window | None:
        """Lent from kubesim's start until the time, once."""
        return (started, self.until) if now < self.until else None


Schedule = Nightly | Until


def _wall_time(value: object, field: str) -> time:
    match = _HH_MM.match(str(value)) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{field}: must be a wall-clock time HH:MM (00:00..23:59), not {value!r}")
    return time(int(match.group(1)), int(match.group(2)))


def parse_schedule(data: object, field: str) -> Schedule:
    """``{start: "22:00", end: "08:00", timezone: "Europe/Berlin"}`` or ``{until: "<RFC 3339>"}``."""
    if not isinstance(data, dict):
        raise ValueError(f"{field}: must be a mapping ({{start, end, timezone}} or {{until}})")
    if "until" in data:
        if set(data) != {"until"}:
            raise ValueError(f"{field}: `until` goes alone, without {sorted(set(data) - {'until'})}")
        value = data["until"]
        if isinstance(value, datetime):  # YAML reads an unquoted timestamp as a datetime
            value = value.isoformat()
        try:
            until = parse_time(str(value))
        except ValueError:
            raise ValueError(f"{field}.until: must be an RFC 3339 time, not {value!r}") from None
        return Until(until)
    unknown = set(data) - {"start", "end", "timezone"}
    if unknown:
        raise ValueError(f"{field}: unknown keys {sorted(unknown)}")
    for key in ("start", "end", "timezone"):
        if key not in data:
            raise ValueError(f"{field}.{key}: is required (or give `until` alone)")
    try:
        zone = ZoneInfo(str(data["timezone"]))
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{field}.timezone: unknown IANA time zone {data['timezone']!r}") from None
    start, end = _wall_time(data["start"], f"{field}.start"), _wall_time(data["end"], f"{field}.end")
    return Nightly(start, end, zone)
