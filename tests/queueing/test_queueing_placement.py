"""Where each kind's pod templates are (capabilities.JobWithPodTemplates)."""

from pathlib import Path

import pytest

from queueing import BY_KEY, capabilities, parse_job
from queueing.kinds import FAMILY, JOB, JOBSET, MPIJOB, PYTORCHJOB, TFJOB, TRAINJOB
from tests.queueing.kinds_support import container

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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
        assert isinstance(adapter, capabilities.JobWithPodTemplates), adapter.kind


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
        spec["podSpecOverrides"] = overrides
    return {"apiVersion": TRAINJOB.api_version, "kind": "TrainJob", "metadata": {"name": "t"}, "spec": spec}


def test_trainjob_templates_are_its_override_entries_one_per_job_named():
    entries = [
        {"targetJobs": [{"name": "node"}, {"name": "launcher"}], "nodeSelector": {"pool": "gpu"}},
        {"targetJobs": [{"name": "dataset-initializer"}], "tolerations": [{"operator": "Exists"}]},
    ]
    obj = trainjob(entries)
    expected = [("node", entries[0]), ("launcher", entries[0]), ("dataset-initializer", entries[1])]
    assert_templates(roles_and_templates(TRAINJOB, obj), expected)
    assert TRAINJOB.pod_spec_path == ()
    assert capabilities.template_pod_spec(TRAINJOB, entries[0]) is entries[0]


def test_a_trainjob_role_without_an_entry_gets_a_blank_one_when_asked_for():
    entries = [{"targetJobs": [{"name": "node"}], "nodeSelector": {"pool": "gpu"}}]
    obj = trainjob(entries)
    assert len(roles_and_templates(TRAINJOB, obj)) == 1 and len(entries) == 1  # reading adds nothing
    found = roles_and_templates(TRAINJOB, obj, ["model-initializer", "node", "model-initializer"])
    assert entries[1] == {"targetJobs": [{"name": "model-initializer"}]} and len(entries) == 2
    assert_templates(found, [("node", entries[0]), ("model-initializer", entries[1])])
    assert_templates(roles_and_templates(TRAINJOB, obj, ["node", "model-initializer"]), found)

    bare = trainjob()
    found = roles_and_templates(TRAINJOB, bare, ["node"])
    assert bare["spec"]["podSpecOverrides"] == [{"targetJobs": [{"name": "node"}]}]
    assert_templates(found, [("node", bare["spec"]["podSpecOverrides"][0])])
    # Overrides that are not a list cannot take an entry without losing what they hold.
    junk = trainjob("not a list")
    assert roles_and_templates(TRAINJOB, junk, ["node"]) == [] and junk == trainjob("not a list")


def test_a_trainjob_drops_a_blank_entry_and_nothing_else():
    blank = {"targetJobs": [{"name": "node"}]}
    kept = [{"targetJobs": [{"name": "a"}, {"name": "b"}]}, {"targetJobs": [{"name": "c"}], "nodeSelector": {"x": "y"}}]
    obj = trainjob([*kept, blank])
    for entry in kept:
        TRAINJOB.drop_blank(obj, entry)
    TRAINJOB.drop_blank(obj, {"targetJobs": [{"name": "node"}]})  # equal, but not the one in obj
    assert obj["spec"]["podSpecOverrides"] == [*kept, blank]
    TRAINJOB.drop_blank(obj, obj["spec"]["podSpecOverrides"][2])
    assert obj["spec"]["podSpecOverrides"] == kept
    alone = trainjob([blank])
    TRAINJOB.drop_blank(alone, alone["spec"]["podSpecOverrides"][0])
    assert alone == trainjob()
