"""Run a cycle soon after something changed, so a job on an idle cluster does not wait
for the tick. In-process (embedded mode) a loop registers itself; with a broker a Celery
task is sent, debounced through Redis so a burst of submissions makes one cycle; without
one, on PostgreSQL, a `NOTIFY` reaches a `run_dispatcher` process in another process
(its `Listener` wakes the loop)."""

import logging
import threading

from django.conf import settings
from django.db import DatabaseError, connection, connections

log = logging.getLogger(__name__)
_local_wakers: list[threading.Event] = []
CHANNEL = "jobdash_kick"


def register(event: threading.Event) -> None:
    _local_wakers.append(event)


def unregister(event: threading.Event) -> None:
    if event in _local_wakers:
        _local_wakers.remove(event)


def kick() -> None:
    if _local_wakers:
        for event in list(_local_wakers):
            event.set()
        return
    if not settings.CELERY_BROKER_URL:
        _notify()  # a run_dispatcher process may be listening; else the next tick will see it
        return
    try:
        from jobdash.dispatch.tasks import kick_cycle

        kick_cycle()
    except Exception as error:  # a broker outage must not fail a submission: the tick catches up
        log.warning("could not kick a cycle: %s", error)


def _notify() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {CHANNEL}")
    except DatabaseError as error:  # must not fail a submission: the tick catches up
        log.warning("could not notify the dispatcher: %s", error)


def on_queue_changed(sender, **kwargs) -> None:
    kick()


class Listener:
    """`LISTEN jobdash_kick` on a connection of its own, in a thread: every notification
    sets `wake` (a DispatcherLoop's flag, so a burst of them makes one cycle); reconnects
    after a lost connection."""

    def __init__(self, wake: threading.Event, *, alias: str = "default"):
        self.wake = wake
        self.alias = alias
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kick-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stopping.is_set():
            wrapper = connections.create_connection(self.alias)  # private to this thread
            try:
                wrapper.ensure_connection()
                raw = wrapper.connection
                raw.autocommit = True
                raw.execute(f"LISTEN {CHANNEL}")
                self.wake.set()  # kicks sent while we were not listening
                backoff = 0.1
                while not self._stopping.is_set():
                    for _ in raw.notifies(timeout=0.5, stop_after=1):
                        self.wake.set()
            except Exception as error:  # the database went away: listen again after a pause
                log.warning("kick listener: %s; reconnecting in %.1fs", error, backoff)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                try:
                    wrapper.close()
                except Exception:
                    pass
