"""Leader loss and a faulty cluster, with real processes: Celery beat, the dispatcher,
PostgreSQL, Redis, kubesim over HTTP and the Consul test server. No job is created twice
or lost."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.loop import DispatcherLoop
from jobdash.jobs import services
from jobdash.jobs.models import Fence, Job, Namespace, State
from kubesim.testing import running_kubesim

from .dispatch_support import JOBDASH, eventually, manifest, settings, start_gateway

ROOT = Path(__file__).resolve().parents[2]
# Real processes on leases a second long: one worker runs them all, one after another, so
# that they do not compete with each other for the CPU (nor share the Redis broker's queues).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("real-processes")]


def database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


class Process:
    """A child process whose output lines are collected with the time they arrived."""

    def __init__(self, args: list[str], env: dict):
        self.popen = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.popen.stdout:
            self.lines.append((time.monotonic(), line.rstrip()))

    def matching(self, pattern: str, since: float = 0.0) -> list[tuple[float, str]]:
        return [(t, line) for t, line in list(self.lines) if t >= since and re.search(pattern, line)]

    def kill(self):
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def output(self) -> str:
        return "\n".join(line for _, line in self.lines[-40:])


@pytest.fixture
def user():
    user = User.objects.create_user("ops")
    Namespace.objects.create(name="team-a").members.add(user)
    return user


TTL, LOCK_DELAY = 1.0, 0.2


def test_two_celery_beats_only_the_leader_emits_and_a_killed_leader_is_replaced(consul_server, tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "JOBDASH_LEADER": "consul",
        "CONSUL_HTTP_ADDR": consul_server.address,
        "JOBDASH_LEADER_TTL_SECONDS": str(TTL),
        "JOBDASH_LEADER_LOCK_DELAY_SECONDS": str(LOCK_DELAY),
        "JOBDASH_TICK_SECONDS": "0.2",
    }
    beats = [
        Process(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "jobdash",
                "beat",
                "--loglevel",
                "INFO",
                "-s",
                str(tmp_path / f"schedule-{i}"),
            ],
            env,
        )
        for i in range(2)
    ]
    try:
        emitting = eventually(
            lambda: [b for b in beats if len(b.matching(r"beat: emit jobdash.admission_cycle")) >= 5],
            timeout=30,
            message="no beat emitted cycles",
        )
        assert len(emitting) == 1, "both beats emitted"
        leader = emitting[0]
        standby = beats[1 - beats.index(leader)]
        assert standby.matching(r"beat: emit") == []
        first_term = Fence.objects.get(id=1).term

        leader.kill()
        killed_at = time.monotonic()
        took_over = eventually(
            lambda: standby.matching(r"beat: emit", since=killed_at),
            timeout=TTL + LOCK_DELAY + 10,
            message=f"the standby never took over:\n{standby.output()}",
        )
        delay = took_over[0][0] - killed_at
        assert delay <= TTL + LOCK_DELAY + 2.0, f"takeover took {delay:.1f}s"
        assert Fence.objects.get(id=1).term > first_term
        new_term = int(re.search(r"term=(\d+)", took_over[0][1]).group(1))
        assert new_term == Fence.objects.get(id=1).term
    finally:
        for beat in beats:
            beat.kill()


def test_no_job_is_created_twice_or_lost_while_leaders_are_killed(user, tmp_path):
    """500 jobs flow while the leading dispatcher process is SIGKILLed every second."""
    config = {
        "nodes": [{"prefix": "node", "count": 4, "capacity": {"cpu": "32", "memory": "128Gi", "pods": "250"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "60"}}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 0.05},
        "speed": 1.0,
    }
    jobs = 500
    with running_kubesim(config) as sim:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "JOBDASH_LEADER": "postgres",
            "KUBECONFIG": sim.kubeconfig_path,
            "JOBDASH_CLUSTER": "kubeconfig",
            "JOBDASH_TICK_SECONDS": "0.2",
            "JOBDASH_BACKOFF_SECONDS": "0.2",
            "JOBDASH_LEADER_TTL_SECONDS": "2",
            "CELERY_BROKER_URL": "",
        }
        command = [sys.executable, "manage.py", "run_dispatcher"]
        dispatchers = [Process(command, env), Process(command, env)]
        for i in range(jobs):
            services.job_submit(user=user, manifest=manifest(f"job-{i}", cpu="1", duration=1), source="api")
        kills, deadline = 0, time.monotonic() + 150
        try:
            while Job.objects.filter(state__in=(State.QUEUED, State.RELEASED, State.RUNNING)).exists():
                assert time.monotonic() < deadline, "jobs did not finish: " + str(
                    dict(Job.objects.values_list("state").annotate(n=__import__("django").db.models.Count("id")))
                )
                time.sleep(1.0)
                holder = Fence.objects.filter(id=1).values_list("holder", flat=True).first() or ""
                pid = int(holder.rsplit(":", 1)[1]) if ":" in holder else None
                victim = next((d for d in dispatchers if d.popen.pid == pid and d.popen.poll() is None), None)
                if victim is not None and kills < 8:
                    victim.kill()
                    kills += 1
                    dispatchers.remove(victim)
                    dispatchers.append(Process(command, env))
        finally:
            for d in dispatchers:
                d.kill()
        created = [a for a in sim.cluster.audit if a["code"] == 201 and not a["dry_run"]]
        names = [a["name"] for a in created]
    print(f"killed {kills} leaders")
    assert kills >= 3, "the loop killed too few leaders to mean anything"
    assert len(names) == len(set(names)), "a TFJob was created twice"
    assert Job.objects.filter(state=State.SUCCEEDED).count() == jobs, "a job was lost"
    assert set(names) == {f"job-{i}" for i in range(jobs)}


def test_every_job_succeeds_exactly_once_on_a_faulty_cluster(user):
    """10% of API requests fail with 500 or 429 and watches are cut every half second."""
    config = {
        "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "20"}}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 0.05},
    }
    jobs = 100
    with running_kubesim(config) as sim:
        gateway = start_gateway(sim)
        # The first creates always fail, so a release is certainly retried; the random
        # faults then hit whatever the run happens to send.
        first_creates = sim.cluster.faults.add(verbs=["create"], resources=["tfjobs"], status=500, times=5)
        sim.cluster.faults.add(verbs=["*"], resources=["*"], status=500, error_rate=0.05)
        sim.cluster.faults.add(verbs=["*"], resources=["*"], status=429, error_rate=0.05)
        loop = DispatcherLoop(Dispatcher(gateway, settings(backoff_s=0.2)), tick_seconds=0.2)
        stop = threading.Event()

        def cut_watches():
            while not stop.wait(0.5):
                sim.cluster.drop_watches(abrupt=True)

        cutter = threading.Thread(target=cut_watches, daemon=True)
        for i in range(jobs):
            services.job_submit(user=user, manifest=manifest(f"job-{i}", cpu="1", duration=1), source="api")
        loop.start()
        cutter.start()
        try:
            eventually(
                lambda: Job.objects.filter(state=State.SUCCEEDED).count() == jobs,
                timeout=120,
                message="not every job succeeded",
            )
        finally:
            stop.set()
            loop.stop()
            gateway.stop()
        created = [a["name"] for a in sim.cluster.audit if a["code"] == 201 and not a["dry_run"]]
        injected = sum(rule.injected for rule in sim.cluster.faults.rules)
    assert sorted(created) == sorted(f"job-{i}" for i in range(jobs)), "a TFJob was created twice or never"
    assert first_creates.injected == 5, "the release path never met a failing create"
    assert injected > 10, f"only {injected} faults were injected: the test proved little"
