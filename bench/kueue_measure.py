"""What a bench.kueue_baseline run measured, read afterwards from the Job rows, the
dispatcher's Cycle rows and kubesim's audit (the measures are listed in that module's
docstring), with the submitters' lags and the processes' CPU the run hands in.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from bench import stack
from bench.kueue_method import kueue_usage_pct
from bench.kueue_shape import Shape
from bench.kueue_submit import class_of

if TYPE_CHECKING:
    from bench.kueue_submit import Submitter


def cycle_stats() -> dict:
    from jobdash.jobs.models import Cycle

    rows = list(Cycle.objects.values_list("duration_ms", "phases", "admitted"))
    if not rows:
        return {}
    durations = [r[0] for r in rows]
    phases: defaultdict[str, float] = defaultdict(float)
    for _d, p, _a in rows:
        for name, ms in (p or {}).items():
            phases[name] += ms
    return {
        "count": len(rows),
        "mean_ms": round(statistics.fmean(durations), 1),
        "p99_ms": round(stack.percentile(durations, 99), 1),
        "max_ms": round(max(durations), 1),
        "admitted_per_cycle": round(statistics.fmean(r[2] for r in rows), 1),
        "phase_total_s": {name: round(ms / 1000, 1) for name, ms in phases.items()},
    }


def measure(
    shape: Shape, scale: float, policy: str, audit: list[dict], submitter: Submitter, finished: bool, cpu_usage: dict
) -> dict:
    from jobdash.jobs.models import Job

    rows = list(
        Job.objects.values_list(
            "namespace__name", "name", "state", "submitted_at", "released_at", "started_at", "finished_at"
        )
    )
    by_class = defaultdict(list)
    # Per class, what a job's quota was held for beyond its run: release -> the tracker saw
    # it running, and -> the tracker saw it finished (the turnover every admission waits on).
    overhead: dict[str, list[float]] = defaultdict(list)
    to_running: dict[str, list[float]] = defaultdict(list)
    used = nominal = held = 0.0
    holds = []  # (cpu, released, finished or None): the quota each admitted job held
    for _namespace, name, state, submitted, released, started, finished_at in rows:
        cls = class_of(name)
        cpu, run = shape.classes[cls].cpu, shape.classes[cls].run_s
        if released is not None:
            by_class[cls].append((released - submitted).total_seconds())
            holds.append((cpu, released.timestamp(), finished_at.timestamp() if finished_at else None))
        if state == "Succeeded":
            nominal += cpu * run
            if started and finished_at:
                used += cpu * (finished_at - started).total_seconds()
            if released and finished_at:
                held += cpu * (finished_at - released).total_seconds()
                overhead[cls].append((finished_at - released).total_seconds() - run)
                if started and started < finished_at:
                    to_running[cls].append((started - released).total_seconds())
    first = min(r[3] for r in rows)
    last = max((r[6] for r in rows if r[6] is not None), default=None)
    wall = (last - first).total_seconds() if last else float("nan")
    capacity = shape.namespaces * shape.quota_cpu * wall
    created = Counter((a["namespace"], a["name"]) for a in audit if a["code"] == 201 and not a.get("dry_run"))
    lost = sum(1 for r in rows if r[2] != "Succeeded")
    return {
        "policy": policy,
        "scale": scale,
        "jobs": len(rows),
        "wall_s": round(wall, 2),
        "config": shape.name,
        "ideal_s": round(shape.ideal_seconds(scale), 2),
        "usage_pct": round(100 * nominal / capacity, 1),
        "tta_s": {cls: round(statistics.fmean(v), 3) if v else None for cls, v in sorted(by_class.items())},
        "double_releases": sum(n - 1 for n in created.values() if n > 1),
        "lost": lost,
        # beyond the required keys
        "usage_rows_pct": round(100 * used / capacity, 1),
        "admitted_pct": round(100 * held / capacity, 1),
        # Kueue's checker's usage (bench.kueue_method): the quota held, first submission to last finish.
        "kueue_usage_pct": round(
            kueue_usage_pct(holds, shape.namespaces * shape.quota_cpu, first.timestamp(), last.timestamp()), 2
        )
        if last and last > first
        else None,
        "tta_max_s": {cls: round(max(v), 3) if v else None for cls, v in sorted(by_class.items())},
        "held_beyond_run_s": {cls: round(statistics.fmean(v), 3) for cls, v in sorted(overhead.items())},
        "release_to_running_s": {cls: round(statistics.fmean(v), 3) for cls, v in sorted(to_running.items())},
        "tfjobs_created": sum(created.values()),
        # Which jobs were created twice, and when (for the report of a double release).
        "double_released_jobs": _doubles(audit, created),
        "finished_in_time": finished,
        "submit_lag_s": {
            "mean": round(statistics.fmean(submitter.lags), 3) if submitter.lags else None,
            "max": round(max(submitter.lags), 3) if submitter.lags else None,
        },
        "cycles": cycle_stats(),
        "cpu_s": cpu_usage,
        "submitters": len(submitter.processes),
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    }


def _doubles(audit: list[dict], created: Counter) -> dict[str, dict]:
    """Each job whose object was created more than once: when (kubesim's clock), and what its
    row says happened in between (its events and message), to tell a retry from a bug."""
    from jobdash.jobs.models import Job

    found = {}
    for (namespace, name), n in sorted(created.items()):
        if n < 2:
            continue
        job = Job.objects.filter(namespace__name=namespace, name=name).first()
        found[f"{namespace}/{name}"] = {
            "created_at": [
                round(a["time"], 3)
                for a in audit
                if a["code"] == 201 and not a.get("dry_run") and (a["namespace"], a["name"]) == (namespace, name)
            ],
            "events": [] if job is None else list(job.events.order_by("id").values_list("type", flat=True)),
            "attempts": None if job is None else job.attempts,
            "message": None if job is None else job.message,
        }
    return found
