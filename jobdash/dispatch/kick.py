"""Run a cycle soon after something changed, so a job on an idle cluster does not wait
for the tick. In-process (embedded mode) a loop registers itself; otherwise a Celery task
is sent, debounced through Redis so a burst of submissions makes one cycle."""

import logging
import threading

from django.conf import settings

log = logging.getLogger(__name__)
_local_wakers: list[threading.Event] = []


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
        return  # nobody to tell: the next tick will see it
    try:
        from .tasks import kick_cycle

        kick_cycle()
    except Exception as error:  # a broker outage must not fail a submission: the tick catches up
        log.warning("could not kick a cycle: %s", error)


def on_queue_changed(sender, **kwargs) -> None:
    kick()
