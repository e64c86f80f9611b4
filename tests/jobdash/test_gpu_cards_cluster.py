"""GPU sharing by memory, the cluster's side (issue 34): the device plugins' node and pod
annotations read into cards, what is on each card for the snapshot, and the annotations
that pin a pod to its card."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobdash.cluster import convert, devices
from jobdash.cluster.gateway import PodInfo
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.phases.card_usage import shared_cards
from jobdash.jobs.models import State
from queueing import PodSet, Workload
from queueing.devices import MODELS, DeviceModel

CARD = 16_276
V100 = "NVIDIA-Tesla V100-PCIE-32GB"
REGISTER = (
    f"GPU-aaa,10,32768,100,{V100},0,true:GPU-bbb,10,32768,100,{V100},0,true:"
    f"GPU-bad,10,32768,100,{V100},0,false:GPU-ccc,10,16384,100,{V100},1,true,2,hami-core:"
)


def gpushare_node(name="n1", cards=2):
    return convert.node(
        {
            "metadata": {"name": name, "labels": {"gpushare": "true"}},
            "status": {
                "allocatable": {
                    "cpu": "32",
                    "aliyun.com/gpu-mem": str(CARD * cards),
                    "aliyun.com/gpu-count": str(cards),
                }
            },
        }
    )


def hami_node(name="h1"):
    return convert.node(
        {
            "metadata": {"name": name, "annotations": {devices.HAMI_REGISTER: REGISTER}},
            "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": "40"}},
        }
    )


def pod(name, node, requests, annotations=None, namespace="team-a", phase="Running", **extra):
    return convert.pod(
        {
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": requests, "limits": requests}}],
                **extra,
            },
            "status": {"phase": phase},
        }
    )


def test_a_gpushare_node_reports_its_cards_by_total_and_count():
    node = gpushare_node(cards=4)
    assert node.cards == devices.NodeCards("gpushare", (CARD,) * 4, ("0", "1", "2", "3"))
    plain = convert.node({"metadata": {"name": "w"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert plain.cards is None


def test_a_hami_node_registers_its_healthy_cards_and_their_totals_stand_in_for_allocatable():
    node = hami_node()
    assert node.cards == devices.NodeCards("hami", (32768, 32768, 16384), ("GPU-aaa", "GPU-bbb", "GPU-ccc"))
    assert node.allocatable["nvidia.com/gpumem"] == 32768 * 2 + 16384  # the unhealthy card left out
    assert node.allocatable["nvidia.com/gpucores"] == 300
    assert node.allocatable["nvidia.com/gpu"] == 40


def test_a_pod_names_its_cards_as_its_device_plugin_wrote_them():
    assert pod("p", "n1", {"aliyun.com/gpu-mem": "4069"}, {devices.GPUSHARE_IDX: "1"}).cards == ("1",)
    hami = {devices.HAMI_ALLOCATED: "GPU-aaa,NVIDIA,8000,30:GPU-ccc,NVIDIA,8000,30:;"}
    assert pod("p", "h1", {"nvidia.com/gpu": "2"}, hami).cards == ("GPU-aaa", "GPU-ccc")
    assert pod("p", "n1", {"cpu": "1"}).cards == ()


def test_pin_annotations_are_what_the_extender_writes():
    node = gpushare_node(cards=4)
    notes = devices.pin_annotations(node.cards, (1,), 8138, "n1", 1_700_000_000.5)
    assert notes == {
        "ALIYUN_COM_GPU_MEM_IDX": "1",
        "ALIYUN_COM_GPU_MEM_POD": "8138",
        "ALIYUN_COM_GPU_MEM_DEV": str(CARD),
        "ALIYUN_COM_GPU_MEM_ASSIGNED": "false",
        "ALIYUN_COM_GPU_MEM_ASSUME_TIME": "1700000000500000000",
    }
    hami = devices.pin_annotations(hami_node().cards, (0, 2), 4000, "h1", 1_700_000_000.0, cores=30)
    assert hami[devices.HAMI_TO_ALLOCATE] == "GPU-aaa,NVIDIA,4000,30:GPU-ccc,NVIDIA,4000,30:;"
    assert hami[devices.HAMI_NODE] == "h1"
    # ... and a pod pinned so is read back on the same cards
    assert pod("p", "h1", {"nvidia.com/gpu": "2"}, hami).cards == ("GPU-aaa", "GPU-ccc")


def _job(job_id, placement, cards, requests, state=State.RELEASED):
    workload = Workload(
        "Job", "batch/v1", f"j{job_id}", "team-a", (PodSet("Worker", len(placement), requests, requests),)
    )
    return ActiveJob(job_id, ("jobs.batch", "team-a", f"j{job_id}"), "Job", state, workload, placement, cards)


def test_what_is_on_each_card_counts_bound_pods_pinned_pods_and_planned_pods_with_no_pod_yet():
    nodes = [gpushare_node("n1"), gpushare_node("n2")]
    bound = pod("a", "n1", {"aliyun.com/gpu-mem": "4000"}, {devices.GPUSHARE_IDX: "1"})
    unnamed = pod("b", "n1", {"aliyun.com/gpu-mem": "3000"})  # bound by someone who wrote no card
    ended = pod("c", "n1", {"aliyun.com/gpu-mem": "9000"}, {devices.GPUSHARE_IDX: "0"}, phase="Succeeded")
    # pinned by jobdash, not bound yet: it names its node by selector and its card by annotation
    pinned = pod(
        "d",
        None,
        {"aliyun.com/gpu-mem": "2000"},
        {devices.GPUSHARE_IDX: "0"},
        nodeSelector={"kubernetes.io/hostname": "n2"},
    )
    requests = {"aliyun.com/gpu-mem": 5000}
    # a released job planned on n2 card 1 and n2 card 0; the pod for its slot 0 is the pinned one above
    job = _job(7, (("Worker", 0, "n2"), ("Worker", 1, "n2")), (("Worker", 0, (0,)), ("Worker", 1, (1,))), requests)
    job_pod = pod(
        "d",
        None,
        {"aliyun.com/gpu-mem": "5000"},
        {devices.GPUSHARE_IDX: "0"},
        nodeSelector={"kubernetes.io/hostname": "n2"},
    )
    found = shared_cards(nodes, [bound, unnamed, ended, pinned], [job], {job.key: [job_pod]})
    # the unnamed one where binpack puts it: beside the 4,000 on card 1, so card 0 stays whole
    assert found["n1"].used == (0, 7000)
    # n2: the pinned pod (2,000 on card 0) and the job's slot 1 that has no pod yet (5,000 on card 1);
    # its slot 0 is held by its pinned pod, which is not charged twice
    assert found["n2"].used == (2000, 5000)
    # a slot it lost (its node failed) is placed anew: not charged where it was
    lost = shared_cards(nodes, [], [job], {job.key: []}, lost={("Worker", 1, "n2")})
    assert lost["n2"].used == (5000, 0)


def test_a_hami_pod_without_memory_takes_whole_cards():
    node = hami_node()
    whole = pod("w", "h1", {"nvidia.com/gpu": "1"})
    shared = pod(
        "s",
        "h1",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"},
        {devices.HAMI_ALLOCATED: "GPU-bbb,NVIDIA,8000,0:;"},
    )
    found = shared_cards([node], [whole, shared], [], {})
    # the whole-card pod takes the biggest card's worth, on a card binpack finds empty
    assert sorted(found["h1"].used) == [0, 8000, 32768]
    assert found["h1"].used[1] == 8000


def test_a_site_adds_a_device_model_in_configuration_and_a_typo_stops_start_up():
    from jobdash.settings import _device_models

    rows = _device_models(
        '[{"name": "vcuda", "memory": "tencent.com/vcuda-memory", "node_count": "tencent.com/vcuda-count"}]'
    )
    model = DeviceModel.from_json(rows[0])
    assert model.protocol == "gpushare" and model.memory == "tencent.com/vcuda-memory"
    with pytest.raises(ImproperlyConfigured, match=r"JOBDASH_DEVICE_MODELS\[0\]: unknown field\(s\) \['memroy'\]"):
        _device_models('[{"name": "x", "memroy": "a"}]')
    with pytest.raises(ImproperlyConfigured, match="'protocol' must be one of"):
        _device_models('[{"name": "x", "memory": "a", "protocol": "mig"}]')
    with pytest.raises(ImproperlyConfigured, match="not JSON"):
        _device_models("[{")
    assert "vcuda" not in MODELS  # checking registers nothing: the dispatch app does, once


def test_derived_totals_are_in_a_jobs_quota_demand_and_in_no_model_that_does_not_multiply():
    hami = Workload(
        "Job", "batch/v1", "j", "team-a", (PodSet("Worker", 2, {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4000}, {}),)
    )
    assert hami.quota_demand()["requests.nvidia.com/total-gpumem"] == 16_000
    assert hami.quota_demand()["requests.nvidia.com/gpumem"] == 8_000  # as the API server counts it
    gpushare = Workload("Job", "batch/v1", "j", "team-a", (PodSet("Worker", 2, {"aliyun.com/gpu-mem": 4000}, {}),))
    assert gpushare.quota_demand()["requests.aliyun.com/gpu-mem"] == 8_000
    assert not any("total" in key for key in gpushare.quota_demand())


def test_a_pod_with_a_card_slot_holds_only_the_slot_of_its_card():
    from queueing.placement import JobPod, assign

    placement = (("worker", 0, "n1"), ("worker", 1, "n1"))
    cards = {("worker", 0): ("0",), ("worker", 1): ("1",)}
    # a running pod with no index that names card 0 holds slot 0, so the gated pod gets slot 1 (card 1)
    pods = [JobPod("run", "worker", None, node="n1", cards=("0",)), JobPod("new", "worker", None, gated=True)]
    assignment = assign(placement, pods, cards)
    assert assignment.nodes == {"new": "n1"} and assignment.indexes == {"new": 1}
    # without cards the running pod takes the lowest slot by count: the same here, by luck of order
    pods = [JobPod("run", "worker", None, node="n1", cards=("1",)), JobPod("new", "worker", None, gated=True)]
    assert assign(placement, pods, cards).indexes == {"new": 0}


def test_podinfo_defaults_name_no_cards():
    assert PodInfo("ns", "p", "Pending", None, {}, {}).cards == ()
