"""Lent node pools: the staff's writes (one transaction each, a refusal a ValidationError
keyed by field that writes nothing) and what everyone may read of them."""

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.shortcuts import get_object_or_404

from . import selectors
from .exceptions import NotMember
from .lent import NIGHTLY, next_window, window, zone
from .models import LentPool

FIELDS = ("node_selector", "kind", "start", "end", "timezone", "until", "notice_seconds", "enabled")


def save_lent_pool(user, fields: dict[str, Any], name: str | None = None) -> LentPool:
    """Staff only: declare a pool (``name`` None: ``fields["name"]`` is new) or change one."""
    if not selectors.sees_all_namespaces(user):
        raise NotMember("only staff may declare lent node pools")
    with transaction.atomic():
        if name is None:
            pool = LentPool(name=fields.get("name", ""))
        else:
            pool = _pool(name, lock=True)
        for key in FIELDS:
            if key in fields:
                setattr(pool, key, fields[key])
        pool.full_clean()
        pool.save()
    return pool


def delete_lent_pool(user, name: str) -> None:
    if not selectors.sees_all_namespaces(user):
        raise NotMember("only staff may remove lent node pools")
    _pool(name).delete()


def _pool(name: str, lock: bool = False) -> LentPool:
    queryset = LentPool.objects.select_for_update() if lock else LentPool.objects.all()
    return get_object_or_404(queryset, name=name)


def lending(pool: LentPool, now: datetime) -> dict[str, Any]:
    """Whether the pool is lent now, until when, and when nothing new starts there; for a
    nightly pool not lent now, when it is lent next."""
    current = window(pool, now)
    shown: dict[str, Any] = {
        "lent_now": current is not None,
        "lent_from": current.lent_from if current else None,
        "reclaim_at": current.reclaim_at if current else None,
        "notice_from": current.notice_from if current else None,
        "next_lent_from": None,
    }
    if current is None and pool.enabled and pool.kind == NIGHTLY and pool.start and pool.end:
        upcoming = next_window(pool.start, pool.end, zone(pool.timezone), now, timedelta(seconds=pool.notice_seconds))
        shown["next_lent_from"] = upcoming.lent_from
    return shown
