"""The words a job is told, in its message and on its timeline, by whoever tells it: the
dispatcher writes them into rows and events, the pages and the API show them and use the
same durations. Plain text only (no HTML, no URLs): the pages escape and link it
(presenters.link_job_ids)."""

from datetime import datetime

from queueing.preemption import MOVE, PRIORITY, RECLAIM, Preemption


def duration(seconds: float | None) -> str:
    """Compact and exact enough for a table: 45s, 12m, 3h 05m, 2d 4h."""
    if seconds is None:
        return ""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def overrun_words(job_id: int, name: str, ran_s: float, bound_s: float) -> str:
    """A running job past its 90 % run-time bound, as a late job's message names it."""
    return f"job {job_id} ({name}) has run {duration(ran_s)}, {duration(bound_s)} at most was expected"


def past_late_bound_words(late: datetime, overruns: list[str] | None) -> str:
    """Why a job still waits past its first late bound: the running jobs of its namespace
    that ran past their own (overrun_words), or that none did."""
    said = f"Past its late bound ({late:%Y-%m-%d %H:%M} UTC)"
    if overruns:
        shown = "; ".join(overruns[:3]) + (f"; and {len(overruns) - 3} more" if len(overruns) > 3 else "")
        return f"{said}: running jobs here ran longer than expected: {shown}."
    return f"{said}: no running job here ran past its bound; jobs ahead of it, or of higher priority, took the room."


def gpu_minutes(gpu_s: float) -> str:
    """6.4 GPU-minutes, 1 GPU-minute, 45 GPU-minutes."""
    minutes = gpu_s / 60
    shown = (f"{minutes:,.1f}" if minutes < 10 else f"{minutes:,.0f}").removesuffix(".0")
    return f"{shown} GPU-minute{'' if shown == '1' else 's'}"


def lost_words(lost_s: float, lost_gpu_s: float, checkpointed: bool, on_notice: bool = False) -> str:
    """What leaving now throws away: "4m 00s after its last checkpoint: 32 GPU-minutes redone"."""
    if on_notice:
        return "it loses no work (it checkpoints on notice)"
    if lost_s <= 0:
        return "it loses no work (it has just checkpointed)"
    since = "after its last checkpoint" if checkpointed else "into a run with no checkpoint"
    redone = f"{gpu_minutes(lost_gpu_s)} redone" if lost_gpu_s > 0 else f"{duration(lost_s)} redone"
    return f"leaving now, {duration(lost_s)} {since}: {redone}"


def redone_words(seconds: float, gpu_s: float, checkpointed_at: datetime | None) -> str:
    """What a stop threw away, once done: "32 GPU-minutes redone (4m 00s since its checkpoint
    at 14:02:00 UTC)"; a job without GPUs, its seconds."""
    if seconds <= 0:
        return "no work lost (it checkpointed on notice)" if checkpointed_at else "no work lost"
    amount = gpu_minutes(gpu_s) if gpu_s > 0 else duration(seconds)
    since = f"since its checkpoint at {checkpointed_at:%H:%M:%S} UTC" if checkpointed_at else "the whole run"
    return f"{amount} redone ({duration(seconds)}, {since})"


def lost_total_words(stops: list[tuple[str, float]]) -> str:
    """A job's stops to make room, [(cause, GPU-seconds)], as the job page sums them:
    "0.53 GPU-hours redone over 2 stops (preemption 0.50, reclaim 0.03)"."""
    by_cause: dict[str, float] = {}
    for cause, gpu_s in stops:
        by_cause[cause] = by_cause.get(cause, 0.0) + gpu_s
    causes = ", ".join(f"{cause} {gpu_s / 3600:.2f}" for cause, gpu_s in by_cause.items())
    total = sum(by_cause.values()) / 3600
    return f"{total:.2f} GPU-hours redone over {len(stops)} stop{'s' if len(stops) != 1 else ''} ({causes})"


_PREEMPTED_TO = {
    RECLAIM: "to give its namespace's guaranteed share back",
    PRIORITY: "for a job of higher priority",
    MOVE: "whose GPUs are free only scattered: it moves, to start again at once on other nodes",
}


def preemption_words(
    preemption: Preemption,
    victim_namespace: str,
    victim_name: str,
    namespace: str,
    name: str,
    when: datetime,
    on_notice: bool = False,
) -> tuple[str, str]:
    """The victim's and the preemptor's timeline notes when a victim is told to leave
    (queueing.preemption.Preemption: its cause says why; ``on_notice``: the victim writes a
    checkpoint when told)."""
    note = (
        f"preempted to make room for job {preemption.preemptor} ({namespace}/{name}) "
        f"{_PREEMPTED_TO.get(preemption.cause, '')}: it is suspended at {when:%H:%M:%S} UTC, checkpoint before then"
        f"; {lost_words(preemption.lost_s, preemption.lost_gpu_s, preemption.checkpointed_at is not None, on_notice)}"
    )
    preemptor_note = (
        f"preempting job {preemption.victim} ({victim_namespace}/{victim_name}) to make room for this one; "
        f"it leaves at {when:%H:%M:%S} UTC"
    )
    return note, preemptor_note
