"""Phases 14 and 15: the queue as QueuedJob objects (mirror.sync) and the outbox's state
changes as Kubernetes Events (cluster_events.send), within one write budget.

Both only with half the budget's burst in hand: a cycle a second or so under a burst of
submissions, not a full read of the queue every cycle for a few writes; and, reading and
comparing a long queue being their cost, at most `publish_share` of the leader's time.
Once a pass finds nothing to write, neither runs again until something changed: the job
rows (`changed`), or the QueuedJob objects in the cluster (someone deleted one).
"""

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from jobdash.cluster.gateway import ClusterGateway, GatewayError
from jobdash.dispatch.state.write_budget import WriteBudget
from jobdash.dispatch.writers import cluster_events, mirror
from jobdash.dispatch.writers import release as release_phase

log = logging.getLogger(__name__)


class QueueOut:
    """Kept by the Dispatcher between cycles: the budget and when each part is due."""

    def __init__(self, *, qps: float, burst: int, share: float, mirror_writes: int, events_per_cycle: int) -> None:
        self.budget = WriteBudget(qps, burst)
        self.share = share
        self.mirror_writes = mirror_writes
        self.events_per_cycle = events_per_cycle
        self.moves_at = float("-inf")  # monotonic time of the last complete round of QueuedJob moves
        self.paused_until = float("-inf")  # the cluster refused QueuedJob writes: not before
        self.not_before = float("-inf")  # monotonic: the next turn of both
        self.settled: int | None = None  # the QueuedJob objects' revision when a pass wrote nothing
        self.events_settled = False  # the last send found the outbox empty

    def begin(self, started: datetime, *, changed: bool) -> "Turn":
        """This cycle's turn: whether both write (`changed`: the job rows may have changed
        since the last pass, False in a quiet cycle)."""
        began = time.monotonic()
        batch = self.budget.refill(started) >= max(1, self.budget.burst // 2) and began >= self.not_before
        return Turn(batch, began, changed)

    def mirror(self, gateway: ClusterGateway, turn: "Turn", *, term: int, concurrency: int, result) -> None:
        """Phase 14: the queue as QueuedJob objects, within what the budget holds."""
        budget = self.budget
        revision = gateway.revision(mirror=True)
        mirror_due = turn.changed or self.settled != revision
        try:
            if turn.batch and mirror_due and time.monotonic() >= self.paused_until:
                moves_due = time.monotonic() - self.moves_at >= mirror.MOVES_INTERVAL_S
                limit = min(self.mirror_writes, int(budget.tokens))
                pool = release_phase.sending_pool(concurrency)
                result.mirrored = mirror.sync(gateway, term=term, limit=limit, pool=pool, moves_due=moves_due)
                written = mirror.writes(result.mirrored)
                budget.spend(written)
                left = result.mirrored.get("deferred", 0) + result.mirrored.get("later", 0)
                self.settled = revision if not written and not left else None
                if moves_due:
                    self.moves_at = time.monotonic()
                if result.mirrored.get("refused"):  # (a role without QueuedJobs): not each cycle
                    self.paused_until = time.monotonic() + mirror.REFUSED_PAUSE_S
        except GatewayError as error:
            log.warning("cycle: mirror: %s", error)

    def events(self, gateway: ClusterGateway, turn: "Turn", *, concurrency: int, result) -> None:
        """Phase 15: the outbox's state changes as Events, with what the mirror left of the
        budget; then, of a turn that wrote, when the next may (its share of the leader's time)."""
        budget = self.budget
        try:
            limit = min(self.events_per_cycle, int(budget.tokens))
            if turn.batch and limit and (turn.changed or not self.events_settled):
                pool = release_phase.sending_pool(concurrency)
                result.events = cluster_events.send(gateway, limit=limit, pool=pool)
                sent = cluster_events.writes(result.events)
                budget.spend(sent)
                self.events_settled = not sent
        except GatewayError as error:
            log.warning("cycle: events: %s", error)
        if turn.batch:
            spent = time.monotonic() - turn.began
            self.not_before = time.monotonic() + spent * (1 / self.share - 1)


@dataclass(frozen=True)
class Turn:
    """One cycle's turn of phases 14 and 15."""

    batch: bool  # both may write: half a burst in hand, and their share of the time not spent
    began: float  # monotonic: when it began (what it took is charged to its share)
    changed: bool  # the job rows may have changed since the last pass
