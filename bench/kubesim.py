"""Benchmark of kubesim through the official client, against `python -m kubesim serve`.

    python -m bench.kubesim            # full run, then one JSON line
    python -m bench.kubesim --quick    # smaller counts (a smoke run)

kubesim runs as its own process, as a cluster would; the benchmark process talks to
it with the official `kubernetes` client over HTTP/1.1 keep-alive.

- creates_per_s: TFJob creates/s (CustomObjectsApi.create_namespaced_custom_object
  from 4 client threads). The jobs are suspended so the number is the API path's
  (decode, validate, admission, quota, store, encode, HTTP); the operator still
  reconciles every one (Created/Suspended conditions) in the same server process.
  creates_per_s_running_jobs: the same with 1-worker jobs that run at once, so the
  operator, scheduler and kubelet compete with the API for the server's CPU.
- pod_transitions_per_s: TFJobs of 16 workers with a zero work duration are created
  and the simulated operator, scheduler and kubelet take every pod through
  Pending -> bound -> Running -> Succeeded; the rate counts those 3 transitions per pod
  from the first create until a pod watch has seen every pod Succeeded.
- watch_latency_ms_p50/p99: a label patch on a TFJob until a TFJob watch on another
  connection delivers the MODIFIED event carrying it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from kubernetes import client, config, watch

NS = "bench"
CONFIG = {
    "speed": 1.0,
    "nodes": [{"prefix": "node", "count": 50, "capacity": {"cpu": "256", "memory": "1Ti", "pods": "1000"}}],
    "namespaces": [{"name": NS}],
    "users": [
        {
            "token": "bench-token",
            "username": "system:serviceaccount:jobdash:jobdash",
            "groups": ["system:serviceaccounts"],
        }
    ],
    "kubelet": {"start_delay_seconds": 0.0},
    "workload": {"default_duration_seconds": 0.0},
    "watch": {"history": 200000},
}


def tfjob(name: str, workers: int, suspend: bool) -> dict:
    container = {
        "name": "tensorflow",
        "image": "tf:bench",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "annotations": {"kubesim.io/duration-seconds": "0"}},
        "spec": {
            "runPolicy": {"suspend": suspend},
            "tfReplicaSpecs": {"Worker": {"replicas": workers, "template": {"spec": {"containers": [container]}}}},
        },
    }


def start_server(workdir: Path) -> tuple[subprocess.Popen, Path]:
    config_path, kubeconfig = workdir / "kubesim.yaml", workdir / "kubeconfig"
    config_path.write_text(yaml.safe_dump(CONFIG))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesim",
            "serve",
            "--config",
            str(config_path),
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    process.stdout.readline()  # "kubesim serving ..." once the kubeconfig is written
    return process, kubeconfig


def parallel(count: int, threads: int, work) -> float:
    """Run work(i) for i in range(count) on `threads` threads; return elapsed seconds."""
    errors: list[BaseException] = []

    def run(offset: int) -> None:
        try:
            for i in range(offset, count, threads):
                work(i)
        except BaseException as exc:  # surface the first failure instead of a silent short count
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start


def bench_creates(api: client.CustomObjectsApi, count: int, suspend: bool) -> float:
    prefix = "create" if suspend else "live"
    elapsed = parallel(
        count,
        4,
        lambda i: api.create_namespaced_custom_object(
            "kubeflow.org", "v1", NS, "tfjobs", tfjob(f"{prefix}-{i}", 1, suspend)
        ),
    )
    return count / elapsed


def wait_for_quiet(core: client.CoreV1Api, pods: int) -> None:
    """Let the cluster finish what the previous phase started, so phases do not overlap."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = core.list_namespaced_pod(NS, field_selector="status.phase=Succeeded").items
        if len(done) >= pods:
            return
        time.sleep(0.2)
    raise RuntimeError("the cluster did not finish the running-job creates")


def bench_transitions(
    api: client.CustomObjectsApi, core: client.CoreV1Api, jobs: int, workers: int
) -> tuple[float, int]:
    pods = jobs * workers
    start_rv = core.list_namespaced_pod(NS, limit=1).metadata.resource_version
    done = threading.Event()
    succeeded: set[str] = set()

    def follow() -> None:
        w = watch.Watch()
        # Raw dicts: building V1Pod models would make this client, not kubesim, the bottleneck.
        for event in w.stream(
            core.list_namespaced_pod,
            NS,
            resource_version=start_rv,
            deserialize=False,
            label_selector="bench=transitions",
            timeout_seconds=300,
        ):
            if event["object"]["status"].get("phase") == "Succeeded":
                succeeded.add(event["object"]["metadata"]["name"])
                if len(succeeded) == pods:
                    done.set()
                    w.stop()

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    time.sleep(0.2)
    start = time.perf_counter()

    def create(i: int) -> None:
        body = tfjob(f"run-{i}", workers, False)
        body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["metadata"] = {"labels": {"bench": "transitions"}}
        api.create_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", body)

    parallel(jobs, 4, create)
    if not done.wait(300):
        raise RuntimeError(f"only {len(succeeded)} of {pods} pods succeeded")
    elapsed = time.perf_counter() - start
    return pods * 3 / elapsed, pods


def bench_watch_latency(api: client.CustomObjectsApi, samples: int) -> tuple[float, float]:
    api.create_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", tfjob("latency", 1, True))
    rv = api.get_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", "latency")["metadata"]["resourceVersion"]
    received: dict[str, float] = {}
    arrived = threading.Condition()

    def follow() -> None:
        w = watch.Watch()
        for event in w.stream(
            api.list_namespaced_custom_object,
            "kubeflow.org",
            "v1",
            NS,
            "tfjobs",
            resource_version=rv,
            field_selector="metadata.name=latency",
            timeout_seconds=120,
        ):
            seq = (event["object"]["metadata"].get("labels") or {}).get("seq")
            if seq is not None:
                with arrived:
                    received[seq] = time.perf_counter()
                    arrived.notify_all()
                if seq == str(samples - 1):
                    w.stop()

    threading.Thread(target=follow, daemon=True).start()
    time.sleep(0.2)
    latencies = []
    for i in range(samples):
        sent = time.perf_counter()
        api.patch_namespaced_custom_object(
            "kubeflow.org", "v1", NS, "tfjobs", "latency", {"metadata": {"labels": {"seq": str(i)}}}
        )
        with arrived:
            if not arrived.wait_for(lambda i=i: str(i) in received, timeout=10):
                raise RuntimeError(f"watch event {i} never arrived")
        latencies.append((received[str(i)] - sent) * 1000)
    latencies.sort()
    return statistics.median(latencies), latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    creates, jobs, samples = (500, 20, 100) if args.quick else (5000, 250, 1000)
    with tempfile.TemporaryDirectory(prefix="bench-kubesim-") as tmp:
        server, kubeconfig = start_server(Path(tmp))
        try:
            config.load_kube_config(config_file=str(kubeconfig))
            api, core = client.CustomObjectsApi(), client.CoreV1Api()
            creates_per_s = bench_creates(api, creates, suspend=True)
            print(f"# creates: {creates_per_s:.0f}/s over {creates}", file=sys.stderr)
            live_creates_per_s = bench_creates(api, creates // 2, suspend=False)
            print(f"# creates of running jobs: {live_creates_per_s:.0f}/s over {creates // 2}", file=sys.stderr)
            wait_for_quiet(core, creates // 2)
            transitions_per_s, pods = bench_transitions(api, core, jobs, 16)
            print(f"# pod transitions: {transitions_per_s:.0f}/s over {pods} pods", file=sys.stderr)
            p50, p99 = bench_watch_latency(api, samples)
            print(f"# watch latency: p50 {p50:.2f} ms, p99 {p99:.2f} ms", file=sys.stderr)
        finally:
            server.terminate()
            server.wait(10)
    print(
        json.dumps(
            {
                "creates_per_s": round(creates_per_s, 1),
                "creates_per_s_running_jobs": round(live_creates_per_s, 1),
                "pod_transitions_per_s": round(transitions_per_s, 1),
                "watch_latency_ms_p50": round(p50, 3),
                "watch_latency_ms_p99": round(p99, 3),
                "counts": {"creates": creates, "transition_pods": pods, "watch_samples": samples},
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
            }
        )
    )


if __name__ == "__main__":
    main()
