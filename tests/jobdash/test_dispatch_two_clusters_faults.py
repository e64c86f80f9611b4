"""Leader loss with two clusters (issue 49), with real processes: run_dispatcher over
JOBDASH_CLUSTERS naming two kubesims, PostgreSQL, the leader SIGKILLed again and again or
SIGSTOPped in the middle of a release. No job is created twice, in one cluster or across
the two, and none is lost."""

import os
import signal
import sys
import time

import pytest
import yaml
from django.contrib.auth.models import User
from django.db.models import Count

from jobdash.jobs import services
from jobdash.jobs.models import Fence, Job, Namespace, State
from kubesim.testing import running_kubesim

from .dispatch_support import JOBDASH, eventually, manifest
from .test_dispatch_failover import Process, database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("real-processes")]
COMMAND = [sys.executable, "manage.py", "run_dispatcher"]


def cluster_config(prefix: str) -> dict:
    return {
        "nodes": [{"prefix": prefix, "count": 2, "capacity": {"cpu": "32", "memory": "128Gi", "pods": "250"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "30"}}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 0.05},
    }


def clusters_file(tmp_path, sims) -> str:
    path = tmp_path / "clusters.yaml"
    entries = [
        {"name": name, "kubeconfig": sim.kubeconfig_path} for name, sim in zip(("east", "west"), sims, strict=True)
    ]
    path.write_text(yaml.safe_dump({"clusters": entries}))
    return str(path)


def env_for(tmp_path, sims, **more) -> dict:
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "JOBDASH_LEADER": "postgres",
        "JOBDASH_CLUSTERS": clusters_file(tmp_path, sims),
        "JOBDASH_TICK_SECONDS": "0.2",
        "JOBDASH_BACKOFF_SECONDS": "0.2",
        "JOBDASH_LEADER_TTL_SECONDS": "2",
        "CELERY_BROKER_URL": "",
        **more,
    }


def created_names(sims) -> list[str]:
    return [a["name"] for sim in sims for a in sim.cluster.audit if a["code"] == 201 and not a["dry_run"]]


def leader_pid() -> int | None:
    holder = Fence.objects.filter(id=1).values_list("holder", flat=True).first() or ""
    return int(holder.rsplit(":", 1)[1]) if ":" in holder else None


@pytest.fixture
def user():
    user = User.objects.create_user("ops")
    Namespace.objects.create(name="team-a").members.add(user)
    return user


def test_no_job_is_created_twice_across_two_clusters_or_lost_while_leaders_are_killed(user, tmp_path):
    jobs = 200
    with running_kubesim(cluster_config("east-node")) as east, running_kubesim(cluster_config("west-node")) as west:
        sims = (east, west)
        env = env_for(tmp_path, sims)
        dispatchers = [Process(COMMAND, env), Process(COMMAND, env)]
        for i in range(jobs):
            services.job_submit(user=user, manifest=manifest(f"job-{i}", cpu="1", duration=1), source="api")
        kills, deadline = 0, time.monotonic() + 150
        try:
            while Job.objects.filter(state__in=(State.QUEUED, State.RELEASED, State.RUNNING)).exists():
                states = dict(Job.objects.values_list("state").annotate(n=Count("id")))
                assert time.monotonic() < deadline, f"jobs did not finish: {states}"
                time.sleep(1.0)
                pid = leader_pid()
                victim = next((d for d in dispatchers if d.popen.pid == pid and d.popen.poll() is None), None)
                if victim is not None and kills < 6:
                    victim.kill()
                    kills += 1
                    dispatchers.remove(victim)
                    dispatchers.append(Process(COMMAND, env))
        finally:
            for d in dispatchers:
                d.kill()
        names = created_names(sims)
        per_cluster = {
            name: sum(1 for a in sim.cluster.audit if a["code"] == 201)
            for name, sim in zip(("e", "w"), sims, strict=True)
        }
    print(f"killed {kills} leaders; created per cluster {per_cluster}")
    assert kills >= 3, "the loop killed too few leaders to mean anything"
    assert min(per_cluster.values()) > 0, "one cluster took every job: the test would not mean anything"
    assert len(names) == len(set(names)), "a TFJob was created twice (in one cluster or in both)"
    assert Job.objects.filter(state=State.SUCCEEDED).count() == jobs, "a job was lost"
    clusters = dict(Job.objects.values_list("cluster").annotate(n=Count("id")))
    assert set(clusters) == {"east", "west"}, clusters


def test_a_leader_paused_mid_release_to_two_clusters_creates_nothing_twice_when_it_wakes(
    user, tmp_path, webhook_listener, webhook_pki
):
    from tests.pki import with_webhook

    configs = [with_webhook(cluster_config(p), webhook_listener.url, webhook_pki) for p in ("east-node", "west-node")]
    with running_kubesim(configs[0]) as east, running_kubesim(configs[1]) as west:
        sims = (east, west)
        for sim in sims:  # slow creates: the pause lands inside a release
            sim.cluster.faults.add(verbs=["create"], resources=["tfjobs"], latency_ms=300)
        env = env_for(tmp_path, sims, JOBDASH_RELEASE_CONCURRENCY="1")
        jobs = [
            services.job_submit(user=user, manifest=manifest(f"job-{i}", cpu="6", duration=60), source="api")
            for i in range(10)
        ]
        dispatchers = [Process(COMMAND, env)]
        try:
            eventually(lambda: Job.objects.filter(state="Released").count() == len(jobs), 30)
            eventually(lambda: len(created_names(sims)) >= 2, 30)
            old_term = Fence.objects.get(id=1).term
            old = dispatchers[0]
            assert old.popen.pid == leader_pid()
            old.popen.send_signal(signal.SIGSTOP)
            assert len(created_names(sims)) < len(jobs), "the pause came too late to mean anything"
            dispatchers.append(Process(COMMAND, env))
            eventually(lambda: Fence.objects.get(id=1).term > old_term, 30)
            eventually(lambda: len(set(created_names(sims))) == len(jobs), 30)
            old.popen.send_signal(signal.SIGCONT)
            time.sleep(4)
            names = created_names(sims)
            refused = [
                a for sim in sims for a in sim.cluster.audit if a["code"] == 403 and "StaleLeaderTerm" in a["outcome"]
            ]
        finally:
            for d in dispatchers:
                d.popen.send_signal(signal.SIGCONT)
                d.kill()
    print(f"{len(refused)} stale creates refused after the pause")
    assert len(names) == len(set(names)), "a TFJob was created twice (in one cluster or in both)"
    assert sorted(names) == sorted(job.name for job in jobs)
    clusters = dict(Job.objects.values_list("cluster").annotate(n=Count("id")))
    assert clusters == {"east": 5, "west": 5}, clusters
