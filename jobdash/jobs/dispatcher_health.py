"""Whether the dispatcher is releasing jobs: the one place that decides it, from what the
dispatcher records (Fence, Cycle, CycleFailures). The page banner, a waiting job's reason,
/readyz, GET /api/v1/status/ (and with it `jobdash status`) all read `dispatcher_health`, so
they cannot disagree.

Unhealthy, by cause:
- `no_leader`: no dispatcher has ever taken a term (the fence is empty);
- `failing`: the last FAILED_IN_A_ROW cycles or more failed (fewer, only once no cycle has
  completed for the stall window either: one failure between successes is no outage);
- `stalled`: no cycle completed within the stall window (3 ticks + 10 s), counted from the
  last completed cycle or from the current leader's election, whichever is later.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Subquery
from django.utils import timezone

from .models import Cycle, CycleFailures, Fence

FAILED_IN_A_ROW = 3
STALL_TICKS, STALL_GRACE_S = 3, 10.0
# A waiting job's reason while the dispatcher is not completing cycles (not the planner's:
# the planner is what is not running).
NOT_CYCLING = "DispatcherNotCycling"


@dataclass(frozen=True)
class Health:
    healthy: bool
    cause: str  # "" when healthy; "no_leader" | "failing" | "stalled"
    message: str  # "" when healthy; "Jobs are not being released: ..."
    failures: int  # failed cycles in a row since the last completed one
    failing_since: datetime | None
    error: str | None  # the last failure's first line; None unless revealed (staff)
    leader: dict[str, Any]  # backend, identity (host:pid, staff only), term, since: as the fence records it
    last_cycle: dict[str, Any] | None  # the last completed cycle: started_at, finished_at, term
    stall_after_s: float

    def as_json(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "cause": self.cause,
            "message": self.message,
            "failures": self.failures,
            "failing_since": self.failing_since,
            "error": self.error,
            "leader": self.leader,
            "last_cycle": self.last_cycle,
            "stall_after_seconds": self.stall_after_s,
        }


def stall_after_s() -> float:
    return STALL_TICKS * float(settings.JOBDASH_TICK_SECONDS) + STALL_GRACE_S


def dispatcher_health(*, reveal: bool, now: datetime | None = None) -> Health:
    """One statement, no election backend asked: every page's banner reads it, and a probe
    answers from the database alone. The last failure's error text and the leader's host:pid
    are for staff (`reveal`): they may name tables, hosts or values."""
    now = now or timezone.now()
    row = _recorded()
    if row is None:  # (no term, no cycle either: a cycle runs under a term the fence records)
        return _health("no_leader", reveal=reveal, leader={"term": None, "since": None, "holder": ""})
    elected = row["since"]
    finished = row["cycle_started"] + timedelta(milliseconds=row["cycle_ms"]) if row["cycle_started"] else None
    # Failures count only after the last completed cycle: a completion ends the streak.
    failing = bool(row["streak"]) and row["failed_at"] is not None
    if failing and row["cycle_started"] is not None:
        failing = row["failed_at"] > row["cycle_started"]
    streak = row["streak"] if failing else 0
    moments = [m for m in (finished, elected) if m is not None]
    stalled = not moments or (now - max(moments)).total_seconds() > stall_after_s()
    if streak and (streak >= FAILED_IN_A_ROW or stalled):
        cause = "failing"
    else:
        cause = "stalled" if stalled else ""
    last_cycle = None
    if finished is not None:
        last_cycle = {"started_at": row["cycle_started"], "finished_at": finished, "term": row["cycle_term"]}
    return _health(
        cause,
        reveal=reveal,
        leader=row,
        failures=streak,
        failing_since=row["failing_since"] if failing else None,
        error=row["error"] if failing else None,
        last_cycle=last_cycle,
    )


def _recorded() -> dict[str, Any] | None:
    """The fence, the last cycle and the failures, in one row (None: no fence yet)."""
    last = Cycle.objects.order_by("-started_at")
    failures = CycleFailures.objects.filter(id=1)
    row = (
        Fence.objects.filter(id=1)
        .annotate(
            cycle_started=Subquery(last.values("started_at")[:1]),
            cycle_ms=Subquery(last.values("duration_ms")[:1]),
            cycle_term=Subquery(last.values("term")[:1]),
            streak=Subquery(failures.values("streak")),
            failing_since=Subquery(failures.values("since")),
            failed_at=Subquery(failures.values("last_at")),
            error=Subquery(failures.values("error")),
        )
        .values(
            "term",
            "since",
            "holder",
            "cycle_started",
            "cycle_ms",
            "cycle_term",
            "streak",
            "failing_since",
            "failed_at",
            "error",
        )
        .first()
    )
    return None if row is None else dict(row)


def _health(
    cause: str,
    *,
    reveal: bool,
    leader: dict[str, Any],
    failures: int = 0,
    failing_since: datetime | None = None,
    error: str | None = None,
    last_cycle: dict[str, Any] | None = None,
) -> Health:
    finished = last_cycle["finished_at"] if last_cycle else None
    return Health(
        healthy=not cause,
        cause=cause,
        message=_message(cause, failures, failing_since, finished, leader["since"]),
        failures=failures,
        failing_since=failing_since,
        error=error if reveal else None,
        leader={
            "backend": settings.JOBDASH_LEADER,
            "identity": (leader["holder"] or None) if reveal else None,
            "term": leader["term"],
            "since": leader["since"],
        },
        last_cycle=last_cycle,
        stall_after_s=stall_after_s(),
    )


def _message(
    cause: str, streak: int, since: datetime | None, finished: datetime | None, elected: datetime | None
) -> str:
    lead = "Jobs are not being released: "
    if cause == "failing":
        cycles = "cycle" if streak == 1 else f"{streak} cycles"
        return f"{lead}the dispatcher's last {cycles} failed, since {clock(since)}"
    if cause == "no_leader":
        return f"{lead}no dispatcher has taken the lead (is the dispatcher running?)"
    if cause == "stalled" and finished is None:
        return f"{lead}the dispatcher has completed no cycle since it took the lead at {clock(elected)}"
    if cause == "stalled":
        return f"{lead}the dispatcher has completed no cycle since {clock(finished)}"
    return ""


def clock(moment: datetime | None) -> str:
    """ "01:23 UTC" today, "2026-11-25 01:23 UTC" on another day."""
    if moment is None:
        return "an unknown time"
    at, today = moment.astimezone(UTC), timezone.now().astimezone(UTC).date()
    return at.strftime("%H:%M UTC" if at.date() == today else "%Y-%m-%d %H:%M UTC")


def waiting_reason(reason: str, message: str, health: Health) -> tuple[str, str]:
    """What a Queued job's reason and message say: while the dispatcher is not completing
    cycles, that (its last plan's reason kept in the message, since it may be stale); else
    its own."""
    if health.healthy:
        return reason, message
    before = f" Last planned: {reason}" + (f" ({message})" if message else "") + "." if reason else ""
    return NOT_CYCLING, f"{health.message}.{before}"
