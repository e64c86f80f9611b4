"""A TrainJob's spec.podTemplateOverrides (Trainer v2.1): what they add to the pods of each
replicatedJob they name reaches the Workload as the trainer's strategic merge patch makes
it (and as kubesim's trainer builds the JobSet), and their shape is checked at their paths."""

import copy

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesim.trainer import build_jobset
from queueing import workload_from_manifest
from queueing.kinds import TRAINJOB
from queueing.node_affinity import Requirement, Term, required_node_affinity
from queueing.placement import GATE, hold, restore
from queueing.validation import Problems
from tests.examples import examples
from tests.queueing.kinds_support import Runtimes, errors_of
from tests.queueing.test_queueing_trainjob import TORCHTUNE, train_job

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
RUNTIME_TOLERATION = {"key": "runtime", "operator": "Exists", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
HERE = "spec.podTemplateOverrides"


def required(key, *values):
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [in_(key, *values)]}]}}}


def in_(key, *values):
    return {"key": key, "operator": "In", "values": list(values)}


def terms(key, *values):
    return (Term((Requirement(key, "In", values),)),)


def runtime():
    """torchtune's runtime (two initializers, then the trainer) with placement of its own."""
    found = yaml.safe_load(TORCHTUNE)
    for item in found["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = item["template"]["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"pool": "any", "disk": "ssd"}
        pod["tolerations"] = [RUNTIME_TOLERATION]
        pod["affinity"] = required("zone", "a")
    return found


def with_overrides(*entries):
    manifest = train_job("torchtune-llama3.2-1b")
    manifest["spec"]["podTemplateOverrides"] = list(entries)
    return manifest


def pod_sets(*entries):
    return {p.role: p for p in workload_from_manifest(with_overrides(*entries), Runtimes(runtime())).pod_sets}


def test_without_overrides_the_pods_are_placed_as_the_runtime_says():
    node = pod_sets()["node"]
    assert dict(node.node_selector) == {"pool": "any", "disk": "ssd"}
    assert node.tolerations == (RUNTIME_TOLERATION,)
    assert node.node_affinity == terms("zone", "a")


def test_node_selector_merges_key_by_key_over_the_runtimes_and_later_entries_win():
    found = pod_sets(
        {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"pool": "gpu", "rack": "1"}}},
        {"targetJobs": [{"name": "node"}, {"name": "model-initializer"}], "spec": {"nodeSelector": {"rack": "2"}}},
    )
    assert dict(found["node"].node_selector) == {"pool": "gpu", "disk": "ssd", "rack": "2"}
    assert dict(found["model-initializer"].node_selector) == {"pool": "any", "disk": "ssd", "rack": "2"}
    assert dict(found["dataset-initializer"].node_selector) == {"pool": "any", "disk": "ssd"}  # not named


def test_tolerations_replace_the_runtimes_but_an_empty_list_changes_nothing():
    found = pod_sets(
        {"targetJobs": [{"name": "node"}], "spec": {"tolerations": [GPU_TOLERATION]}},
        {"targetJobs": [{"name": "dataset-initializer"}], "spec": {"tolerations": []}},
    )
    assert found["node"].tolerations == (GPU_TOLERATION,)
    # The trainer's Go types omit an empty list before the patch: the runtime's stay.
    assert found["dataset-initializer"].tolerations == (RUNTIME_TOLERATION,)


def test_required_node_affinity_replaces_the_runtimes_terms():
    assert pod_sets({"targetJobs": [{"name": "node"}], "spec": {"affinity": required("zone", "b", "c")}})[
        "node"
    ].node_affinity == terms("zone", "b", "c")


@pytest.mark.parametrize(
    "affinity",
    [
        {},
        {"nodeAffinity": {}},
        {"nodeAffinity": None},  # a null the API server drops (kubesim's patch would delete the runtime's)
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [in_("zone", "b")]}}
                ]
            }
        },
    ],
)
def test_an_affinity_without_required_node_terms_keeps_the_runtimes(affinity):
    # An affinity merges as a map: only what it sets replaces the runtime's.
    found = pod_sets({"targetJobs": [{"name": "node"}], "spec": {"affinity": affinity}})
    assert found["node"].node_affinity == terms("zone", "a")


def test_an_entry_that_changes_no_placement_changes_nothing():
    plain = pod_sets()
    found = pod_sets(
        {"targetJobs": [{"name": "node"}], "metadata": {"labels": {"team": "a"}}},
        {"targetJobs": [{"name": "node"}], "spec": {"schedulingGates": [{"name": "example.com/gate"}]}},
        {"targetJobs": [{"name": "node"}], "spec": {"containers": [{"name": "node", "volumeMounts": []}]}},
    )
    assert found == plain


def test_the_runtime_read_is_not_changed():
    source = Runtimes(runtime())
    before = copy.deepcopy(source.objects)
    manifest = with_overrides({"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"pool": "gpu"}}})
    workload_from_manifest(manifest, source)
    assert source.objects == before


# --- refused, each at its path ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "path", "message"),
    [
        ("all", HERE, "must be a list"),
        (["node"], f"{HERE}[0]", "must be a mapping with targetJobs"),
        ([{"spec": {}}], f"{HERE}[0].targetJobs", "required"),
        ([{"targetJobs": "node"}], f"{HERE}[0].targetJobs", "must be a list"),
        ([{"targetJobs": ["node"]}], f"{HERE}[0].targetJobs[0]", "must be a mapping with a name"),
        ([{"targetJobs": [{}]}], f"{HERE}[0].targetJobs[0].name", "required"),
        ([{"targetJobs": [{"name": "node", "replicas": 2}]}], f"{HERE}[0].targetJobs[0].replicas", "unknown field"),
        (
            [{"targetJobs": [{"name": "node"}], "nodeSelector": {"pool": "gpu"}}],
            f"{HERE}[0].nodeSelector",
            "unknown field; expected one of metadata, spec, targetJobs (pod spec fields such as nodeSelector go "
            "under spec)",
        ),
        ([{"targetJobs": [{"name": "node"}], "spec": []}], f"{HERE}[0].spec", "must be a mapping"),
        (
            [{"targetJobs": [{"name": "node"}], "spec": {"resources": {}}}],
            f"{HERE}[0].spec.resources",
            "unknown field",
        ),
        (
            [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"gpu": True}}}],
            f"{HERE}[0].spec.nodeSelector.gpu",
            "must be a string",
        ),
        (
            [{"targetJobs": [{"name": "node"}], "spec": {"tolerations": [{"key": "a", "operator": "Near"}]}}],
            f"{HERE}[0].spec.tolerations[0].operator",
            "must be one of",
        ),
        (
            [{"targetJobs": [{"name": "node"}], "spec": {"affinity": {"nodeAffinity": {REQUIRED: {}}}}}],
            f"{HERE}[0].spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms",
            "required: at least one node selector term",
        ),
        (
            [{"targetJobs": [{"name": "node"}], "metadata": {"labels": {"team": "a b"}}}],
            f"{HERE}[0].metadata.labels.team",
            "must be empty or",
        ),
        ([{"targetJobs": [{"name": "node"}], "spec": {"containers": [{}]}}], f"{HERE}[0].spec.containers[0].name", ""),
        (
            [{"targetJobs": [{"name": "node"}], "spec": {"containers": [{"name": "node", "image": "x"}]}}],
            f"{HERE}[0].spec.containers[0].image",
            "unknown field; expected one of env, name, volumeMounts",
        ),
    ],
)
def test_an_override_of_the_wrong_shape_is_refused_at_its_path(entries, path, message):
    manifest = train_job("torchtune-llama3.2-1b")
    manifest["spec"]["podTemplateOverrides"] = entries
    errors = errors_of(manifest, Runtimes(runtime()))
    assert list(errors) == [path]
    assert message in errors[path]


def test_trainer_v2_0s_field_is_refused_with_its_new_spelling():
    manifest = train_job("torchtune-llama3.2-1b")
    manifest["spec"]["podSpecOverrides"] = [{"targetJobs": [{"name": "node"}], "nodeSelector": {"pool": "gpu"}}]
    assert errors_of(manifest, Runtimes(runtime())) == {
        "spec.podSpecOverrides": (
            "Trainer v2.1 drops this field (v2.0's name for it): use spec.podTemplateOverrides, "
            "each entry's pod fields under its spec"
        )
    }


RUNTIME = "ClusterTrainingRuntime 'torchtune-llama3.2-1b'"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"targetJobs": [{"name": "node"}, {"name": "launcher"}]},
            {
                f"{HERE}[0].targetJobs[1].name": f"must name a replicatedJob of {RUNTIME} "
                "(dataset-initializer, model-initializer, node), got 'launcher'"
            },
        ),
        (
            {
                "targetJobs": [{"name": "node"}, {"name": "dataset-initializer"}],
                "spec": {"containers": [{"name": "node"}]},
            },
            {
                f"{HERE}[0].spec.containers[0].name": f"{RUNTIME}'s replicatedJob 'dataset-initializer' has no "
                "container 'node'"
            },
        ),
        (
            {"targetJobs": [{"name": "node"}], "spec": {"initContainers": [{"name": "fetch"}]}},
            {f"{HERE}[0].spec.initContainers[0].name": f"{RUNTIME}'s replicatedJob 'node' has no container 'fetch'"},
        ),
        (
            {"targetJobs": [{"name": "node"}], "spec": {"containers": [{"name": "node", "env": [{"name": "A"}]}]}},
            {
                f"{HERE}[0].spec.containers[0].env": "must not be set for the node container: its env comes from "
                "spec.trainer or spec.initializer"
            },
        ),
    ],
)
def test_an_override_must_fit_the_runtime_as_the_trainers_webhook_says(entry, expected):
    assert errors_of(with_overrides(entry), Runtimes(runtime())) == expected


def test_a_container_of_the_runtime_may_be_overridden():
    entry = {"targetJobs": [{"name": "node"}], "spec": {"containers": [{"name": "node", "volumeMounts": []}]}}
    assert workload_from_manifest(with_overrides(entry), Runtimes(runtime())).pods == 3


# --- the same pods as kubesim's trainer builds ------------------------------------------------

JOBS = ("dataset-initializer", "model-initializer", "node")
SELECTORS = st.dictionaries(st.sampled_from(["pool", "disk", "rack"]), st.sampled_from(["a", "b"]), max_size=2)
TOLERATIONS = st.lists(st.sampled_from([RUNTIME_TOLERATION, GPU_TOLERATION, {"operator": "Exists"}]), max_size=2)
AFFINITIES = st.one_of(
    st.builds(required, st.sampled_from(["zone", "rack"]), st.sampled_from(["a", "b"])),
    st.just({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}),
    st.just({"podAffinity": {}}),
)


@st.composite
def placement(draw):
    """Some of nodeSelector, tolerations and affinity, none of them empty (the trainer's Go
    types and kubesim's patch part ways on empty lists, see the test above)."""
    found = {}
    if selector := draw(SELECTORS):
        found["nodeSelector"] = selector
    if tolerations := draw(TOLERATIONS):
        found["tolerations"] = tolerations
    if draw(st.booleans()):
        found["affinity"] = draw(AFFINITIES)
    return found


@st.composite
def trainjob_and_runtime(draw):
    found = yaml.safe_load(TORCHTUNE)
    for item in found["spec"]["template"]["spec"]["replicatedJobs"]:
        item["template"]["spec"]["template"]["spec"].update(draw(placement()))
    entries = [
        {
            "targetJobs": [{"name": name} for name in draw(st.lists(st.sampled_from(JOBS), min_size=1, unique=True))],
            "spec": draw(placement()),
        }
        for _ in range(draw(st.integers(0, 3)))
    ]
    manifest = with_overrides(*entries)
    manifest["metadata"]["namespace"] = "team-a"
    return manifest, found


def built(manifest, runtime):
    return build_jobset({**manifest, "metadata": {**manifest["metadata"], "uid": "u"}}, runtime)


@given(trainjob_and_runtime())
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_each_pod_set_is_placed_as_the_jobset_kubesims_trainer_builds(generated):
    manifest, found = generated
    workload = workload_from_manifest(manifest, Runtimes(found))
    jobset = built(manifest, found)
    for item, pod_set in zip(jobset["spec"]["replicatedJobs"], workload.pod_sets, strict=True):
        pod = item["template"]["spec"]["template"]["spec"]
        assert item["name"] == pod_set.role
        assert dict(pod_set.node_selector) == pod.get("nodeSelector", {})
        assert list(pod_set.tolerations) == pod.get("tolerations", [])
        assert pod_set.node_affinity == required_node_affinity(pod, "", Problems())


@given(trainjob_and_runtime())
@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_kubesims_trainer_gates_every_pod_of_a_held_trainjob_and_none_once_restored(generated):
    manifest, found = generated
    workload = workload_from_manifest(manifest, Runtimes(found))
    held_obj = hold(TRAINJOB, manifest, workload)
    for item in built(held_obj, found)["spec"]["replicatedJobs"]:
        assert {"name": GATE} in item["template"]["spec"]["template"]["spec"]["schedulingGates"], item["name"]
    assert built(restore(TRAINJOB, held_obj), found) == built(manifest, found)
