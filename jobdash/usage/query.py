"""A usage request's parameters (from, to, group_by), read alike by the API and the page, and
who sees which namespaces; a bad one is refused naming the parameter."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.utils import timezone

from jobdash.jobs.exceptions import FieldProblem, InvalidInput
from jobdash.jobs.models import LostWork
from jobdash.jobs.selectors import namespaces_visible_to, sees_all_namespaces

from .selectors import GROUPS

DEFAULT_GROUPS = ["namespace"]
COLUMNS = [
    "gpu_hours",
    "cpu_hours",
    "memory_gib_hours",
    "lost_gpu_hours",
    *(f"lost_{cause}_gpu_hours" for cause in LostWork.Cause.values),
]


@dataclass(frozen=True)
class UsageQuery:
    from_day: date
    to_day: date
    group_by: list[str]


def _day(params: Mapping[str, str], name: str, default: date) -> date:
    text = (params.get(name) or "").strip()
    if not text:
        return default
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise InvalidInput([FieldProblem(name, f"{text!r} is not a date (YYYY-MM-DD)")]) from None


def parse(params: Mapping[str, str], now: datetime | None = None) -> UsageQuery:
    """Defaults: from the first of this month (UTC) to today, grouped by namespace."""
    today = (now or timezone.now()).astimezone(UTC).date()
    from_day = _day(params, "from", today.replace(day=1))
    to_day = _day(params, "to", today)
    if to_day < from_day:
        raise InvalidInput([FieldProblem("to", f"{to_day} is before from ({from_day})")])
    # The page's checkboxes send the parameter once per group, the API's callers a list.
    given = params.getlist("group_by") if hasattr(params, "getlist") else [params.get("group_by") or ""]
    text = ",".join(given)
    group_by = [g.strip() for g in text.split(",") if g.strip()] or list(DEFAULT_GROUPS)
    unknown = [g for g in group_by if g not in GROUPS]
    if unknown:
        raise InvalidInput(
            [FieldProblem("group_by", f"unknown group {unknown[0]!r}; expected some of {', '.join(GROUPS)}")]
        )
    return UsageQuery(from_day, to_day, list(dict.fromkeys(group_by)))


def visible(user) -> list[str] | None:
    """The namespaces `user` sees usage of (None: all, staff)."""
    if sees_all_namespaces(user):
        return None
    return list(namespaces_visible_to(user).values_list("name", flat=True))


def as_csv(group_by: list[str], rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*group_by, *COLUMNS])
    for row in rows:
        writer.writerow([*(row[g] for g in group_by), *(f"{row[c]:.6f}" for c in COLUMNS)])
    return out.getvalue()
