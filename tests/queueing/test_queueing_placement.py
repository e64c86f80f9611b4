"""The placement gate (queueing/placement.py) on every kind: where each kind's pod templates
are (capabilities.JobWithPodTemplates), hold and restore as exact inverses that leave the
user's own scheduling fields alone, and the held object still the same Workload."""

import copy
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import BY_KEY, Workload, adapter_for, capabilities, parse_job
from queueing.kinds import FAMILY, JOB, JOBSET, MPIJOB, PYTORCHJOB, TFJOB, TRAINJOB
from queueing.placement import GATE, held, hold, restore
from tests.examples import examples
from tests.queueing.kinds_support import Runtimes, container
from tests.queueing.test_queueing_kinds_properties import batch_job, jobset, kubeflow_job, mpi_job, train_job
from tests.queueing.test_queueing_trainjob import TORCH_DISTRIBUTED
from tests.queueing.test_queueing_trainjob import runtimes as trainjob_runtimes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SETTINGS = settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
OURS = {"name": GATE}


def roles_and_templates(adapter, obj, roles=()):
    return capabilities.pod_templates(adapter, obj, roles)


def assert_templates(found, expected):
    """found is [(role, template)], each template the very dict expected names."""
    assert [role for role, _ in found] == [role for role, _ in expected]
    for (_, template), (_, dict_in_obj) in zip(found, expected, strict=True):
        assert template is dict_in_obj


def pod_template(name="main"):
    return {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container(name)], "restartPolicy": "Never"}}


# --- where each kind's templates are ---------------------------------------------------


def test_every_kind_of_the_project_says_where_its_templates_are():
    for adapter in BY_KEY.values():
        # (a job of pods has no template: the webhook gates each pod as it is created)
        has_templates = isinstance(adapter, capabilities.JobWithPodTemplates)
        assert has_templates is not capabilities.objects_are_pods(adapter), adapter.kind


@pytest.mark.parametrize("adapter", FAMILY, ids=lambda a: a.kind)
def test_kubeflow_templates_are_the_replica_specs_templates_in_pod_set_order(adapter):
    specs = {t: {"replicas": 1, "template": pod_template(adapter.container_name)} for t in adapter.replica_types}
    obj = {"apiVersion": adapter.api_version, "kind": adapter.kind, "spec": {adapter.replica_specs_field: specs}}
    expected = [(t, specs[t]["template"]) for t in adapter.replica_types]
    assert_templates(roles_and_templates(adapter, obj), expected)
    assert (
        capabilities.template_pod_spec(adapter, specs[adapter.replica_types[-1]]["template"])
        is (specs[adapter.replica_types[-1]]["template"]["spec"])
    )


def test_a_tfjob_template_is_named_by_its_canonical_type_whatever_its_case():
    specs = {"worker": {"template": pod_template()}, "PS": {"template": pod_template()}, "CHIEF": {}}
    obj = {"spec": {"tfReplicaSpecs": specs}}
    # CHIEF has no template: nothing to hold there.
    assert_templates(
        roles_and_templates(TFJOB, obj), [("PS", specs["PS"]["template"]), ("Worker", specs["worker"]["template"])]
    )


def test_a_spelling_the_webhook_refuses_is_no_template():
    specs = {"Master": {"template": pod_template()}, "worker": {"template": pod_template()}}
    found = roles_and_templates(PYTORCHJOB, {"spec": {"pytorchReplicaSpecs": specs}})
    assert_templates(found, [("Master", specs["Master"]["template"])])


def test_an_elastic_pytorchjob_worker_is_a_template_too():
    text = (EXAMPLES / "pytorch-ddp.yaml").read_text()
    manifest, _ = parse_job(text)
    manifest["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    specs = manifest["spec"]["pytorchReplicaSpecs"]
    expected = [("Master", specs["Master"]["template"]), ("Worker", specs["Worker"]["template"])]
    assert_templates(roles_and_templates(PYTORCHJOB, manifest), expected)


def test_mpijob_templates_are_the_launchers_and_the_workers():
    specs = {"Launcher": {"template": pod_template()}, "Worker": {"replicas": 2, "template": pod_template()}}
    obj = {"spec": {"mpiReplicaSpecs": specs}}
    assert_templates(
        roles_and_templates(MPIJOB, obj),
        [("Launcher", specs["Launcher"]["template"]), ("Worker", specs["Worker"]["template"])],
    )
    del specs["Worker"]
    specs["worker"] = {"template": pod_template()}  # the operator does not rename it
    assert_templates(roles_and_templates(MPIJOB, obj), [("Launcher", specs["Launcher"]["template"])])


def test_a_batch_jobs_template_is_spec_template_of_its_one_pod_set():
    obj = {"spec": {"template": pod_template()}}
    assert_templates(roles_and_templates(JOB, obj), [("main", obj["spec"]["template"])])
    assert roles_and_templates(JOB, {"spec": {}}) == []


def test_jobset_templates_are_each_replicated_jobs_pod_template():
    items = [
        {"name": "driver", "template": {"spec": {"template": pod_template()}}},
        {"name": "workers", "replicas": 3, "template": {"spec": {"parallelism": 2, "template": pod_template()}}},
        {"template": {"spec": {"template": pod_template()}}},  # no name: no pod set of the job
    ]
    found = roles_and_templates(JOBSET, {"spec": {"replicatedJobs": items}})
    expected = [
        ("driver", items[0]["template"]["spec"]["template"]),
        ("workers", items[1]["template"]["spec"]["template"]),
    ]
    assert_templates(found, expected)


def trainjob(overrides=None):
    spec = {"runtimeRef": {"name": "torch-distributed"}}
    if overrides is not None:
        spec["podTemplateOverrides"] = overrides
    return {"apiVersion": TRAINJOB.api_version, "kind": "TrainJob", "metadata": {"name": "t"}, "spec": spec}


def test_trainjob_templates_are_its_override_entries_with_a_spec_one_per_job_named():
    entries = [
        {"targetJobs": [{"name": "node"}, {"name": "launcher"}], "spec": {"nodeSelector": {"pool": "gpu"}}},
        {"targetJobs": [{"name": "dataset-initializer"}], "metadata": {"labels": {"team": "a"}}},  # no spec
        {"targetJobs": [{"name": "model-initializer"}], "spec": None},
        {"targetJobs": [{"name": "dataset-initializer"}], "spec": {"tolerations": [{"operator": "Exists"}]}},
    ]
    obj = trainjob(entries)
    expected = [("node", entries[0]), ("launcher", entries[0]), ("dataset-initializer", entries[3])]
    assert_templates(roles_and_templates(TRAINJOB, obj), expected)
    assert TRAINJOB.pod_spec_path == ("spec",)
    assert capabilities.template_pod_spec(TRAINJOB, entries[0]) is entries[0]["spec"]


def test_a_trainjob_role_without_an_entry_gets_a_blank_one_when_asked_for():
    labels_only = {"targetJobs": [{"name": "model-initializer"}], "metadata": {"labels": {"team": "a"}}}
    entries = [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"pool": "gpu"}}}, labels_only]
    obj = trainjob(entries)
    assert len(roles_and_templates(TRAINJOB, obj)) == 1 and len(entries) == 2  # reading adds nothing
    found = roles_and_templates(TRAINJOB, obj, ["model-initializer", "node", "model-initializer"])
    # The entry without a spec is left as it is: the job it names gets one of its own.
    assert entries[1] == labels_only and len(entries) == 3
    assert entries[2] == {"targetJobs": [{"name": "model-initializer"}], "spec": {}}
    assert_templates(found, [("node", entries[0]), ("model-initializer", entries[2])])
    assert_templates(roles_and_templates(TRAINJOB, obj, ["node", "model-initializer"]), found)

    bare = trainjob()
    found = roles_and_templates(TRAINJOB, bare, ["node"])
    assert bare["spec"]["podTemplateOverrides"] == [{"targetJobs": [{"name": "node"}], "spec": {}}]
    assert_templates(found, [("node", bare["spec"]["podTemplateOverrides"][0])])
    # Overrides that are not a list cannot take an entry without losing what they hold.
    junk = trainjob("not a list")
    assert roles_and_templates(TRAINJOB, junk, ["node"]) == [] and junk == trainjob("not a list")


@pytest.mark.parametrize("blank", [{"targetJobs": [{"name": "node"}]}, {"targetJobs": [{"name": "node"}], "spec": {}}])
def test_a_trainjob_drops_a_blank_entry_and_nothing_else(blank):
    kept = [
        {"targetJobs": [{"name": "a"}, {"name": "b"}], "spec": {}},
        {"targetJobs": [{"name": "c"}], "spec": {"nodeSelector": {"x": "y"}}},
        {"targetJobs": [{"name": "d"}], "spec": {}, "metadata": {"labels": {"x": "y"}}},
    ]
    obj = trainjob([*kept, blank])
    for entry in kept:
        TRAINJOB.drop_blank(obj, entry)
    TRAINJOB.drop_blank(obj, copy.deepcopy(blank))  # equal, but not the one in obj
    assert obj["spec"]["podTemplateOverrides"] == [*kept, blank]
    TRAINJOB.drop_blank(obj, obj["spec"]["podTemplateOverrides"][3])
    assert obj["spec"]["podTemplateOverrides"] == kept
    alone = trainjob([copy.deepcopy(blank)])
    TRAINJOB.drop_blank(alone, alone["spec"]["podTemplateOverrides"][0])
    assert alone == trainjob()


def test_a_trainjob_is_held_only_with_an_entry_for_each_of_its_jobs():
    # deepspeed-distributed runs two replicatedJobs: node and launcher.
    manifest = trainjob([{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"pool": "gpu"}}}])
    manifest["spec"]["runtimeRef"]["name"] = "deepspeed-distributed"
    workload = TRAINJOB.validate_and_build(manifest, trainjob_runtimes())
    assert [p.role for p in workload.pod_sets] == ["node", "launcher"]
    held_obj = hold(TRAINJOB, manifest, workload)
    assert held_obj["spec"]["podTemplateOverrides"] == [
        {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"pool": "gpu"}, "schedulingGates": [OURS]}},
        {"targetJobs": [{"name": "launcher"}], "spec": {"schedulingGates": [OURS]}},
    ]
    assert held(TRAINJOB, held_obj, workload)
    del held_obj["spec"]["podTemplateOverrides"][1]
    assert not held(TRAINJOB, held_obj, workload)
    assert restore(TRAINJOB, held_obj) == manifest


@dataclass(frozen=True)
class Bare:
    """A kind that does not say where its templates are."""

    api_version: str = "example.com/v1"
    kind: str = "Bare"
    plural: str = "bares"
    pod_job_label: str = "example.com/bare-name"

    def validate_and_build(self, manifest, runtimes=None):
        raise NotImplementedError

    def status(self, obj):
        raise NotImplementedError


def test_a_kind_that_does_not_say_where_its_templates_are_is_never_held():
    adapter, obj = Bare(), {"spec": {"template": pod_template()}}
    workload = Workload("Bare", "example.com/v1", "b", "ns", ())
    assert not isinstance(adapter, capabilities.JobWithPodTemplates)
    assert capabilities.pod_templates(adapter, obj, ["main"]) == []
    assert capabilities.template_pod_spec(adapter, obj["spec"]["template"]) is None
    copied = hold(adapter, obj, workload)
    assert copied == obj and copied is not obj
    assert not held(adapter, copied, workload) and restore(adapter, copied) == obj


# --- hold and restore on generated manifests of every kind -------------------------------

TRAINJOBS = train_job().map(lambda generated: (generated[0], generated[1]))
MANIFESTS = st.one_of(
    kubeflow_job().map(lambda generated: (generated[0], None)),
    mpi_job().map(lambda generated: (generated[0], None)),
    batch_job().map(lambda generated: (generated[0], None)),
    jobset().map(lambda generated: (generated[0], None)),
    TRAINJOBS,
)
USER_GATES = st.lists(
    st.sampled_from(["example.com/quota", "example.com/image", "kueue.x-k8s.io/topology"]),
    min_size=1,
    max_size=3,
    unique=True,
).map(lambda names: [{"name": name} for name in names])
SELECTORS = st.dictionaries(
    st.sampled_from(["example.com/zone", "kubernetes.io/arch", "node.kubernetes.io/instance-type"]),
    st.sampled_from(["a", "amd64", "m5-large"]),
    min_size=1,
)
TOLERATIONS = st.lists(
    st.sampled_from(
        [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "team", "operator": "Equal", "value": "a", "effect": "NoExecute", "tolerationSeconds": 30},
            {"operator": "Exists"},
        ]
    ),
    min_size=1,
    max_size=2,
)
AFFINITY = st.sampled_from(["example.com/zone", "kubernetes.io/hostname"]).map(
    lambda key: {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": ["a", "b"]}]}]
            }
        }
    }
)
USER_FIELDS = {
    "schedulingGates": USER_GATES,
    "nodeSelector": SELECTORS,
    "tolerations": TOLERATIONS,
    "affinity": AFFINITY,
}
# What means what its absence means: hold can only make of it what it makes of absence.
EMPTY = st.sampled_from([[], None])


def pod_specs(manifest):
    """Where the pods' spec fields are, kind by kind, as this test knows them (not from the
    adapters): the dicts hold must gate, in the adapters' order."""
    kind, spec = manifest["kind"], manifest["spec"]
    if kind == "TrainJob":
        return [
            entry["spec"] for entry in spec.get("podTemplateOverrides") or [] if isinstance(entry.get("spec"), dict)
        ]
    if kind == "Job":
        return [spec["template"]["spec"]]
    if kind == "JobSet":
        return [item["template"]["spec"]["template"]["spec"] for item in spec["replicatedJobs"]]
    adapter = adapter_for(manifest["apiVersion"], kind)
    (field,) = [key for key in spec if key.endswith("ReplicaSpecs")]
    order = {t.lower(): n for n, t in enumerate(getattr(adapter, "replica_types", ("Launcher", "Worker")))}
    keys = sorted(spec[field], key=lambda key: order[key.lower()])
    return [spec[field][key]["template"]["spec"] for key in keys]


def runtime_jobs(runtimes):
    (runtime,) = runtimes.objects.values()
    return [item["name"] for item in runtime["spec"]["template"]["spec"]["replicatedJobs"]]


def user_fields(draw, empty):
    fields = {}
    for name, strategy in USER_FIELDS.items():
        if draw(st.booleans()):
            fields[name] = copy.deepcopy(draw(strategy))
    if empty and draw(st.booleans()):
        fields["schedulingGates"] = draw(EMPTY)
    return fields


@st.composite
def written(draw, empty=False, manifests=MANIFESTS):
    """(manifest, runtimes, workload): a valid manifest of any kind with the user's own gates,
    nodeSelector, tolerations and affinity here and there (for a TrainJob, override entries
    naming some of its runtime's jobs, a job in several entries at times as Trainer 2.1
    allows, some entries with labels and no spec); with ``empty``, also containers there but
    empty."""
    manifest, runtimes = draw(manifests)
    if manifest["kind"] != "TrainJob":
        for spec in pod_specs(manifest):
            spec.update(user_fields(draw, empty))
    else:
        names = runtime_jobs(runtimes)
        entries = []
        for _ in range(draw(st.integers(0, 3))):
            named = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
            entry = {"targetJobs": [{"name": name} for name in named]}
            if draw(st.integers(0, 3)) == 0:
                entry["metadata"] = {"labels": {"team": "a"}}
            if "metadata" not in entry or draw(st.booleans()):
                fields = user_fields(draw, empty) or ({} if empty else {"nodeSelector": {"example.com/zone": "a"}})
                entry["spec"] = draw(st.sampled_from([fields, None])) if empty and not fields else fields
            entries.append(entry)
        if entries or (empty and draw(st.booleans())):
            manifest["spec"]["podTemplateOverrides"] = entries or draw(EMPTY)
    workload = adapter_for(manifest["apiVersion"], manifest["kind"]).validate_and_build(manifest, runtimes)
    return manifest, runtimes, workload


def adapter_of(manifest):
    return adapter_for(manifest["apiVersion"], manifest["kind"])


@given(written())
@SETTINGS
def test_restore_undoes_hold_exactly_and_neither_changes_its_argument(generated):
    manifest, _, workload = generated
    adapter, before = adapter_of(manifest), copy.deepcopy(manifest)
    held_obj = hold(adapter, manifest, workload)
    assert manifest == before
    assert held_obj != manifest
    restored = restore(adapter, held_obj)
    assert restored == manifest
    assert held_obj == hold(adapter, manifest, workload)  # restore left its argument alone too
    # Nothing of jobdash's in it: restore has nothing to take away.
    assert restore(adapter, manifest) == manifest


@given(written())
@SETTINGS
def test_hold_gates_every_template_once_and_is_idempotent(generated):
    manifest, _, workload = generated
    adapter = adapter_of(manifest)
    held_obj = hold(adapter, manifest, workload)
    assert held(adapter, held_obj, workload) and not held(adapter, manifest, workload)
    assert hold(adapter, held_obj, workload) == held_obj
    specs = pod_specs(held_obj)
    assert specs
    for spec in specs:
        assert spec["schedulingGates"][-1] == OURS
        assert spec["schedulingGates"].count(OURS) == 1


@given(written(), st.data())
@SETTINGS
def test_a_job_with_one_template_not_gated_is_not_held(generated, data):
    manifest, _, workload = generated
    adapter = adapter_of(manifest)
    partly = hold(adapter, manifest, workload)
    specs = pod_specs(partly)
    specs[data.draw(st.integers(0, len(specs) - 1))]["schedulingGates"].remove(OURS)
    assert not held(adapter, partly, workload)
    assert hold(adapter, partly, workload) == hold(adapter, manifest, workload)


def user_entries(manifest):
    """How many override entries a TrainJob's user wrote; 0 for other kinds."""
    return len(manifest["spec"].get("podTemplateOverrides") or []) if manifest["kind"] == "TrainJob" else 0


def without_gates(manifest, entries):
    """The manifest with no schedulingGates at all, and (a TrainJob) only its first
    ``entries`` override entries."""
    result = copy.deepcopy(manifest)
    for spec in pod_specs(result):
        spec.pop("schedulingGates", None)
    if result["kind"] == "TrainJob" and "podTemplateOverrides" in result["spec"]:
        del result["spec"]["podTemplateOverrides"][entries:]
        if not result["spec"]["podTemplateOverrides"]:
            del result["spec"]["podTemplateOverrides"]
    return result


@given(written())
@SETTINGS
def test_hold_adds_the_gate_and_changes_nothing_of_the_users(generated):
    manifest, _, workload = generated
    held_obj = hold(adapter_of(manifest), manifest, workload)
    # A TrainJob's held overrides start with the user's entries, in their order.
    for mine, theirs in zip(pod_specs(held_obj), pod_specs(manifest), strict=False):
        assert mine["schedulingGates"] == [*theirs.get("schedulingGates", []), OURS]
        for field in ("nodeSelector", "tolerations", "affinity"):
            assert mine.get(field) == theirs.get(field)
    users = user_entries(manifest)
    assert without_gates(held_obj, users) == without_gates(manifest, users)


@given(written(manifests=TRAINJOBS))
@SETTINGS
def test_a_held_trainjob_gates_every_runtime_job_adding_entries_only_where_none_with_a_spec_names_it(generated):
    manifest, runtimes, workload = generated
    entries = hold(TRAINJOB, manifest, workload)["spec"]["podTemplateOverrides"]
    gated = Counter(
        target["name"]
        for entry in entries
        if OURS in ((entry.get("spec") or {}).get("schedulingGates") or [])
        for target in entry["targetJobs"]
    )
    assert set(gated) == set(runtime_jobs(runtimes)) == {p.role for p in workload.pod_sets}
    users = user_entries(manifest)
    assert entries[:users] == [
        {**e, "spec": {**e["spec"], "schedulingGates": [*e["spec"].get("schedulingGates", []), OURS]}}
        if isinstance(e.get("spec"), dict)
        else e
        for e in (manifest["spec"].get("podTemplateOverrides") or [])
    ]
    already = {
        target["name"]
        for entry in manifest["spec"].get("podTemplateOverrides") or []
        if isinstance(entry.get("spec"), dict)
        for target in entry["targetJobs"]
    }
    assert entries[users:] == [
        {"targetJobs": [{"name": p.role}], "spec": {"schedulingGates": [OURS]}}
        for p in workload.pod_sets
        if p.role not in already
    ]


@given(written())
@SETTINGS
def test_the_held_manifest_is_the_same_workload(generated):
    manifest, runtimes, workload = generated
    adapter = adapter_of(manifest)
    assert adapter.validate_and_build(hold(adapter, manifest, workload), runtimes) == workload


def canonical(manifest):
    """The manifest without the empty containers restore leaves absent."""
    result = copy.deepcopy(manifest)
    for spec in pod_specs(result):
        if "schedulingGates" in spec and not spec["schedulingGates"]:
            del spec["schedulingGates"]
    spec = result["spec"]
    if result["kind"] == "TrainJob" and "podTemplateOverrides" in spec:
        entries = [
            e
            for e in spec["podTemplateOverrides"] or []
            if e != {"targetJobs": [{"name": t["name"]} for t in e["targetJobs"][:1]], "spec": {}}
        ]
        spec["podTemplateOverrides"] = entries
        if not entries:
            del spec["podTemplateOverrides"]
    return result


@given(written(empty=True))
@SETTINGS
def test_empty_containers_come_back_absent_and_the_rest_exactly(generated):
    manifest, runtimes, workload = generated
    adapter = adapter_of(manifest)
    held_obj = hold(adapter, manifest, workload)
    assert held(adapter, held_obj, workload)
    assert restore(adapter, held_obj) == canonical(manifest)
    assert adapter.validate_and_build(held_obj, runtimes) == workload


def test_hold_and_restore_on_every_example():
    runtimes = Runtimes(yaml.safe_load(TORCH_DISTRIBUTED))
    for path in sorted(EXAMPLES.glob("*.yaml")):
        manifest, workload = parse_job(path.read_text(), runtimes=runtimes)
        adapter = adapter_of(manifest)
        held_obj = hold(adapter, manifest, workload)
        assert held(adapter, held_obj, workload) and not held(adapter, manifest, workload), path.name
        assert [spec["schedulingGates"] for spec in pod_specs(held_obj)] == [[OURS]] * len(workload.pod_sets), path.name
        assert restore(adapter, held_obj) == manifest, path.name
        assert adapter.validate_and_build(held_obj, runtimes) == workload, path.name
