"""What one admission cycle's phases (phases/table.py) hand each other, and how each is timed.

A CycleContext lives for one cycle: the driver (cycle.Dispatcher._cycle) makes it, every
phase reads what the phases before it left there and adds its own, and it is dropped with
the cycle. What outlives a cycle (caches, watches, budgets) lives on the leader, the
Dispatcher, which the context names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from jobdash.dispatch.phases.queue_out import Turn
from jobdash.dispatch.phases.snapshot_phase import Observation
from jobdash.dispatch.state.quiet import Seen
from jobdash.dispatch.writers.pinning import Replaced
from jobdash.dispatch.writers.release import Sending
from queueing import Plan

if TYPE_CHECKING:
    from jobdash.dispatch.cycle import Dispatcher


@dataclass
class CycleResult:
    pending: int = 0
    admitted: int = 0
    released: dict = field(default_factory=dict)
    phases: dict = field(default_factory=dict)
    skipped: bool = False  # released nothing: another cycle claimed after this one's snapshot
    repaired: dict = field(default_factory=dict)  # stranded claims re-sent, objects adopted
    preempted: int = 0  # victims told to leave this cycle
    reclaim_notices: int = 0  # jobs on lent nodes told they leave when the nodes go back
    grown: int = 0  # elastic jobs grown into free capacity
    pinned: dict = field(default_factory=dict)  # gated pods sent to their planned nodes, ...
    mirrored: dict = field(default_factory=dict)  # QueuedJob objects created, updated, ...
    events: dict = field(default_factory=dict)  # Kubernetes Events sent, ...


class Laps:
    """The phases' times in milliseconds, each under its name (Cycle.phases and the labels
    of jobdash_cycle_phase_seconds): from the end of the last lap to the end of this one."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into
        self.at = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.into[name] = round((now - self.at) * 1000, 2)
        self.at = now


@dataclass
class CycleContext:
    leader: Dispatcher
    term: int
    started: datetime  # the cycle's time: every phase stamps and compares with it
    result: CycleResult = field(default_factory=CycleResult)
    laps: Laps = field(init=False)
    # 0. quiet: what was read first (the next cycle may be quiet if it holds), and whether
    # this cycle is quiet
    seen: Seen | None = None
    quiet: bool = False
    # 1. snapshot: the fence's claim counter read before it (a claim since makes it stale)
    claims: int | None = None
    observation: Observation | None = None
    # 2. plan: whether this is a complete round (every status written, start times forecast)
    complete: bool = False
    decision: Plan | None = None
    # 3. release: the claimed jobs' objects on their way (phase 8 records the outcomes)
    sending: Sending | None = None
    # 6. track: what the tracker did, by outcome
    tracked: dict[str, int] = field(default_factory=dict)
    # 7. replace: the placements it changed (phase 9 pins by them)
    replaced: Replaced = field(default_factory=Replaced)
    # 11, 12: the mirror's and the events' turn
    turn: Turn | None = None

    def __post_init__(self) -> None:
        self.laps = Laps(self.result.phases)

    @property
    def observed(self) -> Observation:
        if self.observation is None:
            raise RuntimeError("phase 1 (snapshot) has not run")
        return self.observation

    @property
    def plan(self) -> Plan:
        if self.decision is None:
            raise RuntimeError("phase 2 (plan) has not run")
        return self.decision

    @property
    def stale(self) -> bool:
        """Another cycle claimed after this one's snapshot (phase 3 found it): its plan may
        spend room that is gone: it releases nothing, preempts and resizes nothing."""
        return self.result.skipped
