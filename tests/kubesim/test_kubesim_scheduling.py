"""kube-scheduler's filters and NodeResourcesFit scoring strategies in kubesim: the formulas
(checked against pkg/scheduler/framework/plugins/noderesources), the config's validation,
and pods placed through the official client."""

from __future__ import annotations

import pytest
from kubernetes import client

from kubesim.config import from_dict
from kubesim.nodefit import Scorer, filter_reason, node_affinity_matches, nonzero_requests
from kubesim.testing import running_kubesim
from tests.kubesim.conftest import BASE_CONFIG, JOBDASH

GI = 1024**3


def test_least_and_most_allocated_use_kube_schedulers_integer_arithmetic():
    alloc = {"cpu": 8000, "memory": 32 * GI}
    pod = {"cpu": 1000, "memory": 4 * GI}
    used = {"cpu": 2000, "memory": 8 * GI}
    # cpu (8000-3000)*100//8000 = 62, memory (32-12)*100//32 = 62 -> 62
    assert Scorer("LeastAllocated").score(pod, pod, used, used, alloc) == 62
    # cpu 3000*100//8000 = 37, memory 12*100//32 = 37
    assert Scorer("MostAllocated").score(pod, pod, used, used, alloc) == 37
    weighted = Scorer("MostAllocated", [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}])
    over = {"cpu": 9000, "memory": 8 * GI}  # over capacity: MostAllocated caps, LeastAllocated gives 0
    assert weighted.score(pod, pod, over, over, alloc) == (100 * 3 + 37) // 4
    assert Scorer("LeastAllocated").score(pod, pod, over, over, alloc) == (0 + 62) // 2


def test_requested_to_capacity_ratio_follows_its_shape_and_weights():
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    resources = [{"name": "cpu", "weight": 1}, {"name": "nvidia.com/gpu", "weight": 5}]
    scorer = Scorer("RequestedToCapacityRatio", resources, shape)
    alloc = {"cpu": 32000, "memory": 128 * GI, "nvidia.com/gpu": 8}
    pod = {"cpu": 4000, "nvidia.com/gpu": 2}
    nonzero = {"cpu": 4000, "memory": 200 * 1024 * 1024}
    used = {"cpu": 12000, "nvidia.com/gpu": 4}
    # cpu 16000*100//32000 = 50 -> 50; gpu 6*100//8 = 75 -> 75; round((50 + 75*5) / 6) = 71 (70.83)
    assert scorer.score(pod, nonzero, used, used, alloc) == 71
    # A pod without GPUs: the GPU is bypassed, only cpu counts.
    assert scorer.score({"cpu": 4000}, nonzero, used, used, alloc) == 50
    # A node without GPUs: likewise.
    assert scorer.score(pod, nonzero, used, used, {"cpu": 32000}) == 50
    # A falling shape (spread): utilization 0 scores 10 -> 100, 100 scores 0; zero scores do not count.
    falling = Scorer(
        "RequestedToCapacityRatio", None, [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
    )
    assert (
        falling.score(
            {"cpu": 1000}, {"cpu": 1000, "memory": 0}, {}, {"memory": 16 * GI}, {"cpu": 4000, "memory": 32 * GI}
        )
        == 63
    )
    # cpu 25% -> 75, memory 50% -> 50: round(62.5) = 63 (Go rounds halves away from zero)


def test_nonzero_requests_count_defaults_for_containers_that_request_nothing():
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}, {"name": "b"}]}
    assert nonzero_requests(spec) == {"cpu": 2100, "memory": 2 * 200 * 1024 * 1024}
    zero = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "0", "memory": "0"}}}]}
    assert nonzero_requests(zero) == {"cpu": 0, "memory": 0}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"scoring": "Spread"},
            "scheduler: scoring must be one of ['LeastAllocated', 'MostAllocated', 'RequestedToCapacityRatio'], got 'Spread'",
        ),
        (
            {"scoring": "RequestedToCapacityRatio"},
            "scheduler: shape: Required value: at least one point must be specified",
        ),
        (
            {
                "scoring": "RequestedToCapacityRatio",
                "shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}],
            },
            "scheduler: shape[1].utilization: Invalid value: 50: utilization values must be sorted in increasing order",
        ),
        (
            {"scoring": "RequestedToCapacityRatio", "shape": [{"utilization": 0, "score": 11}]},
            "scheduler: shape[0].score: Invalid value: 11: not in valid range [0, 10]",
        ),
        (
            {"resources": [{"name": "nvidia.com/gpu", "weight": 0}]},
            "scheduler: resources[0].weight: Invalid value: 0: resource weight of nvidia.com/gpu not in valid range (0, 100]",
        ),
        ({"shape": [{"utilization": 0, "score": 1}]}, "scheduler: shape is only for scoring RequestedToCapacityRatio"),
        ({"spread": True}, "scheduler: unknown keys ['spread']"),
    ],
)
def test_the_scheduler_config_is_validated(section, message):
    with pytest.raises(ValueError) as exc:
        from_dict({"scheduler": section})
    assert str(exc.value) == message


def node(name: str, labels: dict | None = None, **spec) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}, "spec": spec}


def required(*terms: dict) -> dict:
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }


def test_node_affinity_corner_cases_match_kube_scheduler():
    labels = {"zone": "a", "gen": "-3", "rank": "10"}
    assert node_affinity_matches(
        required({"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["0"]}]}), labels, "n"
    )
    assert not node_affinity_matches(
        required({"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["1"]}]}), labels, "n"
    )
    assert not node_affinity_matches(
        required({"matchExpressions": [{"key": "rank", "operator": "Gt", "values": ["1", "2"]}]}), labels, "n"
    )
    assert node_affinity_matches(
        required({"matchExpressions": [{"key": "missing", "operator": "NotIn", "values": ["x"]}]}), labels, "n"
    )
    # An empty term matches nothing, even beside nothing else.
    assert not node_affinity_matches(required({}), labels, "n")
    assert node_affinity_matches(
        required({}, {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}), labels, "n"
    )
    # Terms are ORed; a term ANDs its expressions and fields.
    both = {
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["m"]}],
    }
    assert not node_affinity_matches(required(both), labels, "n")
    assert node_affinity_matches(required(both), labels, "m")
    not_me = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n"]}]}
    assert not node_affinity_matches(required(not_me), labels, "n") and node_affinity_matches(
        required(not_me), labels, "o"
    )
    # nodeSelector and affinity must both hold.
    assert not node_affinity_matches({"nodeSelector": {"zone": "b"}, **required(both)}, labels, "m")


def test_filters_report_the_first_failing_plugin_and_honour_an_unschedulable_toleration():
    cordoned = node("c", unschedulable=True, taints=[{"key": "x", "value": "y", "effect": "NoSchedule"}])
    assert filter_reason({"nodeSelector": {"zone": "z"}}, cordoned) == "node(s) were unschedulable"
    tolerant = {
        "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"zone": "z"},
    }
    assert filter_reason(tolerant, cordoned) == "node(s) had untolerated taint {x: y}"
    tainted = node("t", taints=[{"key": "x", "value": "y", "effect": "PreferNoSchedule"}])
    assert (
        filter_reason({"nodeSelector": {"zone": "z"}}, tainted) == "node(s) didn't match Pod's node affinity/selector"
    )
    assert filter_reason({"tolerations": [{"operator": "Exists"}]}, cordoned) is None


CONFIG = {
    **BASE_CONFIG,
    "nodes": [
        {
            "prefix": "node",
            "count": 3,
            "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4", "pods": "110"},
        },
        {"name": "renamed", "capacity": {"cpu": "8", "memory": "32Gi"}, "labels": {"kubernetes.io/hostname": "host-x"}},
    ],
}


def gpu_pod(name: str, gpus: int, **spec) -> dict:
    resources = {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": resources}], **spec},
    }


def place(sim, core: client.CoreV1Api, name: str, gpus: int, **spec) -> str | None:
    core.create_namespaced_pod("team-b", gpu_pod(name, gpus, **spec))
    sim.settle()
    return core.read_namespaced_pod(name, "team-b").spec.node_name


def test_every_node_carries_its_hostname_label_unless_the_config_says_otherwise():
    with running_kubesim(CONFIG, manual_clock=True) as sim:
        core = client.CoreV1Api(sim.api_client(JOBDASH))
        labels = {n.metadata.name: n.metadata.labels["kubernetes.io/hostname"] for n in core.list_node().items}
        assert labels == {"node-0": "node-0", "node-1": "node-1", "node-2": "node-2", "renamed": "host-x"}


def test_most_allocated_by_gpu_packs_a_node_before_opening_another():
    config = {
        **CONFIG,
        "scheduler": {"scoring": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]},
    }
    with running_kubesim(config, manual_clock=True) as sim:
        core = client.CoreV1Api(sim.api_client(JOBDASH))
        nodes = [place(sim, core, f"p{i}", 1) for i in range(5)]
        assert nodes == ["node-0"] * 4 + ["node-1"]


def test_least_allocated_spreads_and_a_hostname_selector_pins():
    with running_kubesim(CONFIG, manual_clock=True) as sim:
        core = client.CoreV1Api(sim.api_client(JOBDASH))
        assert [place(sim, core, f"p{i}", 1) for i in range(3)] == ["node-0", "node-1", "node-2"]
        assert place(sim, core, "pinned", 1, nodeSelector={"kubernetes.io/hostname": "node-0"}) == "node-0"
        assert place(sim, core, "nowhere", 1, nodeSelector={"kubernetes.io/hostname": "renamed"}) is None
        pending = core.read_namespaced_pod("nowhere", "team-b").status.conditions[0]
        assert (pending.reason, pending.message) == (
            "Unschedulable",
            "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.",
        )


def test_requested_to_capacity_ratio_bin_packs_gpus():
    config = {
        **CONFIG,
        "scheduler": {
            "scoring": "RequestedToCapacityRatio",
            "resources": [{"name": "nvidia.com/gpu", "weight": 3}, {"name": "cpu", "weight": 1}],
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
        },
    }
    with running_kubesim(config, manual_clock=True) as sim:
        core = client.CoreV1Api(sim.api_client(JOBDASH))
        assert [place(sim, core, f"p{i}", 2) for i in range(3)] == ["node-0", "node-0", "node-1"]
