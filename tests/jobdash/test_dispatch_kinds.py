"""Every kind end to end: submitted through the service, released by the real dispatcher
through the gateway, run by kubesim's controller of that kind, tracked to Succeeded; the
gang never partial; and two jobs that would deadlock on one quota (each takes 3 of 4
CPUs' worth of pods) both finish, one after the other."""

import json

import pytest
import yaml

from jobdash.dispatch.cycle import Dispatcher
from jobdash.embedded.rbac import deploy_objects
from jobdash.jobs import services
from jobdash.jobs.models import Job, State
from kubesim.testing import (
    batch_job_manifest,
    jaxjob_manifest,
    jobset_manifest,
    mpijob_manifest,
    paddlejob_manifest,
    pytorchjob_manifest,
    running_kubesim,
    tfjob_manifest,
    training_runtime_manifest,
    trainjob_manifest,
    xgboostjob_manifest,
)

from .dispatch_support import JOBDASH, eventually, pods_seen, settings, start_gateway

pytestmark = pytest.mark.django_db(transaction=True)
GANG = 3  # pods of 1 cpu each; the quota holds 4 cpu: one job at a time
COMMON = {"cpu": "1", "memory": "1Gi", "duration": 5}
# Each kind's builder, for a job of GANG pods of 1 cpu (a launcher or master counts).
KINDS = {
    "TFJob": lambda name: tfjob_manifest(name, "team-a", workers=GANG, **COMMON),
    "PyTorchJob": lambda name: pytorchjob_manifest(name, "team-a", workers=GANG - 1, **COMMON),
    "XGBoostJob": lambda name: xgboostjob_manifest(name, "team-a", workers=GANG - 1, **COMMON),
    "PaddleJob": lambda name: paddlejob_manifest(name, "team-a", workers=GANG, **COMMON),
    "JAXJob": lambda name: jaxjob_manifest(name, "team-a", workers=GANG, **COMMON),
    "MPIJob": lambda name: mpijob_manifest(
        name, "team-a", workers=GANG - 1, launcher_cpu="1", launcher_memory="1Gi", **COMMON
    ),
    "Job": lambda name: batch_job_manifest(name, "team-a", parallelism=GANG, completions=GANG, **COMMON),
    "JobSet": lambda name: jobset_manifest(name, "team-a", workers=GANG, **COMMON),
    "TrainJob": lambda name: trainjob_manifest(name, "team-a", num_nodes=GANG, **COMMON),
}


def test_every_registered_kind_is_covered_here():
    from queueing.capabilities import objects_are_pods
    from queueing.workload import BY_KEY

    # (jobs of pods are made by their users, through the webhook: tests/webhooks/test_webhook_pods_e2e.py)
    assert {adapter.kind for adapter in BY_KEY.values() if not objects_are_pods(adapter)} == set(KINDS)


@pytest.fixture
def sim():
    # RBAC on, jobdash holding deploy/base's ClusterRole only: what the dispatcher does to
    # each kind is what deploy grants
    config = {
        "rbac": True,
        "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "4"}}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
        "objects": [training_runtime_manifest("torch-distributed", cpu="1", memory="1Gi"), *deploy_objects()],
    }
    with running_kubesim(config, manual_clock=True) as sim:
        yield sim


@pytest.fixture
def gateway(sim, settings):
    # A TrainJob's demand is read from its runtime at submission, through KUBECONFIG.
    settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
    gateway = start_gateway(sim)
    yield gateway
    gateway.stop()


def submit(user, manifest: dict) -> Job:
    # JSON is YAML too, and has no anchors (the builders share dicts: a YAML dump would alias them)
    return services.job_submit(user=user, manifest=json.dumps(manifest), source="api")


def pods_of(sim, job: Job) -> list[dict]:
    """The job's pods in kubesim that hold quota: those of any workload whose labels name
    the job, not being deleted and not finished."""
    return [
        pod
        for pod in sim.cluster.pods("team-a")
        if job.name in (pod["metadata"].get("labels") or {}).values()
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def run(dispatcher, sim, gateway, jobs, *, steps=60, term=1, watch=None):
    """Cycles and virtual time until every job has finished; `watch` sees every step."""
    for _ in range(steps):
        dispatcher.cycle(term)
        if watch is not None:
            watch()
        if all(Job.objects.get(pk=j.pk).state in (State.SUCCEEDED, State.FAILED) for j in jobs):
            return
        sim.advance(1.0)
        # the watch cache sees every pod's phase (a cycle that saw no change plans nothing)
        eventually(lambda: pods_seen(sim, gateway, ("team-a",)), timeout=3, message="the watch cache never caught up")
    raise AssertionError({j.name: Job.objects.get(pk=j.pk).state for j in jobs})


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_job_of_each_kind_runs_queued_to_succeeded_with_its_whole_gang(user, sim, gateway, term, kind):
    job = submit(user, KINDS[kind](f"{kind.lower()}-a"))
    assert job.kind == kind and job.workload["pods"] == GANG
    dispatcher = Dispatcher(gateway, settings())
    seen = []

    def watch():
        state = Job.objects.get(pk=job.pk).state
        seen.append(state)
        if state == State.RUNNING:  # Running means every pod of the gang runs, as kubesim has it
            running = [p for p in pods_of(sim, job) if (p.get("status") or {}).get("phase") == "Running"]
            assert len(running) >= GANG, [p["metadata"]["name"] for p in pods_of(sim, job)]

    run(dispatcher, sim, gateway, [job], watch=watch)
    job.refresh_from_db()
    assert job.state == State.SUCCEEDED, job.message
    assert State.RUNNING in seen and job.object_uid
    assert list(job.events.values_list("type", flat=True)) == ["Submitted", "Released", "Running", "Succeeded"]


@pytest.mark.parametrize("kind", ["PyTorchJob", "Job", "JobSet", "MPIJob"])
def test_two_jobs_that_would_deadlock_on_one_quota_both_finish(user, sim, gateway, term, kind):
    first, second = submit(user, KINDS[kind](f"{kind.lower()}-1")), submit(user, KINDS[kind](f"{kind.lower()}-2"))
    dispatcher = Dispatcher(gateway, settings())

    def never_both():
        # jobdash releases one at a time: pods of both never hold the quota together
        assert not (pods_of(sim, first) and pods_of(sim, second)), "two partial gangs at once"

    run(dispatcher, sim, gateway, [first, second], steps=90, watch=never_both)
    assert {Job.objects.get(pk=j.pk).state for j in (first, second)} == {State.SUCCEEDED}


def test_a_trainjob_whose_runtime_does_not_exist_is_a_400_naming_it(user, gateway):
    from tests.jobdash.conftest import token_client

    api = token_client(user)
    body = json.dumps(trainjob_manifest("no-runtime", "team-a", runtime="torch-nightly", num_nodes=2))
    response = api.post("/api/v1/jobs/", data=body, content_type="application/yaml")
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["path"] == "spec.runtimeRef.name" and "torch-nightly" in error["message"]
    assert not Job.objects.exists()


def test_a_trainjob_is_a_503_while_the_cluster_cannot_be_asked_for_its_runtime(user, settings, tmp_path):
    from tests.jobdash.conftest import token_client

    dead = tmp_path / "kubeconfig"
    dead.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", str(dead)
    body = json.dumps(trainjob_manifest("later", "team-a", num_nodes=2))
    response = token_client(user).post("/api/v1/jobs/", data=body, content_type="application/yaml")
    assert response.status_code == 503 and response.json()["errors"][0]["path"] == "spec.runtimeRef.name"
    assert not Job.objects.exists()
