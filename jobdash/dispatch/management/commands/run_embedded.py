"""`make run`: the whole of jobdash in one process, no external services.

kubesim (the cluster) on a loopback port, the dispatcher loop (election `none`) in a
thread, and the web server in front; SQLite under var/. Submissions kick the loop at once.
"""

from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from jobdash.cluster.kube import KubeGateway
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.loop import DispatcherLoop
from kubesim.cluster import Cluster
from kubesim.config import load, write_kubeconfig
from kubesim.server import KubesimServer

CLUSTER_CONFIG = Path(__file__).resolve().parents[2] / "embedded_cluster.yaml"


class Command(BaseCommand):
    help = "Serve jobdash with an in-process simulated cluster and dispatcher (embedded mode)."

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--cluster-config", default=str(CLUSTER_CONFIG))

    def handle(self, *args, addrport, cluster_config, **options):
        config = load(cluster_config)
        cluster = Cluster(config)
        server = KubesimServer(cluster, "127.0.0.1", 0)
        kubeconfig = Path(settings.VAR_DIR) / "kubeconfig"
        kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        write_kubeconfig(str(kubeconfig), server.url, config.users)
        server.start_background()
        cluster.start()
        gateway = KubeGateway.from_settings("kubeconfig", str(kubeconfig))
        loop = DispatcherLoop(Dispatcher(gateway), tick_seconds=settings.JOBDASH_TICK_SECONDS, leader="none")
        gateway.start(on_event=loop.on_cluster_event, timeout=30)
        loop.start()
        self.stdout.write(
            f"kubesim cluster at {server.url}; dispatcher running (tick {settings.JOBDASH_TICK_SECONDS}s)"
        )
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            loop.stop()
            gateway.stop()
            cluster.stop()
            server.stop()
