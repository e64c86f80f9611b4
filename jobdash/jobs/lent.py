"""Lent capacity's clock: when a declared node pool is lent, and when it goes back.

A pool is lent nightly (``start`` to ``end`` wall-clock time in its time zone, the end on
the next day when it is not after the start) or once, until a time. Wall-clock times in
the zone, not fixed offsets: on the night the clocks change a 22:00-08:00 window is nine
or eleven hours long, as the people who lend it count it. Pure functions of the pool's
fields and a time: the dispatcher, the pages and the API ask the same ones.
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

NIGHTLY = "nightly"
UNTIL = "until"
KINDS = (NIGHTLY, UNTIL)


@dataclass(frozen=True)
class Window:
    """One lending: from ``lent_from`` to ``reclaim_at`` (aware datetimes); nothing new is
    placed in its last ``notice`` (the notice window)."""

    lent_from: datetime | None  # None: lent since before anyone knows (a pool lent until a time)
    reclaim_at: datetime
    notice: timedelta

    @property
    def notice_from(self) -> datetime:
        return self.reclaim_at - self.notice


def zone(name: str) -> ZoneInfo:
    """The IANA time zone; a ValueError names a zone that does not exist."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as Europe/Berlin or UTC") from None


def _at(day: date, clock: time, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, clock, tzinfo=tz)


def nightly_window(start: time, end: time, tz: ZoneInfo, now: datetime, notice: timedelta) -> Window | None:
    """The nightly window holding ``now``, if any (the one that began yesterday first)."""
    local = now.astimezone(tz)
    for began in (local.date() - timedelta(days=1), local.date()):
        opens = _at(began, start, tz)
        closes = _at(began + timedelta(days=1) if end <= start else began, end, tz)
        if opens <= now < closes:
            return Window(opens, closes, notice)
    return None


def next_window(start: time, end: time, tz: ZoneInfo, now: datetime, notice: timedelta) -> Window:
    """The window holding ``now``, or the next one to open."""
    current = nightly_window(start, end, tz, now, notice)
    if current is not None:
        return current
    local = now.astimezone(tz)
    for began in (local.date(), local.date() + timedelta(days=1)):
        opens = _at(began, start, tz)
        if opens > now:
            return Window(opens, _at(began + timedelta(days=1) if end <= start else began, end, tz), notice)
    raise AssertionError("a nightly window opens within two days")  # (start is a time of day)


def window(pool, now: datetime) -> Window | None:
    """The lending of a LentPool (or anything with its fields) in force at ``now``; None when
    its nodes are not lent now (disabled, between nights, past its until)."""
    if not pool.enabled:
        return None
    notice = timedelta(seconds=pool.notice_seconds)
    if pool.kind == UNTIL:
        return Window(None, pool.until, notice) if pool.until is not None and now < pool.until else None
    if pool.start is None or pool.end is None:
        return None
    return nightly_window(pool.start, pool.end, zone(pool.timezone), now, notice)
