"""What every election backend offers, and the loop that drives one.

A `Leadership` carries a `term`, strictly larger for every new leadership of the same
election. Callers use it as a fencing token (the release compare-and-set refuses a
stale term), so correctness never rests on the lock alone: a leader that was paused
past its lease and still believes it leads is refused by the database.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from jobdash import logs, metrics

log = logging.getLogger("jobdash.leader")


@dataclass(frozen=True)
class Leadership:
    identity: str
    term: int
    since: float  # epoch seconds


class BackendError(Exception):
    """The election backend could not be asked; who leads is unknown (not "nobody")."""


@runtime_checkable
class Elector(Protocol):
    identity: str

    def try_acquire(self) -> Leadership | None:
        """One short, non-blocking attempt; the current Leadership when already leader."""

    def renew(self) -> bool:
        """Keep leadership; False means it is lost and the caller must stop acting at once."""

    def resign(self) -> None:
        """Give leadership up (clean shutdown) so a follower takes over without waiting."""

    def holder(self) -> Leadership | None:
        """Who leads now, read from the backend; any process may ask. Raises BackendError."""

    def valid_until(self) -> float:
        """Monotonic time (time.monotonic()) up to which this process may act as leader
        without hearing from the backend again: the lease it last took or renewed."""

    # Optional: `wait_for_change(timeout) -> bool` lets a follower block until the lock
    # may have changed hands (Consul blocking query) instead of sleeping; False means
    # it did not wait and the caller should sleep itself.


def default_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _ignore(*args) -> None:
    pass


class LeaderLoop:
    """Drive an Elector in a daemon thread: acquire, renew every `renew_every`, step down.

    Callbacks run on the loop's thread and must return quickly: while one runs, nothing
    renews the lease. Hand long work (a reconcile pass) to another thread.
    """

    def __init__(
        self,
        elector: Elector,
        *,
        on_elected: Callable[[Leadership], None] = _ignore,
        on_lost: Callable[[], None] = _ignore,
        renew_every: float,
        retry_every: float,
    ) -> None:
        self.elector = elector
        self.on_elected = on_elected
        self.on_lost = on_lost
        self.renew_every = renew_every
        self.retry_every = retry_every
        self._lock = threading.Lock()
        self._leadership: Leadership | None = None
        self._stopping = threading.Event()
        self._resign = True
        self._thread: threading.Thread | None = None

    @property
    def leadership(self) -> Leadership | None:
        """The current leadership, or None: also None once the lease may have lapsed by this
        process's own monotonic clock, even if the renewing thread has not noticed yet (a
        process that was paused must not act on what it believed before the pause)."""
        with self._lock:
            leadership = self._leadership
        if leadership is not None and time.monotonic() >= self.elector.valid_until():
            return None
        return leadership

    def is_leader(self) -> bool:
        return self.leadership is not None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("LeaderLoop already started")
        self._thread = threading.Thread(target=self._run, name=f"leader {self.elector.identity}", daemon=True)
        self._thread.start()

    def stop(self, resign: bool = True, timeout: float | None = 10.0) -> None:
        """Stop the loop. The leader first stops acting (on_lost), then, with `resign`,
        releases the lock for a fast handover; without it the lock lapses on its own
        (Consul: session TTL; Postgres: when the process and its connection die)."""
        self._resign = resign
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                if self.leadership is None:
                    self._follow()
                else:
                    self._lead()
        finally:
            # Stop acting before handing over, so two leaders never act at once.
            self._step_down()
            if self._resign:
                self._call(self.elector.resign)

    def _follow(self) -> None:
        got = self._call(self.elector.try_acquire)
        if got is not None:
            with self._lock:
                self._leadership = got
            log.info("elected: %s term %s", got.identity, got.term)
            metrics.set_leader(got.identity, got.term, True)
            logs.bind_term(got.term)  # on this thread's lines, the on_elected callback's too
            self._call(self.on_elected, got)
            return
        wait = getattr(self.elector, "wait_for_change", None)
        if wait is None or not self._call(wait, self.retry_every):
            self._stopping.wait(self.retry_every)

    def _lead(self) -> None:
        if self._stopping.wait(self.renew_every):
            return
        if not self._call(self.elector.renew):
            log.warning("leadership lost: %s", self.elector.identity)
            self._step_down()

    def _step_down(self) -> None:
        # Leadership becomes None first, so is_leader() is false before anything else runs.
        with self._lock:
            was, self._leadership = self._leadership, None
        if was is not None:
            metrics.set_leader(was.identity, None, False)
            self._call(self.on_lost)

    @staticmethod
    def _call(fn, *args):
        """Run an elector method or callback; an exception counts as failure (None/False)
        rather than killing the thread that keeps the lease."""
        try:
            return fn(*args)
        except Exception:
            log.exception("leader loop: %s failed", getattr(fn, "__qualname__", fn))
            return None
