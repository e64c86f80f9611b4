"""Elastic jobs, partly admitted (issue 35): an elastic PyTorchJob whose written replicas do not
fit is admitted with as many workers as fit, down to its minimum, and released through its
operator's own scaling path (its Worker replicas as admitted): PostgreSQL, the real gateway
and dispatcher, kubesim's training operator."""

import json

import pytest

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, State
from kubesim.testing import pytorchjob_manifest, running_kubesim

from .dispatch_support import JOBDASH, ManualClock, settings, start_gateway, step

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
    assert obj["spec"]["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 4}  # as written
    workers = [p for p in sim.cluster.pods("team-a") if not p["metadata"].get("deletionTimestamp")]
    assert len(workers) == 2 and all(p["status"]["phase"] == "Running" for p in workers)
    for _ in range(40):
        dispatcher.cycle(term)
        if Job.objects.get(pk=job.pk).state == State.SUCCEEDED:
            break
        step(dispatcher, sim, 5)
    assert Job.objects.get(pk=job.pk).state == State.SUCCEEDED
