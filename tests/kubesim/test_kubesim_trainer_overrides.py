"""TrainJob spec.podTemplateOverrides (Kubeflow Trainer v2.1): applied to the JobSet's pod
templates as the trainer applies them (a strategic merge patch per override), validated
as its webhook does, mutable only while suspended, and carried to the pods on resume."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kubesim.resources import EVENTS
from kubesim.testing import training_runtime_manifest, trainjob_manifest
from tests.kubesim.conftest import BASE_CONFIG

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
CONFIG = {
    **BASE_CONFIG,
    "nodes": [
        {
            "prefix": "node",
            "count": 3,
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "labels": {"pool": "any"},
        }
    ],
    "namespaces": [{"name": "team-a"}],
    "workload": {"default_duration_seconds": 36000},
}
RUNTIME_TOLERATION = {"key": "runtime", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def config():
    return CONFIG


@pytest.fixture
def runtime(sim):
    manifest = training_runtime_manifest(
        "rt", "team-a", num_nodes=2, tolerations=[RUNTIME_TOLERATION], node_selector={"pool": "any"}
    )
    pod_spec = manifest["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["schedulingGates"] = [{"name": "runtime.example.com/gate"}]
    sim.cluster.create(manifest)
    return manifest


def trainjob(name: str, overrides: list | None = None, suspend: bool | None = None) -> dict:
    manifest = trainjob_manifest(name, "team-a", runtime="rt", runtime_kind="TrainingRuntime", suspend=suspend)
    if overrides is not None:
        manifest["spec"]["podTemplateOverrides"] = overrides
    return manifest


OVERRIDE = {
    "targetJobs": [{"name": "node"}],
    "metadata": {"labels": {"team": "a"}},
    "spec": {
        "nodeSelector": {"kubernetes.io/hostname": "node-2"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "schedulingGates": [{"name": "jobdash.io/placement"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}
                    ]
                }
            }
        },
    },
}


def pod_template(sim, name: str) -> dict:
    jobset = sim.cluster.job("JobSet", "team-a", name)
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def test_overrides_merge_into_the_jobsets_pod_template_and_reach_the_pods(sim, runtime, custom):
    custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs", trainjob("tj", [OVERRIDE]))
    sim.advance(5)
    template = pod_template(sim, "tj")
    spec = template["spec"]
    # nodeSelector merges by key; schedulingGates merge by name; tolerations are replaced.
    assert spec["nodeSelector"] == {"pool": "any", "kubernetes.io/hostname": "node-2"}
    assert spec["schedulingGates"] == [{"name": "runtime.example.com/gate"}, {"name": "jobdash.io/placement"}]
    assert spec["tolerations"] == OVERRIDE["spec"]["tolerations"]
    assert spec["affinity"] == OVERRIDE["spec"]["affinity"]
    assert template["metadata"]["labels"]["team"] == "a"
    pods = sim.cluster.pods_of("TrainJob", "team-a", "tj")
    assert len(pods) == 2
    assert all(p["spec"]["schedulingGates"] == spec["schedulingGates"] for p in pods)
    assert all(p["metadata"]["labels"]["team"] == "a" for p in pods)


def test_later_overrides_win_and_other_targets_are_untouched(sim, custom):
    manifest = training_runtime_manifest("rt2", "team-a", num_nodes=1)
    initializer = json.loads(json.dumps(manifest["spec"]["template"]["spec"]["replicatedJobs"][0]))
    initializer["name"] = "dataset-initializer"
    initializer["template"]["metadata"] = {}
    manifest["spec"]["template"]["spec"]["replicatedJobs"].insert(0, initializer)
    sim.cluster.create(manifest)
    overrides = [
        {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"a": "1", "b": "1"}}},
        {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"b": "2"}}},
    ]
    body = trainjob_manifest("tj2", "team-a", runtime="rt2", runtime_kind="TrainingRuntime", suspend=True)
    body["spec"]["podTemplateOverrides"] = overrides
    custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs", body)
    sim.settle()
    rjobs = sim.cluster.job("JobSet", "team-a", "tj2")["spec"]["replicatedJobs"]
    by_name = {r["name"]: r["template"]["spec"]["template"]["spec"] for r in rjobs}
    assert by_name["node"]["nodeSelector"] == {"a": "1", "b": "2"}
    assert "nodeSelector" not in by_name["dataset-initializer"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"targetJobs": [{"name": "launcher"}]},
            "must not have targetJob that doesn't exist in the runtime job template",
        ),
        (
            {"targetJobs": [{"name": "node"}], "spec": {"containers": [{"name": "sidecar"}]}},
            "must not have container that doesn't exist in the runtime job node",
        ),
        (
            {
                "targetJobs": [{"name": "node"}],
                "spec": {"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]},
            },
            "must not have envs for the dataset-initializer, model-initializer, node containers",
        ),
    ],
)
def test_overrides_that_do_not_fit_the_runtime_are_refused(sim, runtime, custom, override, message):
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs", trainjob("bad", [override]))
    assert exc.value.status == 422
    text = json.loads(exc.value.body)["message"]
    assert "spec.podTemplateOverrides: Invalid value: " in text and text.endswith(message)


def patch(custom, name: str, body: dict):
    return custom.patch_namespaced_custom_object(
        GROUP, VERSION, "team-a", "trainjobs", name, body, _content_type="application/merge-patch+json"
    )


def test_overrides_change_only_while_suspended_and_reach_the_pods_on_resume(sim, runtime, custom, core):
    custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs", trainjob("tj", suspend=True))
    sim.advance(5)
    assert sim.cluster.pods_of("TrainJob", "team-a", "tj") == []
    jobset_rv = sim.cluster.job("JobSet", "team-a", "tj")["metadata"]["resourceVersion"]
    sim.advance(30)  # a suspended TrainJob's JobSet is applied again, but nothing changes
    assert sim.cluster.job("JobSet", "team-a", "tj")["metadata"]["resourceVersion"] == jobset_rv
    placement = {
        "targetJobs": [{"name": "node"}],
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "node-1"},
            "schedulingGates": [{"name": "jobdash.io/placement"}],
        },
    }
    patch(custom, "tj", {"spec": {"podTemplateOverrides": [placement]}})
    sim.settle()
    assert pod_template(sim, "tj")["spec"]["nodeSelector"] == {"pool": "any", "kubernetes.io/hostname": "node-1"}
    patch(custom, "tj", {"spec": {"suspend": False}})
    sim.advance(5)
    pods = sim.cluster.pods_of("TrainJob", "team-a", "tj")
    assert len(pods) == 2
    assert all(p["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "node-1" for p in pods)
    assert all({"name": "jobdash.io/placement"} in p["spec"]["schedulingGates"] for p in pods)
    with pytest.raises(ApiException) as exc:
        patch(custom, "tj", {"spec": {"podTemplateOverrides": None}})
    assert exc.value.status == 422
    assert json.loads(exc.value.body)["message"].endswith(
        "spec.podTemplateOverrides: Forbidden: PodTemplateOverrides can only be modified when the TrainJob is suspended"
    )
    for pod in pods:
        core.patch_namespaced_pod(
            pod["metadata"]["name"],
            "team-a",
            {"spec": {"schedulingGates": None}},
            _content_type="application/merge-patch+json",
        )
    sim.advance(5)
    assert {p["spec"].get("nodeName") for p in sim.cluster.pods_of("TrainJob", "team-a", "tj")} == {"node-1"}


def test_a_suspended_jobsets_template_changes_reach_the_jobs_it_resumes(sim, custom):
    """The JobSet controller's resumeJob merges nodeSelector, tolerations and gates into its suspended Jobs."""
    from kubesim.testing import jobset_manifest

    sim.cluster.create(jobset_manifest("js", "team-a", jobs=1, workers=2, suspend=True))
    sim.settle()
    job = sim.cluster.job("jobs.batch", "team-a", "js-workers-0")
    assert job["spec"]["suspend"] is True
    current = custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "team-a", "jobsets", "js")
    pod_spec = current["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["nodeSelector"] = {"kubernetes.io/hostname": "node-0"}
    pod_spec["schedulingGates"] = [{"name": "jobdash.io/placement"}]
    pod_spec["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    current["spec"]["suspend"] = False
    custom.replace_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", "team-a", "jobsets", "js", current)
    sim.advance(5)
    template = sim.cluster.job("jobs.batch", "team-a", "js-workers-0")["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"kubernetes.io/hostname": "node-0"}
    pods = sim.cluster.pods_of("JobSet", "team-a", "js")
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["schedulingGates"] == [{"name": "jobdash.io/placement"}]
        assert {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
        assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "node-0"}


def test_an_override_the_suspended_jobset_cannot_take_is_an_event_not_a_loop(sim, runtime, custom):
    custom.create_namespaced_custom_object(GROUP, VERSION, "team-a", "trainjobs", trainjob("tj", suspend=True))
    sim.settle()
    affinity = {"targetJobs": [{"name": "node"}], "spec": {"affinity": OVERRIDE["spec"]["affinity"]}}
    patch(custom, "tj", {"spec": {"podTemplateOverrides": [affinity]}})
    sim.advance(30)  # must settle: the refusal is not retried for the same TrainJob spec
    assert "affinity" not in pod_template(sim, "tj")["spec"]
    events = [e for e in sim.cluster.store.items(EVENTS, "team-a") if e["involvedObject"]["name"] == "tj"]
    assert [(e["reason"], e["count"]) for e in events] == [("TrainJobResourcesCreationFailed", 1)]
    assert "spec.replicatedJobs: Invalid value" in events[0]["message"]
