"""python -m kubesim serve --config FILE --port N --kubeconfig-out PATH"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path

from .cluster import Cluster
from .config import from_dict, load, write_kubeconfig
from .server import KubesimServer
from .tls import serving_certificate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubesim", description="A simulated Kubernetes cluster for jobdash."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the Kubernetes API over HTTP (or HTTPS)")
    serve.add_argument("--config", help="YAML config (nodes, namespaces, users, speed, ...)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port (see the kubeconfig)")
    serve.add_argument("--kubeconfig-out", help="write a kubeconfig for this server here")
    serve.add_argument("--context", help="user name whose context is current in the kubeconfig")
    serve.add_argument("--verbose", action="store_true", help="log every request")
    serve.add_argument(
        "--tls", action="store_true", help="serve HTTPS with a self-signed CA (in the kubeconfig); also `tls: true`"
    )
    serve.add_argument(
        "--tls-dir", help="where the CA and certificate are kept (default: kubesim-tls/ beside the kubeconfig)"
    )
    serve.add_argument(
        "--tls-san", action="append", default=[], help="a further name the certificate is for (repeatable)"
    )
    args = parser.parse_args(argv)

    try:
        config = load(args.config) if args.config else from_dict({})
        cluster = Cluster(config)
    except (OSError, ValueError) as exc:
        print(f"kubesim: bad config: {exc}", file=sys.stderr)
        return 2
    certificate = None
    if args.tls or config.tls:
        tls_dir = args.tls_dir or (
            str(Path(args.kubeconfig_out).parent / "kubesim-tls")
            if args.kubeconfig_out
            else tempfile.mkdtemp(prefix="kubesim-tls-")
        )
        try:
            certificate = serving_certificate(tls_dir, args.host, names=tuple(args.tls_san))
        except ImportError:
            print("kubesim: --tls needs the `cryptography` package", file=sys.stderr)
            return 2
    server = KubesimServer(
        cluster, args.host, args.port, verbose=args.verbose, tls=certificate.pair if certificate else None
    )
    if args.kubeconfig_out:
        ca_pem = certificate.ca_pem if certificate else None
        write_kubeconfig(args.kubeconfig_out, server.url, config.users, args.context, ca_pem)
    cluster.start()

    def shutdown(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    print(
        f"kubesim serving {server.url}" + (f" (kubeconfig {args.kubeconfig_out})" if args.kubeconfig_out else ""),
        flush=True,
    )
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        cluster.stop()
        server.server_close()
        cluster.drop_watches()
    return 0


if __name__ == "__main__":
    sys.exit(main())
