"""A paused leader (SIGSTOP: a GC pause, a frozen VM) with its connections still open,
with real run_dispatcher processes, PostgreSQL, kubesim over HTTP and the Consul test
server: the next leader's first cycle runs within TTL + 2 s (no lock the paused process
holds stops it), and the paused one, woken, writes nothing under its old term."""

import os
import signal
import sys
import time

import pytest
from django.contrib.auth.models import User

from jobdash.jobs import services
from jobdash.jobs.models import Cycle, Fence, Job, JobEvent, Namespace
from kubesim.testing import running_kubesim

from .dispatch_support import JOBDASH, eventually, manifest
from .test_dispatch_failover import Process, database_url

pytestmark = pytest.mark.django_db(transaction=True)
TTL = 2.0
CONFIG = {
    "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}}],
    "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "20"}}],
    "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
    "kubelet": {"start_delay_seconds": 0.05},
}


def leader_pid() -> int | None:
    holder = Fence.objects.filter(id=1).values_list("holder", flat=True).first() or ""
    return int(holder.rsplit(":", 1)[1]) if ":" in holder else None


def pause_the_leader_and_time_the_takeover(env: dict) -> None:
    user = User.objects.create_user("ops")
    Namespace.objects.create(name="team-a").members.add(user)
    command = [sys.executable, "manage.py", "run_dispatcher"]
    dispatchers = [Process(command, env), Process(command, env)]
    try:
        old_term = eventually(lambda: Cycle.objects.exclude(term=None).values_list("term", flat=True).last(), 30)
        pid = leader_pid()
        paused = next(d for d in dispatchers if d.popen.pid == pid)
        paused.popen.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        new_term = eventually(
            lambda: Cycle.objects.filter(term__gt=old_term).values_list("term", flat=True).first(), 15
        )
        took = time.monotonic() - stopped_at
        print(f"{env['JOBDASH_LEADER']}: the new leader's first cycle {took:.2f} s after the pause")
        assert took <= TTL + 2, f"the new leader's first cycle came {took:.1f} s after the pause"
        # The new leader works: a job submitted now is released under its term.
        job = services.job_submit(user=user, manifest=manifest("after-pause", cpu="1", duration=1), source="api")
        eventually(lambda: Job.objects.get(pk=job.pk).leader_term == new_term, 15)
        # The old leader wakes; by its own clock its lease has lapsed: it writes nothing.
        woken_at = time.time()
        paused.popen.send_signal(signal.SIGCONT)
        time.sleep(TTL + 1)
        assert not Cycle.objects.filter(term=old_term, started_at__gte=_aware(woken_at)).exists()
        assert not JobEvent.objects.filter(
            message__contains=f"leader term {old_term})", created_at__gte=_aware(woken_at)
        ).exists()
        assert Fence.objects.get(id=1).term == new_term and leader_pid() != pid
    finally:
        for d in dispatchers:
            d.popen.send_signal(signal.SIGCONT)
            d.kill()


def _aware(epoch: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, tz=UTC)


def test_a_paused_postgres_leader_is_replaced_within_ttl_plus_2_seconds():
    with running_kubesim(CONFIG) as sim:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "JOBDASH_LEADER": "postgres",
            "JOBDASH_LEADER_TTL_SECONDS": str(TTL),
            "KUBECONFIG": sim.kubeconfig_path,
            "JOBDASH_CLUSTER": "kubeconfig",
            "JOBDASH_TICK_SECONDS": "0.2",
            "CELERY_BROKER_URL": "",
        }
        pause_the_leader_and_time_the_takeover(env)


def test_a_paused_consul_leader_is_replaced_within_ttl_plus_2_seconds(consul_server):
    with running_kubesim(CONFIG) as sim:
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "JOBDASH_LEADER": "consul",
            "CONSUL_HTTP_ADDR": consul_server.address,
            "JOBDASH_LEADER_TTL_SECONDS": str(TTL),
            "JOBDASH_LEADER_LOCK_DELAY_SECONDS": "0.2",
            "KUBECONFIG": sim.kubeconfig_path,
            "JOBDASH_CLUSTER": "kubeconfig",
            "JOBDASH_TICK_SECONDS": "0.2",
            "CELERY_BROKER_URL": "",
        }
        pause_the_leader_and_time_the_takeover(env)
