"""How stored numbers and states read to people, for the pages and the API alike:
quantities, plain words for reasons, durations, quota bars, pod and node rows.

The API returns the canonical numbers and these quantities; only the pages need the
percentages and phrases.
"""

import re
from collections.abc import Mapping
from datetime import datetime

from django.urls import reverse
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from queueing import format_quantity
from queueing.quota_fit import quota_lines

from . import card_presenters, units
from .estimates import CLOSE_ENOUGH, RECORD_JOBS, EstimateRecord, FirstEstimate
from .words import duration


def _quantities(amounts: dict) -> dict:
    return {name: format_quantity(name, amount) for name, amount in sorted(amounts.items())}


def demand_summary(workload: dict) -> dict:
    """Total requests as Kubernetes quantities, plus the pod count."""
    summary = _quantities(workload.get("requests", {}))
    summary["pods"] = workload.get("pods", 0)
    return summary


def page_demand(workload: dict) -> dict:
    """Total requests as the pages write them (units.py: CPU in cores), plus the pod count."""
    return {**units.readable_all(workload.get("requests", {})), "pods": workload.get("pods", 0)}


def pod_set_rows(workload: dict, sizes: dict | None = None) -> list[dict]:
    """One row per replica type, per-pod requests and limits as the pages write them; `sizes`
    (elastic_sizes): an elastic role's range and the pods it runs."""
    sizes = sizes or {}
    return [
        {
            "role": pod_set["role"],
            "count": pod_set["count"],
            "requests": units.readable_all(pod_set.get("requests", {})),
            "limits": units.readable_all(pod_set.get("limits", {})),
            "elastic": sizes.get(pod_set["role"]),
        }
        for pod_set in workload.get("pod_sets", [])
    ]


def elastic_sizes(workload: dict, scale: dict | None, released: bool) -> dict[str, dict]:
    """Per elastic role: {"minimum", "maximum", "current"} (current: the pods it runs once
    released, and the last it ran once it has ended; None while it waits, or if it ended
    never released)."""
    sizes = {}
    for pod_set in workload.get("pod_sets", []):
        if pod_set.get("minimum") is None:
            continue
        role = pod_set["role"]
        current = (scale or {}).get(role, pod_set["count"]) if released else None
        sizes[role] = {"minimum": pod_set["minimum"], "maximum": pod_set.get("maximum"), "current": current}
    return sizes


def quota_quantity(key: str, amount: int) -> str:
    """An amount of a ResourceQuota key as a quantity: ("requests.cpu", 20000) -> "20"."""
    return format_quantity(units.resource_of(key), amount)


def quota_amounts(amounts: dict) -> dict:
    """ResourceQuota-keyed integers as quantities: {"requests.cpu": 20000} -> {"requests.cpu": "20"}."""
    return {key: quota_quantity(key, amount) for key, amount in sorted(amounts.items())}


def quota_summary(quota: dict | None, guaranteed: Mapping[str, int] | None = None) -> dict | None:
    """hard / used / reserved of one namespace and free (hard - used - reserved, as the planner
    counts it), as quantities; for an elastic namespace (`guaranteed`: jobs.elastic.amounts of
    its guarantee) also, per guaranteed key, what it borrows (held beyond the guarantee, held
    being used + reserved: its own usage in queueing/elastic.py) and what of the guarantee is
    free. None when it has no ResourceQuota."""
    if not quota:
        return None
    hard, used, reserved = quota.get("hard", {}), quota.get("used", {}), quota.get("reserved", {})
    summary = {part: quota_amounts(quota.get(part, {})) for part in ("hard", "used", "reserved")}
    summary["free"] = {
        key: quota_quantity(key, max(0, hard[key] - used.get(key, 0) - reserved.get(key, 0))) for key in sorted(hard)
    }
    shares = dict(guaranteed or {})
    held = {key: used.get(key, 0) + reserved.get(key, 0) for key in shares}
    summary["guaranteed"] = quota_amounts(shares)
    summary["borrowed"] = {key: quota_quantity(key, max(0, held[key] - g)) for key, g in sorted(shares.items())}
    summary["guaranteed_free"] = {key: quota_quantity(key, max(0, g - held[key])) for key, g in sorted(shares.items())}
    return summary


# queueing.reasons.Reason -> what a person reads first; the row's message has the numbers.
REASON_WORDS = {
    "QuotaExceeded": "Waiting for quota",
    "NoNodeFits": "Waiting for room on the nodes",
    "OutlastsLentPool": "Kept off lent nodes that go back too soon",
    "NoClusterAvailable": "No cluster it may use takes jobs now",
    "WaitingForInFlight": "Waiting for a job being started",
    "ReservedForOlderJob": "Capacity held for an older job",
    "BlockedByQueueHead": "Behind the head of the queue",
    "BackingOff": "Retrying after a pause",
    "WaitingForPods": "Waiting for its pods to be created",
    "NeverFitsQuota": "Never fits the quota",
    "NeverFitsNodes": "Never fits any node",
    "CannotBorrow": "Waiting for capacity to borrow",
    "Preempting": "Making room: other jobs are preempted for it",
    "Preempted": "Preempted: waiting again in its place",
    "Moved": "Moved: to start again at once on other nodes",
    "WaitingForDependency": "Waiting for the jobs it depends on",
    "DependencyNeverSatisfied": "Kept queued: a dependency can never be met",
    "ArrayConcurrencyLimit": "Its array runs as many jobs as its limit allows",
    "DispatcherNotCycling": "Not being released: the dispatcher is not completing cycles",
}


# "job 12", "jobs 3, 4 and 5", "job(s) 3, 4" (queueing/reasons.py, the dispatcher's events)
_JOB_IDS = re.compile(r"\b(jobs?|job\(s\)) (#?\d{1,18}(?:(?:, | and )#?\d{1,18})*)\b")
_ID = re.compile(r"#?(\d{1,18})")


def link_job_ids(text: str) -> SafeString:
    """`text` escaped, with the job ids it names linked to their pages: a preempted job's
    events and reason name the job it makes room for, the preemptor's name its victims."""

    def ids(match: re.Match) -> str:
        linked = _ID.sub(
            lambda m: format_html('<a href="{}">{}</a>', reverse("job-detail", args=[int(m[1])]), m[0]), match[2]
        )
        return f"{match[1]} {linked}"

    # Safe: the text is escaped first, and what is inserted are links around digits.
    return mark_safe(_JOB_IDS.sub(ids, str(conditional_escape(text))))


def reason_words(reason: str) -> str:
    if not reason:
        return "Waiting for the next cycle"
    return REASON_WORDS.get(reason, reason)


def since(moment: datetime | None, now: datetime) -> str:
    return duration((now - moment).total_seconds()) if moment else ""


def until(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return ""
    seconds = (moment - now).total_seconds()
    return "any moment" if seconds < 5 else f"in {duration(seconds)}"


def _pct(part: int, whole: int) -> float:
    return round(min(100.0, 100.0 * part / whole), 1) if whole else (100.0 if part else 0.0)


def quota_bars(quota: dict | None, guaranteed: Mapping[str, int] | None = None) -> list[dict]:
    """One bar per resource the quota constrains: used and reserved as shares of hard, and
    free as the planner counts it (queueing.quota_fit.quota_lines).

    Elastic keys (in `guaranteed`, jobs.elastic.amounts of the namespace's guarantee) also
    show the guarantee as a mark on the bar and what is held beyond it as borrowed: held
    (used + reserved) up to the guarantee is drawn as used and reserved, the rest as borrowed.

    Over 100% is possible (a quota lowered under running jobs): the bar is capped, the
    numbers are not."""
    if not quota:
        return []
    hard, used, reserved = quota.get("hard", {}), quota.get("used", {}), quota.get("reserved", {})
    shares = guaranteed or {}
    bars = []
    for line in quota_lines({}, hard, used, reserved):
        key, limit, free = line.key, line.hard, line.free
        u, r = used.get(key, 0), reserved.get(key, 0)
        used_pct = min(100.0, 100.0 * u / limit) if limit else (100.0 if u else 0.0)
        reserved_pct = min(100.0 - used_pct, 100.0 * r / limit) if limit else 0.0
        g = shares.get(key, 0)
        u_in = min(u, g)
        r_in = min(r, g - u_in)
        borrowed = u + r - u_in - r_in
        # One unit for every number of the bar (units.py): "26.5 used ... of 64", not "26500m".
        shown = dict(
            zip(
                ("hard", "used", "reserved", "free", "guaranteed", "borrowed", "guaranteed_free"),
                units.readable(units.resource_of(key), limit, u, r, max(free, 0), g, borrowed, max(0, g - u - r)),
                strict=True,
            )
        )
        bar = {
            "key": key,
            "hard": shown["hard"],
            "used": shown["used"],
            "reserved": shown["reserved"],
            "free": shown["free"],
            "used_pct": round(used_pct, 1),
            "reserved_pct": round(reserved_pct, 1),
            "total_pct": round(min(100.0, 100.0 * (u + r) / limit) if limit else 100.0, 1),
            "full": free <= 0,
            "elastic": key in shares,
        }
        if key in shares:
            used_pct = _pct(u_in, limit)
            reserved_pct = min(100.0 - used_pct, _pct(r_in, limit))
            bar.update(
                {
                    "guaranteed": shown["guaranteed"],
                    "borrowed": shown["borrowed"],
                    "guaranteed_free": shown["guaranteed_free"],
                    "borrowing": borrowed > 0,
                    "used_pct": used_pct,
                    "reserved_pct": round(reserved_pct, 1),
                    "borrowed_pct": round(min(100.0 - used_pct - reserved_pct, _pct(borrowed, limit)), 1),
                    "guaranteed_pct": _pct(g, limit),
                }
            )
        bars.append(bar)
    return bars


POD_PHASES = ("Pending", "Running", "Terminating", "Succeeded", "Failed", "Unknown")


def pod_rows(counts: dict, workload: dict) -> list[dict]:
    """One row per replica type: how many pods the job wants and how many the cluster has
    in each phase (as the last cycle saw them). None at all: no rows (not released yet)."""
    if not counts:
        return []
    wanted = {ps["role"]: ps["count"] for ps in workload.get("pod_sets", [])}
    # The operator labels pods with the replica type in lower case ("worker" for Worker).
    by_role = {role: counts.get(role.lower(), counts.get(role, {})) for role in wanted}
    known = {role.lower() for role in wanted} | set(wanted)
    by_role.update({label: phases for label, phases in sorted(counts.items()) if label not in known})
    rows = []
    for role, phases in by_role.items():
        rows.append(
            {
                "role": role,
                "wanted": wanted.get(role, 0),
                "total": sum(phases.values()),
                "phases": [(phase, phases.get(phase, 0)) for phase in POD_PHASES],
            }
        )
    return rows


def _share(part: int, whole: int) -> float:
    return round(min(100.0, 100.0 * part / whole), 1) if whole else 0.0


def gpu_slots(gpu: Mapping[str, int], jobs: Mapping[str, int]) -> list[dict]:
    """A node's GPUs one by one: held by which of jobdash's jobs (in job order), in use by
    something else, or free."""
    slots = [{"state": "used", "job": job} for job, count in sorted(jobs.items()) for _ in range(count)]
    used = min(gpu["allocated"], gpu["allocatable"])
    slots = slots[:used] + [{"state": "used", "job": ""}] * max(used - len(slots), 0)
    return slots + [{"state": "free", "job": ""}] * gpu["free"]


def _in_one_unit(name: str, amounts: Mapping[str, int]) -> dict[str, str]:
    """A node's (or the cluster's) used / total / free of one resource, in one unit."""
    used, total, free = units.readable(name, amounts["allocated"], amounts["allocatable"], amounts["free"])
    return {"used": used, "total": total, "free": free}


def cluster_page(overview: dict) -> dict:
    """The cluster overview with quantities formatted and shares for the bars."""
    nodes = []
    for node in overview["nodes"]:
        res = node["resources"]
        cells = {
            name: {**_in_one_unit(name, r), "pct": _share(r["allocated"], r["allocatable"])} for name, r in res.items()
        }
        # A shared node's pods hold parts of cards, not GPUs: its cards are drawn apart.
        jobs = {} if node.get("cards") else node.get("jobs", {})
        nodes.append({**node, **cells, "gpu_slots": gpu_slots(res["gpu"], jobs)})
    totals = {name: _in_one_unit(name, t) for name, t in overview["totals"].items()}
    return {**overview, "nodes": nodes, "totals": totals, "shared": card_presenters.shared_nodes(overview["nodes"])}


# Start-time estimates (issue #16): the range a queued job is given, the run time predicted
# for it, how its first estimate did, and a namespace's track record.


def clock(moment: datetime | None, now: datetime) -> str:
    """A time of day, with the date when it is not today's: "14:20", "2026-11-25 09:05" (the
    pages' one way of writing a time, see `moment`)."""
    if moment is None:
        return ""
    local, today = timezone.localtime(moment), timezone.localtime(now)
    return local.strftime("%H:%M" if local.date() == today.date() else "%Y-%m-%d %H:%M")


MOMENT_FORMAT = "%Y-%m-%d %H:%M:%S"


def moment(value: datetime | None) -> str:
    """A point in time as every page writes it, 24-hour and in the site's zone (UTC):
    "2026-11-25 09:05:12". Django's default ("Nov. 25, 2026, 9:05 a.m.") next to the
    pages' 24-hour clocks read as two formats on one page."""
    return "" if value is None else timezone.localtime(value).strftime(MOMENT_FORMAT)


def start_range(likely: datetime | None, late: datetime | None, now: datetime) -> dict | None:
    """An estimated start as the pages show it ("likely in 12m, in 55m at the latest (90 %)",
    templates/jobs/_start_range.html): the likely start and the late bound (90 % of jobs start
    by then), each with relative words and a clock time. None when the start is unknown."""
    if likely is None:
        return None
    return {
        "likely": likely,
        "likely_words": until(likely, now),
        "likely_clock": clock(likely, now),
        "late": late,
        "late_words": until(late, now),
        "late_clock": clock(late, now),
    }


# queueing.predictor's sources (Prediction.source) -> which history the prediction came from.
PREDICTION_SOURCE_WORDS = {
    "user+name": "from this user's runs of this name",
    "name": "from this namespace's runs of this name",
    "user": "from this user's runs in this namespace",
    "namespace+shape": "from this namespace's runs of the same kind and size",
    "namespace": "from this namespace's runs",
    "shape": "from the cluster's runs of the same kind and size",
    "cluster": "from all runs on the cluster",
    "stated+user": "from the run time stated on the job, corrected by how this user's stated run times turned out",
    "stated+namespace": "from the run time stated on the job, corrected by how this namespace's stated run times turned out",
    "stated": "from the run time stated on the job",
    "none": "no similar runs have finished yet and the job states no run time",
}


def prediction_source_words(source: str) -> str:
    return PREDICTION_SOURCE_WORDS.get(source, f"from {source}" if source else "")


def predicted_run_time(likely_s: float | None, p90_s: float | None, source: str) -> str:
    """ "likely 42m, at most 2h 06m (90 %), from this user's runs of this name"; "" when the
    dispatcher has not predicted it yet."""
    if not source:
        return ""
    words = prediction_source_words(source)
    if likely_s is None:
        return f"unknown: {words}"
    bound = f", at most {duration(p90_s)} (90 %)" if p90_s is not None else ""
    return f"likely {duration(likely_s)}{bound}, {words}"


def first_estimate_words(outcome: FirstEstimate | None) -> str:
    """How a started job's first estimate did: "started 6m after the likely time given at
    submission; within the 90 % bound". "" when it had none."""
    if outcome is None:
        return ""
    seconds = outcome.late_by.total_seconds()
    if abs(seconds) < 60:
        words = "started at the likely time given at submission"
    else:
        side = "after" if seconds > 0 else "before"
        words = f"started {duration(abs(seconds))} {side} the likely time given at submission"
    if outcome.past_bound_by is None:
        return words
    if outcome.past_bound_by.total_seconds() <= 0:
        return f"{words}; within the 90 % bound"
    return f"{words}; {duration(outcome.past_bound_by.total_seconds())} past the 90 % bound"


def estimate_record_words(record: EstimateRecord) -> str:
    """A namespace's track record in a sentence (the record's jobs are its latest starts)."""
    if not record.jobs:
        return "Start estimates here: no estimates to judge yet."
    n = record.jobs
    close = f"{int(CLOSE_ENOUGH.total_seconds() // 60)} min"
    of_jobs = (
        f"of the last {n} jobs"
        if n == RECORD_JOBS
        else ("of the 1 job so far" if n == 1 else f"of the {n} jobs so far")
    )
    bound = "its late bound" if n == 1 else "their late bound"
    return (
        f"Start estimates here: within {close} for {record.within_20_min} {of_jobs}; "
        f"{record.by_late_bound} of {n} started by {bound}."
    )


def _cards_label(cards: object) -> str:
    """ "GPU 1" for a pod's cards on a shared node (published JSON: odd entries left out)."""
    if not isinstance(cards, list):
        return ""
    return card_presenters.card_label([c for c in cards if isinstance(c, int) and not isinstance(c, bool)])


_FINISHED_PHASES = ("Succeeded", "Failed")


def placement_rows(placement: list | None, pods: list[dict], cards: list | None = None) -> list[dict]:
    """The job page's placement: per planned pod (role, number, node) the pod that holds it
    and where it runs, as the last cycle saw them; then any pod beyond the plan. A pod's
    status: on its planned node, waiting for it (still gated, or sent and not started),
    elsewhere (off plan: should not happen), or finished earlier (an earlier wave's). On a node sharing its GPUs, the card planned
    (`cards`: Job.cards) and the card each pod got ("GPU 1")."""
    if not placement:
        return []
    planned_cards = {
        (entry[0], entry[1]): _cards_label(entry[2])
        for entry in cards or []
        if isinstance(entry, list | tuple) and len(entry) == 3
    }
    shown = [{**pod, "gpus": _cards_label(pod.get("cards"))} for pod in pods]
    # A slot is held by a live pod first: an Indexed Job with more completions than its
    # parallelism runs its later waves in the slots the finished pods of earlier ones had.
    live = [pod for pod in shown if pod["phase"] not in _FINISHED_PHASES]
    finished = [pod for pod in shown if pod["phase"] in _FINISHED_PHASES]
    rows = []

    def take(pool: list[dict], role: str, node: str | None) -> dict | None:
        for pod in pool:
            if pod["role"].lower() == role.lower() and (node is None or pod["node"] == node):
                pool.remove(pod)
                return pod
        return None

    slots = sorted((role, index, node) for role, index, node in placement)
    held = {slot: take(live, slot[0], slot[2]) for slot in slots}  # pods on their planned node first
    for slot in slots:
        held[slot] = held[slot] or take(live, slot[0], "")  # a gated pod has no node yet
    for slot in slots:
        held[slot] = held[slot] or take(finished, slot[0], slot[2])  # its wave ended, the next not made yet
    for (role, index, node), pod in held.items():
        status = "not made yet"
        if pod is not None:
            status = "waiting for its node" if pod["gated"] or pod["phase"] == "Pending" else "on its node"
        gpus = planned_cards.get((role, index), "")
        rows.append({"role": role, "index": index, "planned": node, "gpus": gpus, "pod": pod, "status": status})
    rows.extend(
        {"role": pod["role"], "index": None, "planned": "", "gpus": "", "pod": pod, "status": status}
        for pods_left, status in ((live, "off plan"), (finished, "finished earlier"))
        for pod in pods_left
    )
    return rows
