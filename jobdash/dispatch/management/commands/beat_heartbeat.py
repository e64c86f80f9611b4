"""Beat's liveness: a heartbeat file touched on every tick, and the check of its age.

Celery beat has no port to probe, and its election runs on a thread of its own: a beat whose
main loop is stuck (a hung publish to the broker, a hung database call) would keep renewing
its lock while emitting nothing, and no other replica could take over. `HeartbeatScheduler`
is `LeaderGatedScheduler` that touches HEARTBEAT_FILE on every tick, and ticks at least every
HEARTBEAT_SECONDS (a tick with nothing due only looks at the schedule), so the file's age says
whether the loop turns, leader or standby. The entrypoint runs beat with it
(`celery -A jobdash beat -S jobdash.dispatch.management.commands.beat_heartbeat:HeartbeatScheduler`);
the Kubernetes probes and compose's healthcheck read the file's age without loading Django
(deploy/base/beat.yaml), and `python manage.py beat_heartbeat [--max-age SECONDS]` does the
same check by hand: exit 0 when fresh, 1 when stale or missing.
"""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from jobdash.dispatch.beat import LeaderGatedScheduler

HEARTBEAT_FILE = Path("/tmp/jobdash-beat-heartbeat")  # the pod's /tmp emptyDir (read-only root)
HEARTBEAT_SECONDS = 5.0  # the longest a healthy beat goes without touching it
DEFAULT_MAX_AGE = 60.0  # the probes' threshold: many missed ticks, not one slow one


def touch(path: Path) -> None:
    try:
        path.touch()  # creates it, or sets its mtime to now
    except OSError:
        pass  # a full or missing /tmp fails the probe, not the beat


def age(path: Path, now: float | None = None) -> float | None:
    """Seconds since the last heartbeat, or None without one."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    return (time.time() if now is None else now) - mtime


class HeartbeatScheduler(LeaderGatedScheduler):
    def tick(self, *args, **kwargs):
        touch(HEARTBEAT_FILE)
        interval = super().tick(*args, **kwargs)
        return HEARTBEAT_SECONDS if interval is None else min(interval, HEARTBEAT_SECONDS)


class Command(BaseCommand):
    help = "Exit 0 if this container's beat ticked within --max-age seconds, else 1."

    def add_arguments(self, parser):
        parser.add_argument("--max-age", type=float, default=DEFAULT_MAX_AGE)
        parser.add_argument("--file", type=Path, default=HEARTBEAT_FILE)

    def handle(self, *args, max_age: float, file: Path, **options):
        seconds = age(file)
        if seconds is None:
            raise CommandError(f"no heartbeat at {file}: beat has not ticked (or runs without HeartbeatScheduler)")
        if seconds > max_age:
            raise CommandError(f"beat's last tick was {seconds:.0f} s ago (more than {max_age:.0f} s)")
        self.stdout.write(f"beat ticked {seconds:.1f} s ago")
