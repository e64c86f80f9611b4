"""Benchmark of the admission webhook on its production path: latency at a fixed rate.

    python -m bench.webhook                       # 200 requests/s for 30 s, mode deny, then one JSON line
    python -m bench.webhook --mode suspend --rps 400 --seconds 10
    python -m bench.webhook --quick               # 5 s (a smoke run)

The webhook sits on the API server's request path (timeoutSeconds 5, failurePolicy Fail),
so what matters is its tail latency under a steady load, not its peak throughput.

- The server is the image's: `deploy/docker/entrypoint.sh webhook`, i.e. gunicorn (gthread)
  on the webhook's own listener, TLS with certificates from `entrypoint.sh certs`, every
  connection presenting the API server's client certificate, against PostgreSQL (DATABASE_URL, or a
  throwaway cluster started like tests/harness.py does) and Redis when CELERY_BROKER_URL
  is set (each new job kicks a cycle through it).
- The load is open-loop: request i is due at start + i/rps whatever happened before, sent
  by a pool of client threads over keep-alive HTTPS connections, as the API server keeps
  its connections to a webhook. Latency is measured from the time a request was due (so
  a stall delays every request behind it and shows in the percentiles: no coordinated
  omission) to the end of its response.
- The mix follows Katib retrying: 20% new TFJob creates by katib-controller in managed
  namespaces (validate + insert), 50% retries of those (one indexed lookup), 15% jobdash's
  own creates and 10% TFJob updates (pass without the database), 5% creates in an
  unmanaged namespace (pass after two lookups).
- errors: non-200 answers, an answer for another uid, an unexpected decision, or a
  failed connection.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib.util
import json
import os
import platform
import queue
import random
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KATIB = "system:serviceaccount:kubeflow:katib-controller"
JOBDASH = "system:serviceaccount:jobdash:jobdash"
NAMESPACES = [f"bench-{i}" for i in range(10)]
RUN = uuid.uuid4().hex[:6]  # this run's job names: t<run>-<i>, so runs never collide
MIX = (("new", 0.20), ("retry", 0.50), ("own", 0.15), ("update", 0.10), ("unmanaged", 0.05))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def database():
    """DATABASE_URL if set, else a throwaway PostgreSQL like the test harness's."""
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    spec = importlib.util.spec_from_file_location("jobdash_test_harness", ROOT / "tests" / "harness.py")
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    with harness.postgres() as url:
        yield url


def tfjob(name: str, namespace: str) -> dict:
    resources = {"cpu": "1", "memory": "1Gi"}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"katib.kubeflow.org/trial": name, "katib.kubeflow.org/experiment": "bench"},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1beta1",
                    "kind": "Trial",
                    "name": name,
                    "uid": str(uuid.uuid4()),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "tfReplicaSpecs": {
                "PS": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "kubeflow/tf-mnist:1.0",
                                    "resources": {"requests": resources, "limits": resources},
                                }
                            ]
                        }
                    },
                },
                "Worker": {
                    "replicas": 4,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "kubeflow/tf-mnist:1.0",
                                    "resources": {"requests": resources, "limits": resources},
                                }
                            ]
                        }
                    },
                },
            }
        },
    }


def review(obj: dict, user: str, operation: str = "CREATE") -> tuple[str, bytes]:
    uid = str(uuid.uuid4())
    gvk = {"group": "kubeflow.org", "version": "v1", "kind": "TFJob"}
    gvr = {"group": "kubeflow.org", "version": "v1", "resource": "tfjobs"}
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
            "operation": operation,
            "userInfo": {"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": obj,
            "oldObject": obj if operation == "UPDATE" else None,
            "dryRun": False,
            "options": {
                "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
                "apiVersion": "meta.k8s.io/v1",
            },
        },
    }
    return uid, json.dumps(body).encode()


def workload(count: int, mix=MIX, seed: int = 7) -> list[tuple[str, str, bytes]]:
    """(kind, uid, body) for each request, in sending order."""
    rng = random.Random(seed)
    kinds, weights = zip(*mix, strict=False)
    created: list[dict] = []
    requests = []
    for i in range(count):
        kind = rng.choices(kinds, weights)[0]
        if kind == "retry" and not created:
            kind = "new"
        if kind == "new":
            obj = tfjob(f"t{RUN}-{i}", rng.choice(NAMESPACES))
            created.append(obj)
            uid, body = review(obj, KATIB)
        elif kind == "retry":
            uid, body = review(rng.choice(created[-200:]), KATIB)
        elif kind == "own":
            uid, body = review(tfjob(f"released-{i}", rng.choice(NAMESPACES)), JOBDASH)
        elif kind == "update":
            uid, body = review(tfjob(f"trial-{i}", rng.choice(NAMESPACES)), KATIB, "UPDATE")
        else:
            uid, body = review(tfjob(f"free-{i}", "kubeflow"), KATIB)
        requests.append((kind, uid, body))
    return requests


def expected_allowed(kind: str, mode: str) -> bool:
    return kind in ("own", "update", "unmanaged") or mode == "suspend"


class Server:
    """gunicorn through the image's entrypoint: the webhook's listener, mutual TLS."""

    def __init__(self, database_url: str, mode: str, workers: int, threads: int, workdir: Path):
        self.port = free_port()
        self.tls = workdir / "tls"
        entrypoint = str(ROOT / "deploy/docker/entrypoint.sh")
        subprocess.run(["sh", entrypoint, "certs", str(self.tls)], check=True, capture_output=True)
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "DATABASE_URL": database_url,
            "WEBHOOK_PORT": str(self.port),
            "WEBHOOK_CONCURRENCY": str(workers),
            "GUNICORN_THREADS": str(threads),
            "JOBDASH_WEBHOOK_TLS_CERT": str(self.tls / "webhook.crt"),
            "JOBDASH_WEBHOOK_TLS_KEY": str(self.tls / "webhook.key"),
            "JOBDASH_WEBHOOK_CLIENT_CA": str(self.tls / "client-ca.crt"),
            "JOBDASH_WEBHOOK_MODE": mode,
            "JOBDASH_RELEASE_MODE": "unsuspend" if mode == "suspend" else "create",
            "LOG_LEVEL": "WARNING",
        }
        # Production's persistent database connections (compose and deploy/ leave the
        # default), whatever tests/harness.py sets for the test suite.
        env.pop("DATABASE_CONN_MAX_AGE", None)
        self.process = subprocess.Popen(
            ["sh", entrypoint, "webhook"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                self.connection().request("GET", "/healthz", headers={"Host": "localhost"})
                break
            except (OSError, ssl.SSLError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    sys.exit("bench.webhook: gunicorn did not start")
                time.sleep(0.2)

    def connection(self) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cafile=str(self.tls / "webhook.crt"))
        context.load_cert_chain(str(self.tls / "apiserver.crt"), str(self.tls / "apiserver.key"))
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=10, context=context)
        connection.connect()
        return connection

    def cpu_seconds(self) -> float:
        """CPU time used so far by gunicorn's master and workers (Linux /proc)."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(stat.parent.name), int(fields[1])
            if pid == self.process.pid or ppid == self.process.pid:
                total += (int(fields[11]) + int(fields[12])) / ticks
        return total

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def drive(server: Server, requests, rps: float, clients: int, mode: str) -> tuple[list[float], list[float], int, float]:
    """Send every request at its due time; returns latencies and service times (ms), errors, wall time."""
    due: queue.Queue = queue.Queue()
    latencies: list[float] = []
    service: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start = time.perf_counter() + 0.5
    for i, item in enumerate(requests):
        due.put((start + i / rps, *item))

    def client() -> None:
        connection = None
        while True:
            try:
                at, kind, uid, body = due.get_nowait()
            except queue.Empty:
                break
            delay = at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            sent = time.perf_counter()
            ok = False
            try:
                if connection is None:
                    connection = server.connection()
                connection.request(
                    "POST",
                    "/webhooks/admission/tfjobs",
                    body=body,
                    headers={"Content-Type": "application/json", "Host": "localhost"},
                )
                reply = connection.getresponse()
                answer = json.loads(reply.read())
                response = answer.get("response") or {}
                ok = (
                    reply.status == 200
                    and response.get("uid") == uid
                    and response.get("allowed") is expected_allowed(kind, mode)
                )
            except (OSError, ssl.SSLError, http.client.HTTPException, ValueError):
                with contextlib.suppress(Exception):
                    connection.close()
                connection = None
            done = time.perf_counter()
            with lock:
                latencies.append((done - at) * 1000)
                service.append((done - sent) * 1000)
                if not ok:
                    errors[0] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, service, errors[0], time.perf_counter() - start


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def prepare(database_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": database_url}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    code = (
        f"from jobdash.jobs.models import Namespace; [Namespace.objects.get_or_create(name=n) for n in {NAMESPACES!r}]"
    )
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True)


def count_jobs(database_url: str) -> int:
    env = {**os.environ, "DATABASE_URL": database_url}
    code = f"from jobdash.jobs.models import Job; print(Job.objects.filter(name__startswith='t{RUN}-').count())"
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhook", description=__doc__.splitlines()[0])
    parser.add_argument("--rps", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--mode", choices=("deny", "suspend"), default="deny")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per gunicorn worker")
    parser.add_argument("--clients", type=int, default=16, help="client threads (keep-alive connections)")
    parser.add_argument(
        "--mix",
        help="kind=share,... of new, retry, own, update, unmanaged (default: {})".format(
            ",".join(f"{k}={v}" for k, v in MIX)
        ),
    )
    parser.add_argument("--quick", action="store_true", help="5 seconds")
    args = parser.parse_args(argv)
    mix = MIX
    if args.mix:
        mix = tuple((kind, float(share)) for kind, share in (item.split("=") for item in args.mix.split(",")))
        unknown = {kind for kind, _ in mix} - {kind for kind, _ in MIX}
        if unknown:
            parser.error(f"--mix: unknown kinds {sorted(unknown)}")
    if shutil.which("openssl") is None:
        sys.exit("bench.webhook: openssl is needed for the certificate")
    seconds = 5.0 if args.quick else args.seconds
    count = int(args.rps * seconds)
    requests = workload(count + 400, mix)
    warmup, measured = requests[:400], requests[400:]

    with database() as database_url, tempfile.TemporaryDirectory(prefix="bench-webhook-") as workdir:
        prepare(database_url)
        server = Server(database_url, args.mode, args.workers, args.threads, Path(workdir))
        try:
            drive(server, warmup, args.rps, args.clients, args.mode)
            cpu = server.cpu_seconds()
            load = os.getloadavg()[0]
            latencies, service, errors, wall = drive(server, measured, args.rps, args.clients, args.mode)
            cpu = server.cpu_seconds() - cpu
        finally:
            server.stop()
        jobs = count_jobs(database_url)

    result = {
        "rps": round(len(latencies) / wall, 1),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "errors": errors,
        "target_rps": args.rps,
        "requests": len(latencies),
        "p90_ms": round(percentile(latencies, 90), 2),
        "p999_ms": round(percentile(latencies, 99.9), 2),
        "max_ms": round(max(latencies), 2),
        "service_p50_ms": round(statistics.median(service), 2),
        "service_p99_ms": round(percentile(service, 99), 2),
        "mode": args.mode,
        "mix": ",".join(f"{k}={v:g}" for k, v in mix),
        "gunicorn": f"{args.workers} workers x {args.threads} threads, TLS",
        "server_cpu_ms_per_request": round(cpu * 1000 / len(latencies), 2),
        "jobs_created": jobs,
        "loadavg_1m_before": round(load, 2),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
