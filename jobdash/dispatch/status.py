"""Reads for the status API and the page header: who leads, since when, the last cycles."""

from django.conf import settings

from jobdash.jobs.models import Cycle, Fence
from jobdash.leader import BackendError
from jobdash.leader.factory import elector_from_settings


def leader() -> dict:
    """The recorded leadership (the fence), checked against the election backend when there
    is one: a leader whose lock is gone is reported as not alive, not as leading."""
    fence = Fence.objects.filter(id=1).first()
    status = {
        "backend": settings.JOBDASH_LEADER,
        "identity": fence.holder if fence else None,
        "term": fence.term if fence else None,
        "since": fence.since if fence else None,
        "alive": None,
    }
    if fence is None:
        return status
    if settings.JOBDASH_LEADER == "none":
        status["alive"] = True
        return status
    try:
        holder = elector_from_settings().holder()
        status["alive"] = holder is not None and holder.term == fence.term
    except BackendError:
        status["alive"] = None  # unknown, not "no leader"
    return status


def recent_cycles(limit: int = 20):
    return Cycle.objects.order_by("-started_at")[:limit]


def last_cycle() -> dict | None:
    cycle = Cycle.objects.order_by("-started_at").first()
    if cycle is None:
        return None
    return {
        "started_at": cycle.started_at,
        "duration_ms": cycle.duration_ms,
        "policy": cycle.policy,
        "pending": cycle.pending,
        "admitted": cycle.admitted,
        "released": cycle.released,
        "term": cycle.term,
        "phases": cycle.phases,
    }
