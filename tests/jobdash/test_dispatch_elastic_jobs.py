"""Elastic jobs, partly admitted (issue 35): an elastic PyTorchJob whose written replicas do not
fit is admitted with as many workers as fit, down to its minimum, and released through its
operator's own scaling path (its Worker replicas as admitted): PostgreSQL, the real gateway
and dispatcher, kubesim's training operator."""

import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, State
from jobdash.usage.selectors import usage
from jobdash.usage.services import fold_all
from kubesim.testing import batch_job_manifest, pytorchjob_manifest, running_kubesim

from .conftest import token_client
from .dispatch_support import JOBDASH, ManualClock, cycle_until, settings, start_gateway, step

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sim():
    config = {
        "nodes": [{"prefix": "node", "count": 1, "capacity": {"cpu": "5", "memory": "32Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "64"}}, {"name": "other"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
    }
    with running_kubesim(config, manual_clock=True) as sim:
        yield sim


@pytest.fixture
def dispatcher(sim):
    gateway = start_gateway(sim)
    yield Dispatcher(gateway, settings(), clock=ManualClock())
    gateway.stop()


def client_for(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def test_an_elastic_job_that_does_not_fit_whole_runs_with_the_workers_that_fit(user, sim, dispatcher, term):
    manifest = pytorchjob_manifest(
        "elastic", "team-a", workers=4, master=False, cpu="2", memory="1Gi", duration=30,
        elastic={"minReplicas": 1, "maxReplicas": 4},
    )  # fmt: skip
    job = services.job_submit(user=user, manifest=json.dumps(manifest), source="api")
    for _ in range(20):
        dispatcher.cycle(term)
        if Job.objects.get(pk=job.pk).state == State.RUNNING:
            break
        step(dispatcher, sim)
    row = Job.objects.get(pk=job.pk)
    assert row.state == State.RUNNING, (row.state, row.message)
    # 5 CPUs hold two 2-CPU workers: admitted with 2 of its 4, its object scaled so
    assert row.scale == {"Worker": 2} and len(row.placement) == 2
    obj = sim.cluster.job("pytorchjobs", "team-a", "elastic")
    assert obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    # the API and the job page show its range and what it runs
    shown = token_client(user).get(f"/api/v1/jobs/{job.pk}/").json()
    assert shown["elastic"] == {"Worker": {"minimum": 1, "maximum": 4, "current": 2}}
    page = client_for(user).get(f"/jobs/{job.pk}/")
    assert "(elastic 1–4, runs 2)" in page.content.decode()
    assert obj["spec"]["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 4}  # as written
    workers = [p for p in sim.cluster.pods("team-a") if not p["metadata"].get("deletionTimestamp")]
    assert len(workers) == 2 and all(p["status"]["phase"] == "Running" for p in workers)
    for _ in range(40):
        dispatcher.cycle(term)
        if Job.objects.get(pk=job.pk).state == State.SUCCEEDED:
            break
        step(dispatcher, sim, 5)
    assert Job.objects.get(pk=job.pk).state == State.SUCCEEDED


def running_workers(sim, name: str) -> int:
    return sum(
        1
        for pod in sim.cluster.pods("team-a")
        if pod["metadata"]["name"].startswith(f"{name}-worker-")
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") == "Running"
    )


def test_an_elastic_job_grows_into_free_capacity_and_shrinks_before_anything_is_stopped(user, term):
    config = {
        "nodes": [{"prefix": "node", "count": 1, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "64"}}, {"name": "other"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
    }
    with running_kubesim(config, manual_clock=True) as sim:
        gateway = start_gateway(sim)
        try:
            dispatcher = Dispatcher(
                gateway, settings(preempt_within_namespace=True, preemption_grace_s=10.0), clock=ManualClock()
            )
            blocker = services.job_submit(
                user=user,
                manifest=json.dumps(batch_job_manifest("blocker", "team-a", cpu="4", duration=20)),
                source="api",
            )
            cycle_until(dispatcher, sim, term, lambda: Job.objects.get(pk=blocker.pk).state == State.RUNNING)
            elastic = services.job_submit(
                user=user,
                manifest=json.dumps(
                    pytorchjob_manifest(
                        "grower",
                        "team-a",
                        workers=4,
                        master=False,
                        cpu="2",
                        memory="1Gi",
                        duration=100000,
                        elastic={"minReplicas": 1, "maxReplicas": 4},
                    )  # fmt: skip
                ),
                source="api",
            )
            cycle_until(dispatcher, sim, term, lambda: running_workers(sim, "grower") == 2)
            assert Job.objects.get(pk=elastic.pk).scale == {"Worker": 2}
            # the blocker ends: the elastic job grows into what nothing waiting can use
            cycle_until(dispatcher, sim, term, lambda: running_workers(sim, "grower") == 4, seconds=5)
            grown = Job.objects.get(pk=elastic.pk)
            assert grown.scale == {"Worker": 4} and len(grown.placement) == 4
            assert grown.events.filter(type="Resized").exists()
            # an urgent job of its namespace: the elastic job gives back two workers, and runs on
            urgent = services.job_submit(
                user=user,
                manifest=json.dumps(batch_job_manifest("urgent", "team-a", cpu="4", duration=20)),
                source="api",
            )
            Job.objects.filter(pk=urgent.pk).update(priority=1000)
            cycle_until(dispatcher, sim, term, lambda: Job.objects.get(pk=urgent.pk).state == State.RUNNING, seconds=5)
            shrunk = Job.objects.get(pk=elastic.pk)
            assert shrunk.state == State.RUNNING and shrunk.scale == {"Worker": 2}
            assert list(shrunk.events.filter(type__in=("Shrinking", "Shrunk")).values_list("type", flat=True)) == [
                "Shrinking",
                "Shrunk",
            ]
            assert not shrunk.events.filter(type="Preempted").exists()
            obj = sim.cluster.job("pytorchjobs", "team-a", "grower")
            assert obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
        finally:
            gateway.stop()
    # Usage bills each stretch at its size: 2 workers (2 CPUs each), then 4, then 2 again.
    at = dict(shrunk.events.filter(type__in=("Running", "Resized", "Shrunk")).values_list("type", "created_at"))
    now = timezone.now() + timedelta(hours=1)
    stretches = [(2, at["Running"], at["Resized"]), (4, at["Resized"], at["Shrunk"]), (2, at["Shrunk"], now)]
    want = sum(2 * workers * (end - start).total_seconds() for workers, start, end in stretches) / 3600
    fold_all(settle_s=0, now=now)
    [row] = [r for r in usage(None, None, ["kind"], None, now) if r["kind"] == "PyTorchJob"]
    assert row["cpu_hours"] == pytest.approx(want, rel=1e-6)


def gpu_hours(now) -> float:
    fold_all(settle_s=0, now=now)
    return sum(row["gpu_hours"] for row in usage(None, None, ["namespace"], None, now))


def test_usage_bills_an_elastic_job_for_the_workers_it_ran_and_it_keeps_its_last_size(user, term):
    """Admitted with 3 of its 6 Workers (2 GPUs each): billed 6 GPUs while it runs, not the
    12 written; once it has ended (cancelled by its owner here), the API still says it ran 3."""
    config = {
        "nodes": [{"prefix": "node", "count": 1, "capacity": {"cpu": "32", "memory": "64Gi", "nvidia.com/gpu": "6"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "64"}}, {"name": "other"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
    }
    with running_kubesim(config, manual_clock=True) as sim:
        gateway = start_gateway(sim)
        try:
            dispatcher = Dispatcher(gateway, settings(), clock=ManualClock())
            manifest = pytorchjob_manifest(
                "wide", "team-a", workers=6, master=False, cpu="1", memory="1Gi", gpu=2, duration=100000,
                elastic={"minReplicas": 1, "maxReplicas": 6},
            )  # fmt: skip
            job = services.job_submit(user=user, manifest=json.dumps(manifest), source="api")
            cycle_until(dispatcher, sim, term, lambda: Job.objects.get(pk=job.pk).state == State.RUNNING)
            time.sleep(0.5)  # (the events' times are the wall clock's)
            services.job_cancel(job_id=job.pk, user=user)
        finally:
            gateway.stop()
    row = Job.objects.get(pk=job.pk)
    assert (row.state, row.scale) == (State.CANCELLED, {"Worker": 3})
    times = dict(row.events.filter(type__in=("Running", "Cancelled")).values_list("type", "created_at"))
    ran_s = (times["Cancelled"] - times["Running"]).total_seconds()
    assert ran_s > 0
    # (epoch seconds in floats: a few tenths of a microsecond apart)
    assert gpu_hours(timezone.now() + timedelta(hours=1)) == pytest.approx(6 * ran_s / 3600, rel=1e-6)
    shown = token_client(user).get(f"/api/v1/jobs/{job.pk}/").json()
    assert shown["elastic"] == {"Worker": {"minimum": 1, "maximum": 6, "current": 3}}
    assert "(elastic 1–6, ran 3)" in client_for(user).get(f"/jobs/{job.pk}/").content.decode()
