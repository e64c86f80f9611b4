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
from django.db import connection

from jobdash.jobs import services
from jobdash.jobs.models import Cycle, Fence, Job, JobEvent, Namespace
from kubesim.testing import running_kubesim

from .dispatch_support import JOBDASH, eventually, manifest
from .test_dispatch_failover import Process, database_url

# Real processes on leases a second long: one worker runs them all, one after another, so
# that they do not compete with each other for the CPU (nor share the Redis broker's queues).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("real-processes")]
TTL = 2.0
CONFIG = {
    "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}}],
    "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "20"}}],
    "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
    "kubelet": {"start_delay_seconds": 0.05},
}


def live_tfjobs(sim) -> set[str]:
    """Names of the TFJobs in team-a that are not being deleted."""
    from kubesim.resources import TFJOBS

    return {
        t["metadata"]["name"]
        for t in sim.cluster.store.items(TFJOBS)
        if t["metadata"].get("namespace") == "team-a" and not t["metadata"].get("deletionTimestamp")
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


@pytest.mark.parametrize("drop_connections", [False, True], ids=["connections-kept", "connections-dropped"])
@pytest.mark.parametrize("backend", ["postgres", "consul"])
def test_a_leader_paused_mid_release_creates_nothing_twice_when_it_wakes(
    webhook_listener, webhook_pki, request, backend, drop_connections
):
    """The scenario of #12: the leader is paused after its claim with only some TFJobs
    created; a new leader re-sends the claimed jobs, the user cancels some and the new
    leader deletes their TFJobs; the old leader wakes with creates still to send. Its
    creates carry its old term and jobdash's webhook (on its own TLS listener, called with
    the API server's client certificate) refuses them:
    no name is created twice, the cancelled jobs' TFJobs stay deleted."""
    from tests.pki import with_webhook

    user = User.objects.create_user("ops")
    Namespace.objects.create(name="team-a").members.add(user)
    config = with_webhook(CONFIG, webhook_listener.url, webhook_pki)
    with running_kubesim(config) as sim:
        # Slow creates: the release of a batch takes seconds, so the pause lands inside it.
        sim.cluster.faults.add(verbs=["create"], resources=["tfjobs"], latency_ms=400)
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "JOBDASH_LEADER": backend,
            "JOBDASH_LEADER_TTL_SECONDS": str(TTL),
            "JOBDASH_LEADER_LOCK_DELAY_SECONDS": "0.2",
            "KUBECONFIG": sim.kubeconfig_path,
            "JOBDASH_CLUSTER": "kubeconfig",
            "JOBDASH_TICK_SECONDS": "0.2",
            "JOBDASH_RELEASE_CONCURRENCY": "1",
            "CELERY_BROKER_URL": "",
        }
        if backend == "consul":
            env["CONSUL_HTTP_ADDR"] = request.getfixturevalue("consul_server").address
        jobs = [
            services.job_submit(user=user, manifest=manifest(f"job-{i}", cpu="1", duration=60), source="api")
            for i in range(10)
        ]
        command = [sys.executable, "manage.py", "run_dispatcher"]
        # The first leader's database sessions are named, so they can be cut while it sleeps.
        dispatchers = [Process(command, {**env, "PGAPPNAME": "paused-leader"})]
        try:
            # Claimed (all Released) but only some created.
            eventually(lambda: Job.objects.filter(state="Released").count() == len(jobs), 30)
            eventually(lambda: len(live_tfjobs(sim)) >= 2, 30)
            old_term, pid = Fence.objects.get(id=1).term, leader_pid()
            old = dispatchers[0]
            assert old.popen.pid == pid
            old.popen.send_signal(signal.SIGSTOP)
            created_before_pause = len(live_tfjobs(sim))
            if drop_connections:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
                        ["paused-leader"],
                    )
                    assert cursor.fetchone()[0] >= 1
            assert created_before_pause < len(jobs), "the pause came too late to mean anything"
            dispatchers.append(Process(command, env))
            eventually(lambda: Fence.objects.get(id=1).term > old_term, 30)  # a new process, under load
            # The new leader re-sends the stranded claims; then the user cancels three jobs.
            eventually(lambda: len(live_tfjobs(sim)) == len(jobs), 30)
            cancelled = jobs[-3:]
            for job in cancelled:
                services.job_cancel(job_id=job.pk, user=user)
            names = {job.name for job in cancelled}
            eventually(lambda: not names & live_tfjobs(sim), 15)
            old.popen.send_signal(signal.SIGCONT)
            time.sleep(TTL + 3)
            alive = live_tfjobs(sim)
            created = [a["name"] for a in sim.cluster.audit if a["code"] == 201 and not a["dry_run"]]
            refused = [a for a in sim.cluster.audit if a["code"] == 403 and "StaleLeaderTerm" in a["outcome"]]
        finally:
            for d in dispatchers:
                d.popen.send_signal(signal.SIGCONT)
                d.kill()
    print(
        f"{backend}, {request.node.callspec.id}: {created_before_pause} created before the pause, "
        f"{len(refused)} stale creates refused after it"
    )
    assert len(created) == len(set(created)), "a TFJob was created twice"
    assert not names & alive, "a cancelled job's TFJob came back"
    assert alive == {job.name for job in jobs[:-3]}


def test_a_dispatcher_process_bounds_its_sessions_idle_in_a_transaction_by_the_ttl(settings):
    """What lets the successor in when the pause lands inside a fence-holding transaction:
    the paused session is aborted once idle for the TTL (bound_paused_transactions)."""
    import threading

    from django.db import connections
    from django.db.backends.signals import connection_created

    from jobdash.dispatch.writers import idle_bound

    settings.JOBDASH_LEADER_TTL_SECONDS = 3.0
    seen = []

    def in_a_new_thread():  # a new thread opens its own session, as the loop's does
        with connections["default"].cursor() as cursor:
            cursor.execute("SHOW idle_in_transaction_session_timeout")
            seen.append(cursor.fetchone()[0])
        connections.close_all()

    idle_bound.bound_paused_transactions()
    try:
        thread = threading.Thread(target=in_a_new_thread)
        thread.start()
        thread.join(10)
    finally:
        connection_created.disconnect(dispatch_uid="dispatcher-idle-in-transaction")
    assert seen == ["3s"]


def test_a_leader_paused_mid_release_without_a_webhook_sends_at_most_one_create_after_its_lease():
    """No webhook to refuse a deposed leader's writes: the leader stops them itself. Woken
    past its lease, it checks its lease by its own clock before each write, so at most the
    create it had on its way when it was paused reaches the API server."""
    user = User.objects.create_user("ops")
    Namespace.objects.create(name="team-a").members.add(user)
    with running_kubesim(CONFIG) as sim:
        sim.cluster.faults.add(verbs=["create"], resources=["tfjobs"], latency_ms=400)
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "JOBDASH_LEADER": "postgres",
            "JOBDASH_LEADER_TTL_SECONDS": str(TTL),
            "KUBECONFIG": sim.kubeconfig_path,
            "JOBDASH_CLUSTER": "kubeconfig",
            "JOBDASH_TICK_SECONDS": "0.2",
            "JOBDASH_RELEASE_CONCURRENCY": "1",
            "CELERY_BROKER_URL": "",
        }
        jobs = [
            services.job_submit(user=user, manifest=manifest(f"job-{i}", cpu="1", duration=60), source="api")
            for i in range(10)
        ]
        command = [sys.executable, "manage.py", "run_dispatcher"]
        dispatchers = [Process(command, env)]
        try:
            eventually(lambda: Job.objects.filter(state="Released").count() == len(jobs), 30)
            eventually(lambda: len(live_tfjobs(sim)) >= 2, 30)
            old_term = Fence.objects.get(id=1).term
            old = dispatchers[0]
            old.popen.send_signal(signal.SIGSTOP)
            assert len(live_tfjobs(sim)) < len(jobs), "the pause came too late to mean anything"
            dispatchers.append(Process(command, env))
            eventually(lambda: Fence.objects.get(id=1).term > old_term, 30)  # a new process, under load
            eventually(lambda: len(live_tfjobs(sim)) == len(jobs), 30)
            cancelled = jobs[-3:]
            for job in cancelled:
                services.job_cancel(job_id=job.pk, user=user)
            names = {job.name for job in cancelled}
            eventually(lambda: not names & live_tfjobs(sim), 15)
            woken_at = len(sim.cluster.audit)
            old.popen.send_signal(signal.SIGCONT)
            time.sleep(TTL + 3)
            late = [a for a in sim.cluster.audit[woken_at:] if a["kind"] == "TFJob" and not a["dry_run"]]
            # The new leader's sweep takes back what a late create might bring back.
            eventually(lambda: not names & live_tfjobs(sim), 15)
            alive = live_tfjobs(sim)
        finally:
            for d in dispatchers:
                d.popen.send_signal(signal.SIGCONT)
                d.kill()
    assert len(late) <= 1, late
    assert alive == {job.name for job in jobs[:-3]}
