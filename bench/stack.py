"""The processes an end-to-end benchmark runs against, as in production: kubesim
(`python -m kubesim serve`) and the dispatcher (`python manage.py run_dispatcher`) each in
a process of its own, sharing the PostgreSQL database of DATABASE_URL with the benchmark
process, which submits through `jobdash.jobs.services.job_submit` like the API does.

Used by bench.kueue_baseline and bench.latency. Run through the harness, which provides
PostgreSQL (and Redis):

    .venv/bin/python tests/harness.py -- .venv/bin/python -m bench.kueue_baseline
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
JOBDASH_IDENTITY = "system:serviceaccount:jobdash:jobdash"
BENCH_USER = "bench"
JOBDASH_TOKEN = "jobdash-token"  # the dispatcher's identity's bearer token in cluster_config


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr, flush=True)


def setup_django() -> None:
    """Django for this process on the database it was given; migrated."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("DATABASE_URL must point at PostgreSQL: run through tests/harness.py")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobdash.settings")
    # The deployment measured is web + `run_dispatcher`, without Celery: no broker, so a
    # submission's kick does not queue Celery tasks that no worker would run.
    os.environ["CELERY_BROKER_URL"] = ""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def reset_database(namespaces: list[str]):
    """An empty queue, these namespaces (and only these) and a (staff) user who is a member
    of them all. Returns the user."""
    from django.contrib.auth.models import User
    from django.db import connection

    from jobdash.jobs.models import Cycle, Fence, Job, JobEvent, Namespace

    tables = [model._meta.db_table for model in (JobEvent, Job, Cycle, Fence)]
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    Namespace.objects.exclude(name__in=namespaces).delete()
    user, _ = User.objects.get_or_create(username=BENCH_USER)
    # Staff: the baseline gives its job classes numeric priorities, which are staff's override
    # (members name a PriorityClass instead).
    if not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    for name in namespaces:
        Namespace.objects.get_or_create(name=name)[0].members.add(user)
    return user


def tfjob_yaml(
    name: str,
    namespace: str,
    cpu: str,
    duration_s: float,
    memory: str = "256Mi",
    *,
    replicas: int = 1,
    annotations: dict[str, str] | None = None,
) -> str:
    """A TFJob of `replicas` Workers of `cpu` each (and `annotations`); kubesim runs it for
    `duration_s` once all its pods run."""
    more = "".join(f"\n    {key}: {json.dumps(value)}" for key, value in sorted((annotations or {}).items()))
    return f"""apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: {name}
  namespace: {namespace}
  annotations:
    kubesim.io/duration-seconds: "{duration_s}"{more}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: {replicas}
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.15.0
              resources:
                requests: {{cpu: "{cpu}", memory: {memory}}}
"""


def _stop(started, *, grace_s: float) -> None:
    """Terminate a started process (kill it after `grace_s`), then its profiler and log."""
    if started.process.poll() is None:
        started.process.terminate()
        try:
            started.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            started.process.kill()
            started.process.wait(5)
    profiler = getattr(started, "profiler", None)  # unset when the process failed to start
    if profiler:
        profiler.stop()
    started._log.close()


class Kubesim:
    """`python -m kubesim serve` in its own process."""

    def __init__(self, config: dict, workdir: Path, *, profile: Path | None = None):
        self.workdir = workdir
        config_path, self.kubeconfig = workdir / "kubesim.yaml", workdir / "kubeconfig"
        config_path.write_text(yaml.safe_dump(config))
        command = [
            sys.executable,
            "-m",
            "kubesim",
            "serve",
            "--config",
            str(config_path),
            "--port",
            "0",
            "--kubeconfig-out",
            str(self.kubeconfig),
        ]
        self.log_path = workdir / "kubesim.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._log, text=True, cwd=ROOT)
        assert self.process.stdout is not None
        first = self.process.stdout.readline()  # "kubesim serving http://127.0.0.1:PORT" once the kubeconfig exists
        if "serving" not in first:
            self.stop()
            raise RuntimeError(f"kubesim did not start: {first!r}\n{self.log_path.read_text()[-2000:]}")
        self.url = first.split()[2]
        self.profiler = Profiler(self.process.pid, profile) if profile else None

    def _get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=60) as response:
            return json.loads(response.read())

    def audit(self) -> list[dict]:
        return self._get("/kubesim/audit")["items"]

    def state(self) -> dict:
        return self._get("/kubesim/state")

    def stop(self) -> None:
        _stop(self, grace_s=15)


def cluster_config(
    namespaces: dict[str, dict],
    *,
    nodes: int,
    node_cpu: int,
    start_delay_s: float,
    history: int = 400_000,
    scoring: str = "LeastAllocated",
    node_groups: list[dict] | None = None,
) -> dict:
    """kubesim's config: `nodes` x `node_cpu` plain nodes, or `node_groups` as given (kubesim's
    `nodes` entries: labelled racks, bench.kueue_shape.Shape.node_groups)."""
    return {
        "speed": 1.0,
        "nodes": node_groups
        or [{"prefix": "node", "count": nodes, "capacity": {"cpu": str(node_cpu), "memory": "512Gi", "pods": "500"}}],
        "namespaces": [{"name": name, "quota": quota} for name, quota in namespaces.items()],
        "users": [{"token": JOBDASH_TOKEN, "username": JOBDASH_IDENTITY, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": start_delay_s},
        "scheduler": {"scoring": scoring},
        # The dispatcher's watches must never fall out of the event history (a 410 relists).
        "watch": {"history": history},
    }


class Dispatcher:
    """`python manage.py run_dispatcher` in its own process, election `none` (or, with
    `polling_only`, bench.dispatcher_poll)."""

    def __init__(
        self,
        kubeconfig: Path,
        workdir: Path,
        *,
        policy: str,
        tick_s: float,
        extra_env: dict | None = None,
        profile: Path | None = None,
        polling_only: bool = False,
    ):
        env = {
            **os.environ,
            "JOBDASH_CLUSTER": "kubeconfig",
            "KUBECONFIG": str(kubeconfig),
            "JOBDASH_LEADER": "none",
            "JOBDASH_POLICY": policy,
            "JOBDASH_TICK_SECONDS": str(tick_s),
            # run_dispatcher needs no broker: its loop is the scheduler.
            "CELERY_BROKER_URL": "",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        # Production's persistent database connections (compose and deploy/ leave the
        # default), whatever tests/harness.py sets for the test suite: with 0 the loop
        # connected anew after every cycle.
        if "DATABASE_CONN_MAX_AGE" not in (extra_env or {}):
            env.pop("DATABASE_CONN_MAX_AGE", None)
        self.log_path = workdir / f"dispatcher-{policy}{'-polling' if polling_only else ''}.log"
        self._log = open(self.log_path, "w")
        # polling_only: bench.dispatcher_poll, the article's loop (nothing but the tick wakes it)
        command = ["-m", "bench.dispatcher_poll"] if polling_only else ["manage.py", "run_dispatcher"]
        self.process = subprocess.Popen(
            [sys.executable, *command], cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 90
        while "dispatcher running" not in self.log_path.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the dispatcher did not start:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        self.profiler = Profiler(self.process.pid, profile) if profile else None

    def stop(self) -> None:
        _stop(self, grace_s=20)  # SIGTERM: the command stops its loop and gateway


class Profiler:
    """py-spy attached to a running process, writing collapsed stacks (see bench.profile_summary)
    when that process exits."""

    def __init__(self, pid: int, output: Path):
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if spy is None:
            sys.exit("py-spy not found: pip install py-spy")
        # BENCH_PROFILE_WALL=1: every thread's wall time, waits included (where a cycle's time
        # goes), instead of the CPU time of the thread holding the GIL.
        wall = os.environ.get("BENCH_PROFILE_WALL") == "1"
        self.process = subprocess.Popen(
            [
                spy,
                "record",
                "--pid",
                str(pid),
                "--rate",
                "50",
                "--format",
                "raw",
                "--nonblocking",
                "--idle" if wall else "--gil",
                "-o",
                str(output),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait(10)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (all its threads), from /proc."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds() -> float:
    """CPU of the whole PostgreSQL server this process is connected to (it must run on
    this machine, as under the harness): the postmaster, its live children, and the
    children it has reaped (cutime/cstime)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    postmaster = int(_stat(backend)[1])
    ticks = sum(int(x) for x in _stat(postmaster)[11:15])
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = _stat(int(entry))
            except OSError:
                continue
            if int(fields[1]) == postmaster:
                ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")
