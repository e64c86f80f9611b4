"""Nodes lent for the night in the replay (issue 35, ``ReplayConfig.lent``).

kubesim plays the lender (its ``lent_pools``): a pool of ``round(VC nodes x share)`` nodes
per VC, together, is lent every night 22:00-08:00 UTC; its nodes register at the lend
time (annotated ``jobdash.io/lent-until``), are cordoned ``lent_notice_s`` before the
reclaim, and are drained and deleted at the reclaim.  The replay follows the nodes from
the store's events as the dispatcher's watch cache does, and plans with the pools it
reads from their annotations (``Snapshot.lent``, as dispatch/phases/lending.py) and each queued
job's 90 % bound (``PendingJob.bound``).  ``tide_blind``: the same nodes, but the planner
is not told they are lent, so it places jobs there regardless (the baseline).

As the dispatcher does (dispatch/phases/reclaim.py): at the notice, the running jobs on the pool
that their bound does not see finished by the reclaim are told (counted here); at the
reclaim, whatever still runs there is preempted, suspended and queued again keeping its
place, just before the lender drains the nodes (so nothing is lost silently).  Quota: each
VC's ResourceQuota grows by its share of the lent GPUs while the pool is lent and is set
back at the reclaim, as an admin lending the night's GPUs to the VCs would.
"""

from __future__ import annotations

import heapq
from datetime import time as wall_time
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from kubesim.clock import parse_time
from kubesim.nodeops import LENT_NOTICE, LENT_POOL, LENT_UNTIL
from kubesim.resources import NODES, RESOURCEQUOTAS
from kubesim.tide import Nightly
from queueing import LentPool

from .mapping import GPUS_PER_NODE, QUOTA_KEY
from .records import INF, RELEASED, RUNNING, JobRecord

POOL = "night"
NIGHT = Nightly(wall_time(22, 0), wall_time(8, 0), ZoneInfo("UTC"))
# The replay's reclaim runs this long before the lender's drain: the dispatcher preempts
# what is still on the pool at the reclaim; the lender's eviction then finds the nodes empty.
_BEFORE_DRAIN_S = 0.001
LEND, NOTICE, RECLAIM = "lend", "notice", "reclaim"


def night_nodes(vc_nodes: dict[str, int], share: float) -> dict[str, int]:
    """Each VC's part of the night pool, in nodes: its nodes x ``share``, rounded."""
    return {vc: round(nodes * share) for vc, nodes in vc_nodes.items()}


def night_pool(vc_nodes: dict[str, int], share: float, notice_s: float, capacity: dict[str, str]) -> dict:
    """kubesim's ``lent_pools`` entry: the night pool's nodes night-0, night-1, ..."""
    return {
        "name": POOL,
        "prefix": POOL,
        "count": sum(night_nodes(vc_nodes, share).values()),
        "capacity": capacity,
        # One rack and block of their own (jobs carry no topology request).
        "labels": {"pool": POOL, "topology.jobdash.io/rack": "night", "topology.jobdash.io/block": "night"},
        "schedule": {"start": "22:00", "end": "08:00", "timezone": "UTC"},
        "notice_seconds": notice_s,
    }


def _killed(rec: JobRecord, now: float) -> dict[str, Any]:
    """A run killed by a reclaim: its prediction (source, runs behind it, median and bounds),
    how long the job runs in all, and how long this run had run."""
    p = rec.prediction
    return {
        "id": rec.job.id,
        "gpus": rec.gpus,
        "source": p.source if p else "none",
        "samples": p.samples if p else 0,
        "median_s": p.median_s if p else None,
        "p90_s": p.p90_s if p else None,
        "tail_s": p.tail_s if p else None,
        "duration_s": rec.job.duration,
        "ran_s": now - rec.run_started_at,
    }


class _Added(NamedTuple):
    obj: dict[str, Any]
    type: str = "ADDED"


class Lending:
    """Mixed into ``engine.Replay``; ``_init_lending`` sets its state."""

    def _init_lending(self, vc_nodes: dict[str, int]) -> None:
        config = self.config
        self.lent_nodes: dict[str, tuple[str, float, float]] = {}  # node -> (pool, reclaim_at, notice_s)
        self.cordoned: set[str] = set()
        self.lent_pools: tuple[LentPool, ...] = ()
        self.lent_dirty = False
        self.day_quota = dict(self.hard)
        extra = night_nodes(vc_nodes, config.lent) if config.lent else {}
        self.night_quota = {vc: gpus + extra.get(vc, 0) * GPUS_PER_NODE for vc, gpus in self.hard.items()}
        # (time, kind): the nights' lend, notice and reclaim, one night ahead.
        self.tide_events: list[tuple[float, str]] = []
        # Per job run on lent nodes: (job id, planned at, its bound, the reclaim) at admission.
        self.lent_admissions: list[tuple[int, float, float | None, float]] = []
        self.lent_started: set[int] = set()  # jobs that ran on lent nodes
        self.reclaim_killed: set[int] = set()  # ... and were running there at a reclaim
        self.stats.update(
            lent_share=config.lent,
            tide_blind=config.tide_blind,
            lent_coverage=config.lent_coverage,
            lent_bound_factor=config.lent_bound_factor,
            lent_node_count=sum(extra.values()),
            lent_runs=0,
            lent_gpu_s=0.0,
            reclaim_notices=0,
            reclaim_kills=0,
            reclaim_killed_gpu_s=0.0,
            reclaim_taken_back=0,
            nights=0,
            lent_jobs=0,
            reclaim_killed_jobs=0,
            lent_admitted_outlasting=0,
            reclaim_killed_detail=[],  # per kill: what the job was predicted and ran (_killed)
        )
        if config.lent:
            self._schedule_night(self.start)
            for node in self.cluster.store.items(NODES):  # (the ones there before the hook)
                self._node_event(_Added(node))

    # -- the nodes, from the store's events ----------------------------------------------------

    def _node_event(self, event) -> None:
        meta = event.obj["metadata"]
        name = meta["name"]
        if event.type == "DELETED":
            if name in self.node_alloc:
                self.node_names.remove(name)
                del self.node_alloc[name], self.node_labels[name]
                self.node_objs.pop(name, None)
                self.dirty_nodes.discard(name)
            self.cordoned.discard(name)
            if self.lent_nodes.pop(name, None) is not None:
                self.lent_dirty = True
            self._changed(self.clock.now())
            return
        if name not in self.node_alloc:
            self.node_names.append(name)
            self.node_names.sort()
            self.node_alloc[name] = {}
            self.node_labels[name] = dict(meta.get("labels") or {})
            self.dirty_nodes.add(name)
        cordoned = bool((event.obj.get("spec") or {}).get("unschedulable"))
        if cordoned != (name in self.cordoned):
            (self.cordoned.add if cordoned else self.cordoned.discard)(name)
            self.dirty_nodes.add(name)
        annotations = meta.get("annotations") or {}
        lent = None
        if LENT_UNTIL in annotations:
            notice = annotations.get(LENT_NOTICE)
            lent = (
                annotations.get(LENT_POOL, name),
                parse_time(annotations[LENT_UNTIL]),
                self.config.lent_notice_s if notice is None else float(notice),
            )
        if self.lent_nodes.get(name) != lent:
            if lent is None:
                del self.lent_nodes[name]
            else:
                self.lent_nodes[name] = lent
            self.lent_dirty = True
        self._changed(self.clock.now())

    def _lent(self) -> tuple[LentPool, ...]:
        """The snapshot's pools: the lent nodes by (pool, reclaim), as dispatch/phases/lending.py reads
        annotated nodes; none when the planner is blind to the tide."""
        if self.config.tide_blind:
            return ()
        if self.lent_dirty:
            pools: dict[tuple[str, float], set[str]] = {}
            notices: dict[tuple[str, float], float] = {}
            for node, (pool, until, notice) in self.lent_nodes.items():
                pools.setdefault((pool, until), set()).add(node)
                notices[pool, until] = max(notices.get((pool, until), 0.0), notice)
            self.lent_pools = tuple(
                LentPool(pool, frozenset(nodes), until, notices[pool, until])
                for (pool, until), nodes in sorted(pools.items())
            )
            self.lent_dirty = False
        return self.lent_pools

    # -- the nights ----------------------------------------------------------------------------

    def _schedule_night(self, after: float) -> None:
        window = NIGHT.next_window(after, self.start)
        assert window is not None  # (nightly)
        lend, reclaim = window
        notice = self.config.lent_notice_s
        for at, kind in ((lend, LEND), (reclaim - notice, NOTICE), (reclaim - _BEFORE_DRAIN_S, RECLAIM)):
            heapq.heappush(self.tide_events, (max(at, self.start), kind))

    def _next_tide(self) -> float:
        return self.tide_events[0][0] if self.tide_events else INF

    def _tide(self, now: float) -> None:
        while self.tide_events and self.tide_events[0][0] <= now:
            _, kind = heapq.heappop(self.tide_events)
            if kind == LEND:
                self.stats["nights"] += 1
                self._set_quotas(self.night_quota)
            elif kind == NOTICE:
                self._notice(now)
            else:
                self._reclaim(now)
                self._set_quotas(self.day_quota)
                self._schedule_night(now + 2 * _BEFORE_DRAIN_S)
        self._changed(now)

    def _set_quotas(self, gpus: dict[str, int]) -> None:
        for vc, hard in gpus.items():
            if self.hard[vc] == hard:
                continue
            body = {"spec": {"hard": {QUOTA_KEY: str(hard)}}}
            self.cluster.api.patch(RESOURCEQUOTAS, vc, "quota", "application/merge-patch+json", body)
            self.hard[vc] = hard
            self.dirty_quotas.add(vc)

    def _run_bound(self, rec: JobRecord) -> float | None:
        """The job's run-time bound: its prediction's tail bound (at ``lent_coverage``) x
        ``lent_bound_factor`` (a margin to tune); None without one."""
        prediction = rec.prediction
        if prediction is None:
            return None
        bound = prediction.tail_s
        return None if bound is None else bound * self.config.lent_bound_factor

    def _on_lent(self, rec: JobRecord) -> list[str]:
        nodes = set(rec.bound_nodes) | {slot[2] for slot in rec.placement}
        return [node for node in nodes if node in self.lent_nodes]

    def _notice(self, now: float) -> None:
        """The running jobs on the pool that will not be done by the reclaim are told (by the
        dispatcher; only if it knows the pool is lent).  One that declares its checkpoints
        leaves at its next one before the reclaim (checkpoints.py), unless it only gives
        back extra Workers there (elastic_jobs.py)."""
        if self.config.tide_blind:
            return
        for job_id in self.running:
            rec = self.records[job_id]
            lent = self._on_lent(rec)
            if not lent:
                continue
            reclaim_at = self.lent_nodes[lent[0]][1]
            bound = self._run_bound(rec)
            if bound is None or rec.run_started_at + bound > reclaim_at:
                self.stats["reclaim_notices"] += 1
                if rec.declared_every_s is not None and self._extras_on(rec, self.lent_nodes) is None:
                    self.told_reclaim[job_id] = reclaim_at
                    if self._checkpointed_now(rec, now):
                        self._leave_at_checkpoint(rec, now)

    def _leave_before_reclaim(self, rec: JobRecord, now: float) -> None:
        """A job told of the reclaim wrote its checkpoint in the notice: it leaves now, having
        lost nothing, suspended and queued again in its place (checkpoints.py)."""
        if self.told_reclaim.pop(rec.job.id, None) is None or not self._on_lent(rec):
            return
        self.stats["reclaim_left_at_checkpoint"] += 1
        assert rec.run_started_at is not None  # (it runs)
        self.stats["reclaim_left_gpu_s"] += rec.gpus * (now - rec.run_started_at)
        self._suspend(rec, now, None)

    def _reclaim(self, now: float) -> None:
        """What still runs on the pool is preempted (suspended, queued again in its place), but
        an elastic job whose Workers there are extra gives them back and runs on
        (elastic_jobs.py); released jobs with pods bound or planned there are taken back."""
        self.told_reclaim.clear()
        for rec in [r for r in self.records.values() if r.state in (RUNNING, RELEASED) and self._on_lent(r)]:
            keep = self._extras_on(rec, self.lent_nodes) if rec.state == RUNNING else None
            if keep is not None:
                self._shrink_at_reclaim(rec, keep, now)
            elif rec.state == RUNNING:
                self.stats["reclaim_kills"] += 1
                self.stats["reclaim_killed_gpu_s"] += rec.gpus * (now - rec.run_started_at)
                self.reclaim_killed.add(rec.job.id)
                self.stats["reclaim_killed_jobs"] = len(self.reclaim_killed)
                self.stats["reclaim_killed_detail"].append(_killed(rec, now))
                self._suspend(rec, now, None)
            else:
                self.stats["reclaim_taken_back"] += 1
                self._take_back(rec, now, count_attempt=False)

    # -- what ran there ------------------------------------------------------------------------

    def _admitted(self, rec: JobRecord, now: float) -> None:
        """A job released with pods planned on lent nodes: noted with its bound and the reclaim."""
        if not self.lent_nodes:
            return
        lent = [slot[2] for slot in rec.placement if slot[2] in self.lent_nodes]
        if lent:
            bound = self._run_bound(rec)
            reclaim_at = self.lent_nodes[lent[0]][1]
            self.lent_admissions.append((rec.job.id, now, bound, reclaim_at))
            if bound is None or now + bound > reclaim_at:  # (only the tide-blind planner does that)
                self.stats["lent_admitted_outlasting"] += 1

    def _ran(self, rec: JobRecord, now: float) -> None:
        """A run of the job ends (finished or preempted): its GPU-seconds on lent nodes, and in
        its VC's memory (fair share with memory: usage_memory.py)."""
        if rec.lent_gpus and rec.run_started_at is not None:
            self.stats["lent_gpu_s"] += rec.lent_gpus * (now - rec.run_started_at)
        rec.lent_gpus = 0
        if rec.run_started_at is not None:
            self.memory.add(rec.job.vc, rec.gpus * (now - rec.run_started_at), now)

    def _started_lent(self, rec: JobRecord) -> None:
        """A run starts (its whole gang runs): its GPUs on lent nodes, noted until it ends."""
        lent = self.lent_nodes
        rec.lent_gpus = sum(count for node, count in rec.bound_nodes.items() if node in lent) * rec.per_pod_gpus
        if rec.lent_gpus:
            self.stats["lent_runs"] += 1
            self.lent_started.add(rec.job.id)
            self.stats["lent_jobs"] = len(self.lent_started)
