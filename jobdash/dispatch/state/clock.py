"""The dispatcher's time. Everything a cycle stamps or compares with now (a release, a
start timeout, a grace period, a start range) asks the cycle's clock, never the wall clock
directly: in production the wall clock; in a test, a clock it moves beside kubesim's
manual one, so a grace period or a late bound passes without anyone sleeping."""

from datetime import datetime
from typing import Protocol

from django.utils import timezone


class Clock(Protocol):
    def now(self) -> datetime: ...  # aware, UTC


class WallClock:
    def now(self) -> datetime:
        return timezone.now()
