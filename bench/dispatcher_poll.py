"""The dispatcher as the source article ran it, for bench.kueue_baseline's side-by-side:
`manage.py run_dispatcher` minus everything that wakes the loop early. It runs a cycle
every JOBDASH_TICK_SECONDS and at no other time: cluster watch events and submissions
(the NOTIFY kick) do not wake it. With JOBDASH_POLICY=seed and a 10 s tick this is the
article's "poll every 10 s, release one job per namespace, wait until it runs".

    python -m bench.dispatcher_poll      # environment as for run_dispatcher
"""

import os
import signal
import sys
import threading


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobdash.settings")
    import django

    django.setup()
    from django.conf import settings

    from jobdash.cluster.factory import gateway_from_settings
    from jobdash.dispatch.cycle import Dispatcher
    from jobdash.dispatch.loop import DispatcherLoop

    gateway = gateway_from_settings()
    loop = DispatcherLoop(Dispatcher(gateway), tick_seconds=settings.JOBDASH_TICK_SECONDS, leader="none")
    gateway.start(on_event=None, timeout=60)  # the watch cache, but its events wake nobody
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    loop.start()
    print(f"dispatcher running: polling only, tick {settings.JOBDASH_TICK_SECONDS}s", flush=True)
    stop.wait()
    loop.stop()
    gateway.stop()


if __name__ == "__main__":
    sys.exit(main())
