"""The dispatcher as a process of its own, without Celery: `python manage.py run_dispatcher`."""

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand

from jobdash.cluster.factory import gateway_from_settings
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.kick import Listener
from jobdash.dispatch.loop import DispatcherLoop


class Command(BaseCommand):
    help = "Run admission cycles and the tracker in a loop (election from JOBDASH_LEADER)."

    def handle(self, *args, **options):
        gateway = gateway_from_settings()
        loop = DispatcherLoop(
            Dispatcher(gateway),
            tick_seconds=settings.JOBDASH_TICK_SECONDS,
            leader=settings.JOBDASH_LEADER,
        )
        gateway.start(on_event=loop.on_cluster_event, timeout=60)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        loop.start()
        # Submissions in other processes (web) kick this loop with a PostgreSQL NOTIFY.
        listener = Listener(loop.wake)
        listener.start()
        self.stdout.write(
            f"dispatcher running: leader election {settings.JOBDASH_LEADER}, tick {settings.JOBDASH_TICK_SECONDS}s"
        )
        stop.wait()
        listener.stop()
        loop.stop()
        gateway.stop()
