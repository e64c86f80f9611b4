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

from jobdash.dispatch.phases.lost import Lost
from jobdash.dispatch.phases.queue_out import Turn
from jobdash.dispatch.phases.snapshot_phase import Observation, World
from jobdash.dispatch.state.predictions import Expected
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
    clusters: dict = field(default_factory=dict)  # copies deleted, jobs planned again (phases/clusters.py)


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
    # 1. snapshot: the fence's claim counter read before it (a claim since makes it stale),
    # and the world cloned
    claims: int | None = None
    world: World | None = None
    # 2. expect: the active jobs' run times
    expected: Expected | None = None
    # 3. lost: the planned pods lost, the failed nodes
    lost: Lost | None = None
    # 4. build: the snapshot and what the later phases need of it
    observation: Observation | None = None
    # 5. plan: whether this is a complete round (every status written, start times forecast)
    complete: bool = False
    decision: Plan | None = None
    # 6. release: the claimed jobs' objects on their way (phase 11 records the outcomes)
    sending: Sending | None = None
    # 9. track: what the tracker did, by outcome
    tracked: dict[str, int] = field(default_factory=dict)
    # 10. replace: the placements it changed (phase 12 pins by them)
    replaced: Replaced = field(default_factory=Replaced)
    # 14, 15: the mirror's and the events' turn
    turn: Turn | None = None

    def __post_init__(self) -> None:
        self.laps = Laps(self.result.phases)

    @property
    def cloned(self) -> World:
        if self.world is None:
            raise RuntimeError("phase 1 (snapshot) has not run")
        return self.world

    @property
    def observed(self) -> Observation:
        if self.observation is None:
            raise RuntimeError("phase 4 (build) has not run")
        return self.observation

    @property
    def plan(self) -> Plan:
        if self.decision is None:
            raise RuntimeError("phase 5 (plan) has not run")
        return self.decision

    @property
    def stale(self) -> bool:
        """Another cycle claimed after this one's snapshot (phase 6 found it): its plan may
        spend room that is gone: it releases nothing, preempts and resizes nothing."""
        return self.result.skipped
