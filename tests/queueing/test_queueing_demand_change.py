"""queueing.demand_change: random edits of every kind's example manifests; whether the job's
demand changed is computed here independently (the adapters' Workload, and the scheduling
fields of every pod spec found by walking the manifest), and compared with what
demand_change says."""

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import ManifestError, adapter_for, capabilities
from queueing.demand_change import demand_change
from queueing.placement import hold
from queueing.workload import JobAdapter
from tests.examples import examples
from tests.queueing.test_queueing_trainjob import runtimes as trainjob_runtimes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SETTINGS = settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
RUNTIMES = trainjob_runtimes()
COUNT_KEYS = ("replicas", "parallelism", "completions", "numNodes", "minReplicas", "maxReplicas")
READ = (
    "jobdash.io/required-topology",
    "jobdash.io/preferred-topology",
    "jobdash.io/slice-required-topology",
    "jobdash.io/slice-size",
    "jobdash.io/expected-duration",
)
METADATA_KEYS = ("team", "note", *READ, "jobdash.io/job-id", "jobdash.io/term", "jobdash.io/queued")
QUANTITIES = {"cpu": ("500m", "1", "2", "4"), "memory": ("1Gi", "4Gi", "8Gi"), "nvidia.com/gpu": ("1", "2")}
AFFINITIES = (
    None,
    {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
            }
        }
    },
    {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}}
            ]
        }
    },
    {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    },
)
TOLERATIONS = (None, [], [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])


def _base_manifests() -> list[dict]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        if document.get("kind") == "TrainJob":
            # A template of its own to edit: an override entry of the trainer's job.
            document["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "spec": {}}]
        found.append(document)
        if document.get("kind") == "PyTorchJob":
            elastic = copy.deepcopy(document)
            elastic["metadata"]["name"] = "pytorch-elastic"
            elastic["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 4}
            found.append(elastic)
    return found


BASES = _base_manifests()


def adapter_of(obj: dict) -> JobAdapter:
    adapter = adapter_for(obj["apiVersion"], obj["kind"])
    assert adapter is not None
    return adapter


def _walk(node: Any) -> Iterator[Any]:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)


def pod_specs(obj: dict) -> list[dict]:
    """Every pod spec in the manifest, found without the adapter: a mapping with containers,
    or the spec of a TrainJob's override entry."""
    specs = [node for node in _walk(obj) if isinstance(node, dict) and isinstance(node.get("containers"), list)]
    overrides = (obj.get("spec") or {}).get("podTemplateOverrides") or []
    return specs + [entry["spec"] for entry in overrides if isinstance(entry.get("spec"), dict)]


def templates(obj: dict) -> list[dict]:
    return [
        node
        for node in _walk(obj)
        if isinstance(node, dict) and isinstance(node.get("spec"), dict) and "containers" in node["spec"]
    ]


def containers(obj: dict) -> list[dict]:
    return [c for spec in pod_specs(obj) for key in ("containers", "initContainers") for c in spec.get(key) or []]


def resource_holders(obj: dict) -> list[dict]:
    holders = [c.setdefault("resources", {}) for c in containers(obj)]
    trainer = (obj.get("spec") or {}).get("trainer")
    if isinstance(trainer, dict):
        holders.append(trainer.setdefault("resourcesPerNode", {}))
    return holders


def count_fields(obj: dict) -> list[tuple[dict, str]]:
    return [
        (node, key) for node in _walk(obj) if isinstance(node, dict) for key in COUNT_KEYS if type(node.get(key)) is int
    ]


def _set(holder: dict, key: str, value: Any) -> None:
    if value is None:
        holder.pop(key, None)
    else:
        holder[key] = copy.deepcopy(value)


@st.composite
def edits(draw, obj: dict) -> tuple[dict, list[str]]:
    """`obj` with 1-4 random edits, and what they were (for the failure message)."""
    obj = copy.deepcopy(obj)
    done = []
    for _ in range(draw(st.integers(1, 4))):
        op = draw(
            st.sampled_from(
                ["count", "resources", "nodeSelector", "tolerations", "affinity", "priorityClassName", "metadata"]
                + ["template-metadata", "container", "suspend", "gate"]
            )
        )
        specs = pod_specs(obj)
        spec = draw(st.sampled_from(specs)) if specs else {}
        if op == "count" and count_fields(obj):
            holder, key = draw(st.sampled_from(count_fields(obj)))
            holder[key] = draw(st.integers(0, 6))
            done.append(f"{key}={holder[key]}")
        elif op == "resources":
            holder = draw(st.sampled_from(resource_holders(obj)))
            section = holder.setdefault(draw(st.sampled_from(["requests", "limits"])), {})
            resource = draw(st.sampled_from(sorted(QUANTITIES)))
            _set(section, resource, draw(st.sampled_from((None, *QUANTITIES[resource]))))
            done.append(f"resources {resource}={section.get(resource)}")
        elif op == "nodeSelector":
            selector = spec.setdefault("nodeSelector", {})
            _set(selector, draw(st.sampled_from(["disktype", "zone"])), draw(st.sampled_from([None, "ssd", "a"])))
            done.append(f"nodeSelector={selector}")
        elif op in ("tolerations", "affinity"):
            _set(spec, op, draw(st.sampled_from(TOLERATIONS if op == "tolerations" else AFFINITIES)))
            done.append(f"{op}={spec.get(op)}")
        elif op == "priorityClassName":
            _set(spec, op, draw(st.sampled_from([None, "high", "low"])))
            done.append(f"{op}={spec.get(op)}")
        elif op == "metadata":
            section = obj["metadata"].setdefault(draw(st.sampled_from(["labels", "annotations"])), {})
            key = draw(st.sampled_from(METADATA_KEYS))
            _set(section, key, draw(st.sampled_from([None, "a", "rack", "7", "1h"])))
            done.append(f"metadata {key}={section.get(key)}")
        elif op == "template-metadata" and templates(obj):
            template = draw(st.sampled_from(templates(obj)))
            template.setdefault("metadata", {}).setdefault("labels", {})["sidecar"] = draw(st.sampled_from("ab"))
            done.append("template-metadata")
        elif op == "container" and containers(obj):
            target = draw(st.sampled_from(containers(obj)))
            field = draw(st.sampled_from(["image", "env", "command", "args"]))
            value = {
                "image": "example.com/other:2",
                "env": [{"name": "LR", "value": draw(st.sampled_from(["0.1", "0.01"]))}],
                "command": ["python3", "other.py"],
                "args": ["--epochs=2"],
            }[field]
            target[field] = value
            done.append(f"container {field}")
        elif op == "suspend":
            path = capabilities.suspend_path(adapter_of(obj))
            if path is not None:
                holder = obj
                for step in path[:-1]:
                    holder = holder.setdefault(step, {})
                holder[path[-1]] = draw(st.booleans())
                done.append(f"suspend={holder[path[-1]]}")
        elif op == "gate":
            adapter = adapter_of(obj)
            try:
                workload = adapter.validate_and_build(obj, RUNTIMES)
            except ManifestError:
                continue
            obj = hold(adapter, obj, workload)
            done.append("gate")
    return obj, done


def _elastic(obj: dict) -> tuple | None:
    """An elastic PyTorchJob's (minimum, maximum, replicas), with the operator's defaults."""
    policy = (obj.get("spec") or {}).get("elasticPolicy")
    if obj.get("kind") != "PyTorchJob" or not isinstance(policy, dict):
        return None
    replicas = obj["spec"]["pytorchReplicaSpecs"]["Worker"].get("replicas", 1)
    low = policy.get("minReplicas", policy.get("maxReplicas", replicas))
    return low, policy.get("maxReplicas", low), replicas


def expected(old: dict, new: dict) -> bool:
    """Whether `new` asks the cluster for something other than `old`, found independently."""
    adapter = adapter_of(old)
    was = adapter.validate_and_build(old, RUNTIMES)
    try:
        now = adapter.validate_and_build(new, RUNTIMES)
    except ManifestError:
        return True  # no job jobdash can read any more
    if [p.to_json() for p in was.pod_sets] != [p.to_json() for p in now.pod_sets]:
        return True

    def scheduling(obj: dict) -> list:
        return [(spec.get("affinity"), spec.get("priorityClassName")) for spec in pod_specs(obj)]

    def read(obj: dict) -> list:
        annotations = obj["metadata"].get("annotations") or {}
        return [annotations.get(key) for key in READ]

    return scheduling(old) != scheduling(new) or _elastic(old) != _elastic(new) or read(old) != read(new)


@pytest.mark.parametrize("base", BASES, ids=lambda b: f"{b['kind']}-{b['metadata']['name']}")
@SETTINGS
@given(data=st.data())
def test_demand_change_says_what_an_independent_reading_says(base, data):
    new, done = data.draw(edits(base))
    found = demand_change(adapter_of(base), base, new, RUNTIMES)
    assert bool(found) == expected(base, new), (done, found)


@pytest.mark.parametrize("base", BASES, ids=lambda b: f"{b['kind']}-{b['metadata']['name']}")
def test_what_jobdash_puts_on_an_object_is_no_change(base):
    adapter = adapter_of(base)
    new = hold(adapter, base, adapter.validate_and_build(base, RUNTIMES))
    new["metadata"].setdefault("labels", {}).update({"jobdash.io/job-id": "12", "jobdash.io/queued": "true"})
    new["metadata"].setdefault("annotations", {})["jobdash.io/term"] = "3"
    new["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    assert not demand_change(adapter, base, new, RUNTIMES)


def _pytorch() -> dict:
    return copy.deepcopy(next(b for b in BASES if b["metadata"]["name"] == "pytorch-ddp"))


def test_more_workers_is_named_and_grows():
    old = _pytorch()
    new = copy.deepcopy(old)
    new["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 40
    found = demand_change(adapter_of(old), old, new)
    assert found.changes == ("Worker: 3 -> 40 pods",) and found.grew


def test_fewer_workers_and_a_smaller_request_do_not_grow():
    old = _pytorch()
    new = copy.deepcopy(old)
    new["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    new["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "4Gi"},
        "limits": {"cpu": "1", "memory": "4Gi"},
    }
    found = demand_change(adapter_of(old), old, new)
    assert "Worker: 3 -> 1 pod" in found.changes and "Master: requests cpu per pod 2 -> 1" in found.changes
    assert not found.grew
    # a node selector only: changed, not grown
    moved = copy.deepcopy(old)
    moved["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    found = demand_change(adapter_of(old), old, moved)
    assert found.changes == ("Worker: nodeSelector {} -> {'zone': 'a'}",) and not found.grew


def test_an_elastic_range_is_demand_though_its_gang_is_the_minimum():
    old = next(b for b in BASES if b["metadata"]["name"] == "pytorch-elastic")
    new = copy.deepcopy(old)
    new["spec"]["elasticPolicy"]["maxReplicas"] = 8
    found = demand_change(adapter_of(old), old, new)
    assert found.changes == ("Worker: elastic range 2-4 (3 replicas) -> 2-8 (3 replicas)",)


def test_an_edit_that_makes_the_job_invalid_is_a_change_naming_the_field():
    old = _pytorch()
    new = copy.deepcopy(old)
    new["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    found = demand_change(adapter_of(old), old, new)
    assert found and "spec.pytorchReplicaSpecs.Master.replicas" in str(found)


def test_a_trainjob_is_compared_through_its_runtime_read_only_when_it_changed():
    old = next(b for b in BASES if b["kind"] == "TrainJob")
    reads = trainjob_runtimes()
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert not demand_change(adapter_of(old), old, relabelled, reads) and reads.reads == []
    bigger = copy.deepcopy(old)
    bigger["spec"]["trainer"]["numNodes"] = 4
    assert demand_change(adapter_of(old), old, bigger, reads).changes == ("node: 2 -> 4 pods",)
    assert reads.reads  # the runtime was read to know the pods
