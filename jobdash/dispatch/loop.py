"""The dispatcher without Celery: one thread that runs reconcile once, then a cycle and the
tracker on every tick or kick, and (there being no beat) the usage fold every minute. Used by
`manage.py run_dispatcher` and embedded mode."""

import logging
import threading
import time

from django.db import close_old_connections, connections

from jobdash import logs, metrics
from jobdash.dispatch import kick
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.failures import CycleFailed
from jobdash.dispatch.writers import idle_bound, transitions
from jobdash.leader import Elector, LeaderLoop
from jobdash.leader.factory import elector_from_settings, renew_every
from jobdash.usage import services as usage

log = logging.getLogger(__name__)
FOLD_EVERY_S = 60.0
# A burst of watch events (a gang's pods starting, a wave of finishes) and submissions makes
# one cycle: cycles start at most this often. What arrives during a longer cycle is the next
# one's already, so only after short cycles does the loop wait, and a job at most this long.
COALESCE_S = 0.05


class DispatcherLoop:
    """`leader`: an Elector, or the name of a backend configured from settings ("none" for
    embedded mode and tests: always the leader, term 1)."""

    def __init__(self, dispatcher: Dispatcher, *, tick_seconds: float, leader: str | Elector = "none"):
        self.dispatcher = dispatcher
        self.tick_seconds = tick_seconds
        self.wake = threading.Event()
        self._stopping = threading.Event()
        self._elected = threading.Event()
        self._term: int | None = None
        self.leader = LeaderLoop(
            elector_from_settings(leader) if isinstance(leader, str) else leader,
            on_elected=self._on_elected,
            on_lost=self._on_lost,
            renew_every=renew_every(),
            retry_every=1.0,
        )
        self.thread = threading.Thread(target=self._run, name="dispatcher", daemon=True)

    def _on_elected(self, leadership) -> None:
        self._term = leadership.term
        self._elected.set()
        self.wake.set()

    def _on_lost(self) -> None:
        self._term = None
        self._elected.clear()

    def _step_down(self, term: int, error: Exception) -> None:
        """A write under `term` was refused: that term is over. Only that one: the cycle
        may fail after this process was elected again, under a newer term."""
        log.warning("stepping down: %s", error)
        if self._term == term:
            self._on_lost()

    def on_cluster_event(self, event) -> None:
        """Watch events (a pod started or finished, a quota changed) wake the loop: a
        burst of them makes one cycle, since the loop only looks at the flag between cycles."""
        self.wake.set()

    def start(self) -> None:
        idle_bound.bound_paused_transactions()
        # The term fences writes at the database and at jobdash's webhook; this stops them at
        # the source, by this process's own clock (also where no webhook is registered).
        self.dispatcher.gateway.writes_while(self.leader.is_leader)
        metrics.serve()  # JOBDASH_METRICS_PORT (0: off)
        kick.register(self.wake)
        self.leader.start()
        self.thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self.wake.set()
        kick.unregister(self.wake)
        self.thread.join(timeout=10)
        self.leader.stop()

    def _run(self) -> None:
        reconciled_term = None
        folded_at = float("-inf")
        began = float("-inf")  # monotonic time the last cycle began
        while not self._stopping.is_set():
            self.wake.wait(self.tick_seconds)
            gap = COALESCE_S - (time.monotonic() - began)
            if gap > 0 and not self._stopping.is_set():
                time.sleep(gap)  # what else arrives meanwhile is this cycle's too
            self.wake.clear()
            term = self._term
            if term is None or self._stopping.is_set():
                continue
            began = time.monotonic()
            try:
                # (leadership's start too: its failing keeps every cycle from running)
                with self.dispatcher.failures.watch(term):
                    if reconciled_term != term:
                        logs.bind_term(term)
                        transitions.take_term(term, self.leader.leadership.identity if self.leader.leadership else "")
                        log.info("leader with term %s: reconcile %s", term, self.dispatcher.reconcile(term))
                        reconciled_term = term
                    self.dispatcher.cycle(term)
                if time.monotonic() - folded_at >= FOLD_EVERY_S:  # (the usage fold is beat's, without Celery ours)
                    folded_at = time.monotonic()
                    usage.fold()
            except transitions.StaleTerm as error:
                self._step_down(term, error)
            except CycleFailed:
                pass  # logged (a traceback once per distinct error) and recorded; the next tick retries
            except Exception:  # the fold's: no cycle failed, it tries again in a minute
                log.exception("usage fold failed")
            finally:
                close_old_connections()
        connections.close_all()  # this thread's connections: nobody else will close them
