"""Every controller that makes pods from a template carries the template's schedulingGates,
nodeSelector, affinity and tolerations to its pods; removing a pod's gate (jobdash's merge
patch) lets the scheduler bind it where the template's selector says."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client

from kubesim.testing import (
    batch_job_manifest,
    jaxjob_manifest,
    jobset_manifest,
    mpijob_manifest,
    paddlejob_manifest,
    pytorchjob_manifest,
    tfjob_manifest,
    training_runtime_manifest,
    trainjob_manifest,
    xgboostjob_manifest,
)
from tests.kubesim.conftest import BASE_CONFIG

GATE = "jobdash.io/placement"
CONFIG = {
    **BASE_CONFIG,
    "nodes": [
        {
            "prefix": "node",
            "count": 3,
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "labels": {"zone": "z1"},
        },
        {
            "prefix": "other",
            "count": 1,
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "labels": {"zone": "z2"},
        },
    ],
    "namespaces": [{"name": "team-a"}],
}
SCHEDULING = {
    "schedulingGates": [{"name": GATE}],
    "nodeSelector": {"kubernetes.io/hostname": "node-2"},
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]
            }
        }
    },
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


@pytest.fixture
def config():
    return CONFIG


def scheduled(manifest: dict) -> dict:
    """The manifest with SCHEDULING in every pod template it holds."""
    manifest = copy.deepcopy(manifest)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            template = node.get("template")
            if isinstance(template, dict) and isinstance((template.get("spec") or {}).get("containers"), list):
                template["spec"].update(copy.deepcopy(SCHEDULING))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(manifest)
    return manifest


def check_gated_then_release(sim, core: client.CoreV1Api, kind: str, name: str, expected: int) -> None:
    sim.advance(10)
    pods = sim.cluster.pods_of(kind, "team-a", name)
    assert len(pods) == expected
    for pod in pods:
        spec = pod["spec"]
        assert spec["schedulingGates"] == [{"name": GATE}], pod["metadata"]["name"]
        assert spec["nodeSelector"] == SCHEDULING["nodeSelector"]
        assert spec["affinity"] == SCHEDULING["affinity"]
        assert SCHEDULING["tolerations"][0] in spec["tolerations"]
        assert not spec.get("nodeName") and pod["status"]["conditions"][0]["reason"] == "SchedulingGated"
    for pod in pods:
        core.patch_namespaced_pod(
            pod["metadata"]["name"],
            "team-a",
            {"spec": {"schedulingGates": None}},
            _content_type="application/merge-patch+json",
        )
    sim.advance(10)
    pods = sim.cluster.pods_of(kind, "team-a", name)
    assert len(pods) == expected
    assert {p["spec"].get("nodeName") for p in pods} == {"node-2"}
    assert {p["status"]["phase"] for p in pods} == {"Running"}


@pytest.mark.parametrize(
    ("builder", "kind", "expected"),
    [
        (lambda: tfjob_manifest("j", "team-a", workers=2, ps=1), "TFJob", 3),
        (lambda: pytorchjob_manifest("j", "team-a", workers=2), "PyTorchJob", 3),
        (lambda: xgboostjob_manifest("j", "team-a", workers=1), "XGBoostJob", 2),
        (lambda: paddlejob_manifest("j", "team-a", workers=2), "PaddleJob", 2),
        (lambda: jaxjob_manifest("j", "team-a", workers=2), "JAXJob", 2),
    ],
)
def test_training_operator_kinds(sim, core, builder, kind, expected):
    sim.cluster.create(scheduled(builder()))
    check_gated_then_release(sim, core, kind, "j", expected)


def test_mpijob_workers_and_launcher(sim, core):
    # launcherCreationPolicy AtStartup (the default): the launcher Job's pod is there from the start.
    sim.cluster.create(scheduled(mpijob_manifest("mpi", "team-a", workers=2)))
    check_gated_then_release(sim, core, "MPIJob", "mpi", 3)
    names = [p["metadata"]["name"] for p in sim.cluster.pods_of("MPIJob", "team-a", "mpi")]
    assert names[0].startswith("mpi-launcher-") and names[1:] == ["mpi-worker-0", "mpi-worker-1"]


@pytest.mark.parametrize("indexed", [False, True])
def test_batch_jobs(sim, core, indexed):
    sim.cluster.create(scheduled(batch_job_manifest("bj", "team-a", parallelism=2, completions=2, indexed=indexed)))
    check_gated_then_release(sim, core, "Job", "bj", 2)


def test_jobset_child_jobs(sim, core):
    sim.cluster.create(scheduled(jobset_manifest("js", "team-a", jobs=2, workers=2)))
    check_gated_then_release(sim, core, "JobSet", "js", 4)


def test_trainjob_from_a_gated_runtime(sim, core):
    sim.cluster.create(scheduled(training_runtime_manifest("gated-runtime", "team-a", num_nodes=2)))
    sim.cluster.create(trainjob_manifest("tj", "team-a", runtime="gated-runtime", runtime_kind="TrainingRuntime"))
    check_gated_then_release(sim, core, "TrainJob", "tj", 2)
