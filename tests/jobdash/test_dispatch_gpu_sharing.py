"""GPUs shared by memory, end to end (issue 34): PostgreSQL, the real gateway and dispatcher,
and kubesim playing gpushare's scheduler extender and device plugin and HAMi's. The seed's
two examples: the pod goes to the one node whose single card holds it (N3), and to the card
binpack picks (card 1); a pod no card holds waits with the card named; pods sharing one
node never over-commit a card; HAMi's vGPUs go to distinct cards and count in the derived
memory total of the namespace's quota."""

import json

import pytest

from jobdash.cluster import devices
from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, State
from kubesim.testing import batch_job_manifest, running_kubesim

from .dispatch_support import JOBDASH, ManualClock, settings, start_gateway, step

pytestmark = pytest.mark.django_db(transaction=True)
CARD = 16_276
MEM = "aliyun.com/gpu-mem"
V100 = "NVIDIA-Tesla V100-PCIE-32GB"
HAMI_REGISTER = "".join(f"GPU-{n},10,32768,100,{V100},0,true:" for n in ("a", "b", "c"))


def gpushare(name: str, cards: int = 2) -> dict:
    capacity = {
        "cpu": "16",
        "memory": "64Gi",
        "pods": "110",
        MEM: str(CARD * cards),
        "aliyun.com/gpu-count": str(cards),
    }
    return {"name": name, "capacity": capacity, "labels": {"gpushare": "true"}}


def hami(name: str) -> dict:
    return {
        "name": name,
        "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "30"},
        "labels": {"gpu": "on"},
        "annotations": {devices.HAMI_REGISTER: HAMI_REGISTER, "hami.io/node-handshake-nvidia": "Reported now"},
    }


def cluster(nodes: list[dict], quota: dict | None = None) -> dict:
    return {
        "nodes": nodes,
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "32", **(quota or {})}}, {"name": "other"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
    }


def occupy(sim, node: str, card: int, mebibytes: int, number: int) -> None:
    """A pod around jobdash that gpushare's extender put on `card` of `node` before."""
    amounts = {"cpu": "100m", MEM: str(mebibytes)}
    sim.cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"notebook-{number}",
                "namespace": "other",
                "annotations": {
                    devices.GPUSHARE_IDX: str(card),
                    devices.GPUSHARE_POD: str(mebibytes),
                    devices.GPUSHARE_ASSIGNED: "true",
                    "kubesim.io/duration-seconds": "100000",
                },
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "x", "resources": {"requests": amounts, "limits": amounts}}],
            },
        }
    )


def shared_job(name: str, resources: dict, pods: int = 1) -> str:
    manifest = batch_job_manifest(name, "team-a", parallelism=pods, completions=pods, cpu="1", duration=5)
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    for amounts in container["resources"].values():
        amounts.update({key: str(value) for key, value in resources.items()})
    return json.dumps(manifest)


@pytest.fixture
def make():
    opened = []

    def start(nodes, quota=None):
        context = running_kubesim(cluster(nodes, quota), manual_clock=True)
        sim = context.__enter__()
        opened.append(context)
        gateway = start_gateway(sim)
        opened.append(gateway)
        return sim, Dispatcher(gateway, settings_for_cycle(), clock=ManualClock())

    yield start
    for thing in reversed(opened):
        if hasattr(thing, "stop"):
            thing.stop()
        else:
            thing.__exit__(None, None, None)


def settings_for_cycle():
    return settings(topology_levels=("kubernetes.io/hostname",))


def job_pods(sim, job: Job) -> list[dict]:
    """Its pods not being deleted, ended ones too (the pinning test's job_pods without the ended)."""
    return [
        pod
        for pod in sim.cluster.pods("team-a")
        if job.name in (pod["metadata"].get("labels") or {}).values() and not pod["metadata"].get("deletionTimestamp")
    ]


def run(dispatcher, sim, term, jobs: list[Job], until, steps: int = 30) -> None:
    for _ in range(steps):
        dispatcher.cycle(term)
        if until():
            return
        step(dispatcher, sim)
    raise AssertionError([(j.name, Job.objects.get(pk=j.pk).state, Job.objects.get(pk=j.pk).message) for j in jobs])


def running_on(sim, job: Job) -> list[tuple[str, dict]]:
    return [
        (pod["spec"].get("nodeName"), pod["metadata"].get("annotations") or {})
        for pod in job_pods(sim, job)
        if (pod.get("status") or {}).get("phase") == "Running"
    ]


def test_seed_one_the_pod_goes_to_n3_the_one_node_with_a_card_that_holds_it(user, make, term):
    sim, dispatcher = make([gpushare("n1"), gpushare("n2"), gpushare("n3")])
    for number, (node, card, amount) in enumerate(
        [
            ("n1", 0, CARD),
            ("n1", 1, CARD - 4_069),
            ("n2", 0, CARD - 4_069),
            ("n2", 1, CARD - 4_069),
            ("n3", 0, CARD - 8_138),
            ("n3", 1, CARD),
        ]
    ):
        occupy(sim, node, card, amount, number)
    step(dispatcher, sim)
    job = services.job_submit(user=user, manifest=shared_job("eval-8138", {MEM: 8_138}), source="api")
    run(dispatcher, sim, term, [job], lambda: bool(running_on(sim, job)))
    [(node, notes)] = running_on(sim, job)
    assert node == "n3" and notes[devices.GPUSHARE_IDX] == "0"
    assert notes[devices.GPUSHARE_ASSIGNED] == "true"  # the device plugin handed it the card
    assert [entry[1:] for entry in Job.objects.get(pk=job.pk).cards] == [[0, [0]]]  # its slot 0 on card 0


def test_seed_two_binpack_takes_card_1_the_least_free_that_holds_the_pod(user, make, term):
    sim, dispatcher = make([gpushare("n1", cards=4)])
    for number, (card, amount) in enumerate([(0, CARD - 12_207), (1, CARD - 8_138), (2, CARD - 4_069)]):
        occupy(sim, "n1", card, amount, number)
    step(dispatcher, sim)
    job = services.job_submit(user=user, manifest=shared_job("eval-8000", {MEM: 8_000}), source="api")
    run(dispatcher, sim, term, [job], lambda: bool(running_on(sim, job)))
    [(node, notes)] = running_on(sim, job)
    assert (node, notes[devices.GPUSHARE_IDX]) == ("n1", "1")


def test_a_pod_no_card_holds_waits_with_the_card_named_though_the_node_has_the_memory(user, make, term):
    sim, dispatcher = make([gpushare("n2")])
    for number, card in enumerate((0, 1)):
        occupy(sim, "n2", card, CARD - 4_069, number)
    step(dispatcher, sim)
    job = services.job_submit(user=user, manifest=shared_job("big-eval", {MEM: 8_138}), source="api")
    for _ in range(3):
        dispatcher.cycle(term)
        step(dispatcher, sim)
    row = Job.objects.get(pk=job.pk)
    assert row.state == State.QUEUED
    assert "no single GPU has 8,138 MiB free: the most is 4,069 MiB on n2's GPU 0" in row.message
    assert job_pods(sim, job) == []  # nothing released that could not start on its card


def test_pods_of_many_jobs_on_one_node_never_over_commit_a_card(user, make, term):
    sim, dispatcher = make([gpushare("n1")])
    jobs = [
        services.job_submit(user=user, manifest=shared_job(f"nb-{n}", {MEM: 10_000}), source="api") for n in range(3)
    ]
    run(dispatcher, sim, term, jobs, lambda: sum(bool(running_on(sim, j)) for j in jobs) == 2)
    cards = sorted(running_on(sim, j)[0][1][devices.GPUSHARE_IDX] for j in jobs if running_on(sim, j))
    assert cards == ["0", "1"]  # one each: 10,000 + 10,000 would not fit one 16,276 card
    waiting = [j for j in jobs if Job.objects.get(pk=j.pk).state == State.QUEUED]
    assert len(waiting) == 1 and "no single GPU has 10,000 MiB free" in Job.objects.get(pk=waiting[0].pk).message
    # the two finish, and the third gets a card
    run(dispatcher, sim, term, jobs, lambda: Job.objects.get(pk=waiting[0].pk).state == State.SUCCEEDED)


def test_hami_vgpus_go_to_distinct_cards_and_count_in_the_derived_memory_total(user, make, term):
    sim, dispatcher = make([hami("h1")], quota={"requests.nvidia.com/total-gpumem": "20000"})
    first = services.job_submit(
        user=user, manifest=shared_job("two-vgpus", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 8_000}), source="api"
    )
    run(dispatcher, sim, term, [first], lambda: bool(running_on(sim, first)))
    [(node, notes)] = running_on(sim, first)
    cards = [device.split(",")[0] for device in notes[devices.HAMI_ALLOCATED].rstrip(";").split(":") if device]
    assert node == "h1" and len(set(cards)) == 2
    assert Job.objects.get(pk=first.pk).cards[0][2] == sorted(["abc".index(card[-1]) for card in cards])
    # 16,000 of the 20,000 MiB total taken: another 2 x 8,000 waits for quota, not for a card
    second = services.job_submit(
        user=user, manifest=shared_job("two-more", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 8_000}), source="api"
    )
    dispatcher.cycle(term)
    row = Job.objects.get(pk=second.pk)
    assert row.state == State.QUEUED and "total-gpumem" in row.message, row.message


def test_a_pod_asking_more_whole_gpus_than_any_node_has_never_fits_and_has_no_start_estimate(user, make, term):
    """The HAMi node counts 30 vGPUs on 3 cards: one pod gets at most 3 whole GPUs there,
    so the largest node for 16 whole GPUs is the 8-GPU one, and waiting will not help."""
    whole = {"name": "w1", "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}}
    sim, dispatcher = make([hami("h1"), whole], {"requests.nvidia.com/gpu": "32"})
    step(dispatcher, sim)
    job = services.job_submit(user=user, manifest=shared_job("huge", {"nvidia.com/gpu": 16}), source="api")
    for _ in range(3):
        dispatcher.cycle(term)
        step(dispatcher, sim)
    row = Job.objects.get(pk=job.pk)
    assert (row.state, row.reason) == (State.QUEUED, "NeverFitsNodes")
    assert "never fits any node: a main pod needs 16 nvidia.com/gpu, the largest node (w1) has 8" in row.message
    assert (row.eta, row.eta_late) == (None, None)
