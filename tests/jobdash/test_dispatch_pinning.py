"""Placement that holds, end to end: PostgreSQL, the real gateway and dispatcher, kubesim's
scheduler with kube-scheduler's default LeastAllocated scoring. Every pod of every kind
runs on the node the planner chose, while pods that did not come through jobdash keep
arriving and take the emptiest nodes; a node that fails under a released gang is replaced
within a cycle; a required rack is kept, or the job says which level it waits for."""

import json
import threading
from collections import Counter

import pytest

from jobdash.cluster.gateway import Transient
from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, JobEvent, State
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
from queueing.placement import GATE
from queueing.topology import REQUIRED_ANNOTATION

from .dispatch_support import JOBDASH, ManualClock, cycle_until, settings, start_gateway, state, step
from .test_dispatch_kinds import KINDS

pytestmark = pytest.mark.django_db(transaction=True)
RACK = "topology.jobdash.io/rack"
# Each kind's gang of two GPU pods (2 GPUs each; an MPIJob's launcher, CPU only, besides).
POD = {"cpu": "1", "memory": "1Gi", "gpu": 2, "duration": 5}
GPU_KINDS = {
    "TFJob": lambda name: tfjob_manifest(name, "team-a", workers=2, **POD),
    "PyTorchJob": lambda name: pytorchjob_manifest(name, "team-a", workers=1, **POD),
    "XGBoostJob": lambda name: xgboostjob_manifest(name, "team-a", workers=1, **POD),
    "PaddleJob": lambda name: paddlejob_manifest(name, "team-a", workers=2, **POD),
    "JAXJob": lambda name: jaxjob_manifest(name, "team-a", workers=2, **POD),
    "MPIJob": lambda name: mpijob_manifest(name, "team-a", workers=2, launcher_cpu="1", launcher_memory="1Gi", **POD),
    "Job": lambda name: batch_job_manifest(name, "team-a", parallelism=2, completions=2, **POD),
    "JobSet": lambda name: jobset_manifest(name, "team-a", workers=2, **POD),
    "TrainJob": lambda name: trainjob_manifest(name, "team-a", num_nodes=2, **POD),
}
LEVELS = (RACK, "kubernetes.io/hostname")


def cluster(nodes_per_rack: int = 3, cpu: str = "4") -> dict:
    return {
        "nodes": [
            {
                "prefix": f"{rack}-node",
                "count": nodes_per_rack,
                "capacity": {"cpu": cpu, "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "110"},
                "labels": {RACK: rack},
            }
            for rack in ("r1", "r2")
        ],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "48"}}, {"name": "other"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
        "objects": [training_runtime_manifest("torch-distributed", cpu="1", memory="1Gi")],
    }


@pytest.fixture
def sim():
    with running_kubesim(cluster(), manual_clock=True) as sim:
        yield sim


@pytest.fixture
def gateway(sim, settings):
    settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path  # a TrainJob's runtime
    gateway = start_gateway(sim)
    yield gateway
    gateway.stop()


@pytest.fixture
def dispatcher(gateway):
    return Dispatcher(gateway, settings(topology_levels=LEVELS), clock=ManualClock())


def foreign_pod(sim, number: int) -> None:
    """A 1-GPU pod nobody asked jobdash about, in a namespace jobdash does not manage."""
    amounts = {"cpu": "1", "nvidia.com/gpu": "1"}
    sim.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"around-{number}", "namespace": "other"},
            "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": amounts, "limits": amounts}}]
            },
        }
    )


def job_pods(sim, job: Job) -> list[dict]:
    return [
        pod
        for pod in sim.cluster.pods("team-a")
        if job.name in (pod["metadata"].get("labels") or {}).values()
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def whole_node(replica_spec: dict) -> None:
    """Its pods ask for all 4 CPUs of a node."""
    resources = replica_spec["template"]["spec"]["containers"][0]["resources"]
    for amounts in resources.values():
        amounts["cpu"] = "4"


def bound_as_planned(sim, job: Job) -> bool:
    """Every live pod of the job is bound, and to the nodes its placement names, as many on each."""
    placement = Job.objects.get(pk=job.pk).placement or []
    pods = job_pods(sim, job)
    bound = Counter(pod["spec"].get("nodeName") for pod in pods)
    return len(pods) == len(placement) and bound == Counter(node for _, _, node in placement)


def test_every_registered_kind_is_covered_here():
    assert set(GPU_KINDS) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(GPU_KINDS))
def test_every_pod_of_every_kind_runs_on_its_planned_node_among_pods_that_came_around(
    user, sim, dispatcher, term, kind
):
    for number in range(3):
        foreign_pod(sim, number)  # LeastAllocated spreads them: every node is a little used
    step(dispatcher, sim)
    job = services.job_submit(user=user, manifest=json.dumps(GPU_KINDS[kind](f"{kind.lower()}-p")), source="api")
    arriving = iter(range(3, 9))
    checked = False
    for _ in range(40):
        dispatcher.cycle(term)
        row = Job.objects.get(pk=job.pk)
        if row.state == State.RUNNING and not checked:
            assert bound_as_planned(sim, job), (row.placement, [p["spec"].get("nodeName") for p in job_pods(sim, job)])
            checked = True
        if row.state in (State.SUCCEEDED, State.FAILED):
            break
        number = next(arriving, None)
        if number is not None:
            foreign_pod(sim, number)  # while jobdash places, pods keep coming around it
        step(dispatcher, sim)
    row = Job.objects.get(pk=job.pk)
    assert checked and row.state == State.SUCCEEDED, (row.state, row.message)
    assert not JobEvent.objects.filter(job=job, type="Requeued").exists()  # no start timeout, never taken back
    # Every pod of the gang was created gated: none started where the scheduler alone would have put it.
    assert all(GATE not in [g["name"] for g in p["spec"].get("schedulingGates") or []] for p in job_pods(sim, job))


def test_a_node_that_fails_under_a_released_gang_is_replaced_within_a_cycle(user, sim, dispatcher, term):
    manifest = KINDS["TFJob"]("lost-node")
    replicas = manifest["spec"]["tfReplicaSpecs"]["Worker"]
    replicas["replicas"] = 2
    whole_node(replicas)
    job = services.job_submit(user=user, manifest=json.dumps(manifest), source="api")
    dispatcher.cycle(term)
    released = Job.objects.get(pk=job.pk)
    assert released.state == State.RELEASED
    first = {node for _, _, node in released.placement}
    failed = sorted(first)[0]
    sim.fail_node(failed)
    step(dispatcher, sim)  # the node is seen NotReady
    dispatcher.cycle(term)  # one cycle: a new plan
    replaced = Job.objects.get(pk=job.pk)
    assert failed not in {node for _, _, node in replaced.placement}, replaced.placement
    assert JobEvent.objects.filter(job=job, type="Replaced", message__contains=failed).exists()
    for _ in range(10):
        if Job.objects.get(pk=job.pk).state == State.RUNNING:
            break
        step(dispatcher, sim)
        dispatcher.cycle(term)
    assert Job.objects.get(pk=job.pk).state == State.RUNNING
    assert bound_as_planned(sim, job)


def test_a_required_rack_is_kept_or_the_job_says_which_level_it_waits_for(user, sim, dispatcher, term):
    def rack_job(name: str, workers: int) -> Job:
        manifest = KINDS["TFJob"](name)
        manifest["metadata"].setdefault("annotations", {})[REQUIRED_ANNOTATION] = RACK
        spec = manifest["spec"]["tfReplicaSpecs"]["Worker"]
        spec["replicas"] = workers
        whole_node(spec)
        return services.job_submit(user=user, manifest=json.dumps(manifest), source="api")

    fits = rack_job("in-one-rack", 3)
    too_big = rack_job("no-rack-holds-it", 4)
    dispatcher.cycle(term)
    placed = Job.objects.get(pk=fits.pk)
    assert placed.state == State.RELEASED
    assert len({node.partition("-")[0] for _, _, node in placed.placement}) == 1  # r1-node-* or r2-node-*
    waiting = Job.objects.get(pk=too_big.pk)
    assert waiting.state == State.QUEUED and waiting.reason == "NoDomainFits"
    assert waiting.message.startswith("no rack has room for all 4 pods (4 cpu each) at once; the roomiest has room for")


def test_a_running_gang_that_loses_a_node_runs_on_inside_a_new_plan(user, sim, dispatcher, term):
    """Its controller makes the lost pod again (gated, from the template), and jobdash sends it
    to the node the new plan names: the job goes on, never queued again."""
    manifest = KINDS["TFJob"]("runs-on")
    replicas = manifest["spec"]["tfReplicaSpecs"]["Worker"]
    replicas["replicas"] = 2
    whole_node(replicas)
    manifest["metadata"]["annotations"]["kubesim.io/duration-seconds"] = "60"
    job = services.job_submit(user=user, manifest=json.dumps(manifest), source="api")
    for _ in range(10):
        dispatcher.cycle(term)
        if Job.objects.get(pk=job.pk).state == State.RUNNING:
            break
        step(dispatcher, sim)
    running = Job.objects.get(pk=job.pk)
    assert running.state == State.RUNNING and bound_as_planned(sim, job)
    failed = sorted({node for _, _, node in running.placement})[0]
    sim.fail_node(failed)
    for _ in range(3):  # (the watch brings the node's failure within a step; under load, a few)
        step(dispatcher, sim)
        dispatcher.cycle(term)
        moved = Job.objects.get(pk=job.pk)
        if failed not in {node for _, _, node in moved.placement}:
            break
    assert moved.state == State.RUNNING and failed not in {node for _, _, node in moved.placement}
    for _ in range(10):
        step(dispatcher, sim)
        dispatcher.cycle(term)
        if bound_as_planned(sim, job):
            break
    assert bound_as_planned(sim, job)
    assert not JobEvent.objects.filter(job=job, type="Requeued").exists()


def test_a_batch_job_of_more_completions_than_parallelism_runs_every_wave_on_its_plan(user, sim, dispatcher, term):
    """Its gang is its parallelism: the pods of the second wave come gated after the first
    wave ended, and take the slots the ended pods left (held, they would wait for ever)."""
    manifest = batch_job_manifest("waves", "team-a", parallelism=2, completions=4, **POD)
    job = services.job_submit(user=user, manifest=json.dumps(manifest), source="api")
    waves_bound = 0
    for _ in range(40):
        dispatcher.cycle(term)
        row = Job.objects.get(pk=job.pk)
        if row.state == State.RUNNING and bound_as_planned(sim, job):
            waves_bound += 1
        if row.state in (State.SUCCEEDED, State.FAILED):
            break
        step(dispatcher, sim)
    row = Job.objects.get(pk=job.pk)
    assert row.state == State.SUCCEEDED, (row.state, row.message)
    made = [p for p in sim.cluster.pods("team-a") if "waves" in (p["metadata"].get("labels") or {}).values()]
    assert len(made) == 4 and all(p["status"]["phase"] == "Succeeded" for p in made)
    assert waves_bound >= 2  # each wave was seen running on the planned nodes


def gated_pods(sim, job: Job) -> int:
    return sum(GATE in [g["name"] for g in p["spec"].get("schedulingGates") or []] for p in job_pods(sim, job))


def two_worker_job(user, name: str) -> Job:
    manifest = KINDS["TFJob"](name)
    replicas = manifest["spec"]["tfReplicaSpecs"]["Worker"]
    replicas["replicas"] = 2
    whole_node(replicas)
    return services.job_submit(user=user, manifest=json.dumps(manifest), source="api")


def test_a_pin_in_flight_holds_up_no_cycle_and_is_neither_sent_again_nor_its_slot_given_away(
    user, sim, dispatcher, gateway, term, monkeypatch
):
    """An API server slow to answer: the cycle does not wait for the patches, and the
    cycles meanwhile take the pods as on their way to their nodes."""
    answer, sent = threading.Event(), []
    ungate = gateway.ungate_pod

    def slow(pod, gate, node, annotations=None):
        sent.append((pod.name, node))
        assert answer.wait(30)
        ungate(pod, gate, node, annotations)

    monkeypatch.setattr(gateway, "ungate_pod", slow)
    job = two_worker_job(user, "in-flight")
    dispatcher.cycle(term)
    step(dispatcher, sim)  # its controller made its pods, gated
    assert dispatcher.cycle(term).pinned["ungated"] == 2  # sent, not answered
    for _ in range(3):
        step(dispatcher, sim)
        assert dispatcher.cycle(term).pinned.get("ungated", 0) == 0
    assert len(sent) == 2 and gated_pods(sim, job) == 2
    assert sorted(node for _, node in sent) == sorted(node for _, _, node in Job.objects.get(pk=job.pk).placement)
    answer.set()
    dispatcher.pins.wait(10)
    step(dispatcher, sim)
    cycle_until(dispatcher, sim, term, lambda: state(job) == State.RUNNING, steps=10)
    assert bound_as_planned(sim, job)
    assert len(sent) == 2 and len(dispatcher.pins) == 0


def test_a_pin_the_api_server_refused_is_sent_again_by_the_next_cycle(
    user, sim, dispatcher, gateway, term, monkeypatch
):
    refused: set[str] = set()
    ungate = gateway.ungate_pod

    def refuse_once(pod, gate, node, annotations=None):
        if pod.name not in refused:
            refused.add(pod.name)
            raise Transient("the API server is restarting")
        ungate(pod, gate, node, annotations)

    monkeypatch.setattr(gateway, "ungate_pod", refuse_once)
    job = two_worker_job(user, "refused")
    dispatcher.cycle(term)
    step(dispatcher, sim)
    assert dispatcher.cycle(term).pinned["ungated"] == 2
    dispatcher.pins.wait(10)
    again = dispatcher.cycle(term).pinned
    assert again["errors"] == 2 and again["ungated"] == 2
    step(dispatcher, sim)
    cycle_until(dispatcher, sim, term, lambda: state(job) == State.RUNNING, steps=10)
    assert bound_as_planned(sim, job)


def test_a_gang_on_one_node_goes_there_by_its_template_with_no_gate_and_no_patch(
    user, sim, dispatcher, gateway, term, monkeypatch
):
    """Kueue's baseline's shape (one-pod jobs): no patch per pod, the template names the node."""
    patched = []
    ungate = gateway.ungate_pod
    monkeypatch.setattr(gateway, "ungate_pod", lambda pod, *args: patched.append(pod.name) or ungate(pod, *args))
    manifest = KINDS["TFJob"]("one-node")
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 1
    job = services.job_submit(user=user, manifest=json.dumps(manifest), source="api")
    gated: list[int] = []
    cycle_until(dispatcher, sim, term, lambda: gated.append(gated_pods(sim, job)) or state(job) == State.RUNNING)
    assert max(gated) == 0 and bound_as_planned(sim, job)
    row = Job.objects.get(pk=job.pk)
    (node,) = {node for _, _, node in row.placement}
    template = sim.cluster.tfjob("team-a", "one-node")["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert template["nodeSelector"] == {"kubernetes.io/hostname": node} and "schedulingGates" not in template
    assert patched == []
