"""Workload arithmetic, quota keys and the adapter registry, independent of TFJob."""

import pickle

import pytest

import queueing
from queueing import (
    ADAPTERS,
    BY_KEY,
    FieldError,
    JobStatus,
    ManifestError,
    PodSet,
    Workload,
    register,
    workload_from_manifest,
)

GI = 2**30


def batch_job(pod_sets):
    return Workload(kind="Job", api_version="batch/v1", name="etl", namespace=None, pod_sets=pod_sets)


def test_totals_multiply_per_pod_amounts_by_count():
    workload = batch_job(
        (
            PodSet("driver", 1, requests={"cpu": 500, "memory": GI}, limits={"cpu": 1000}),
            PodSet("executor", 10, requests={"cpu": 2000, "example.com/fpga": 1}),
            PodSet("idle", 0, requests={"cpu": 9000}),
        )
    )
    assert workload.pods == 11
    assert workload.requests == {"cpu": 500 + 10 * 2000, "memory": GI, "example.com/fpga": 10}
    assert workload.limits == {"cpu": 1000}


def test_quota_demand_keys_follow_resource_quota_naming():
    workload = batch_job(
        (
            PodSet(
                "worker",
                2,
                requests={"cpu": 100, "ephemeral-storage": 5, "hugepages-2Mi": 4 * 2**20, "example.com/fpga": 1},
                limits={"ephemeral-storage": 7, "hugepages-2Mi": 4 * 2**20, "example.com/fpga": 1},
            ),
        )
    )
    assert workload.quota_demand() == {
        "requests.cpu": 200,
        "cpu": 200,
        "requests.memory": 0,  # cpu and memory keys are always present
        "memory": 0,
        "requests.ephemeral-storage": 10,
        "ephemeral-storage": 10,
        "requests.hugepages-2Mi": 8 * 2**20,
        "requests.example.com/fpga": 2,
        "limits.cpu": 0,
        "limits.memory": 0,
        "limits.ephemeral-storage": 14,
        "pods": 2,
        "count/jobs.batch": 1,  # the registered adapter's key: plural.group
    }
    assert "count/jobs.batch" not in workload.quota_demand(count_object=False)


def test_a_kind_no_adapter_knows_has_no_guessed_count_key():
    workload = Workload(kind="Notebook", api_version="kubeflow.org/v1", name="n", namespace="ns", pod_sets=())
    assert not [key for key in workload.quota_demand() if key.startswith("count/")]


def test_pod_set_is_deeply_read_only():
    pod_set = PodSet("w", 1, requests={"cpu": 1}, tolerations=({"key": "a"},))
    with pytest.raises(TypeError):
        pod_set.requests["cpu"] = 2  # type: ignore[index]
    with pytest.raises(TypeError):
        pod_set.tolerations[0]["key"] = "b"  # type: ignore[index]


class EchoAdapter:
    """A stand-in kind: every manifest becomes one pod."""

    api_version = "example.com/v1alpha1"
    kind = "Echo"
    plural = "echoes"
    suspend_path = ("spec", "suspend")
    pod_job_label = "example.com/echo"
    pod_role_label = ""

    def status(self, obj):
        return JobStatus("")

    def validate_and_build(self, manifest, runtimes=None):
        if "name" not in manifest:
            raise ManifestError([FieldError("name", "required")])
        return Workload(self.kind, self.api_version, manifest["name"], None, (PodSet("main", 1, {"cpu": 10}),))


@pytest.fixture
def echo_registered():
    adapter = register(EchoAdapter())
    yield adapter
    ADAPTERS.pop((adapter.api_version, adapter.kind))
    BY_KEY.pop("echoes.example.com")


def test_registered_adapter_receives_its_manifests(echo_registered):
    assert ADAPTERS[("example.com/v1alpha1", "Echo")] is echo_registered
    workload = workload_from_manifest({"apiVersion": "example.com/v1alpha1", "kind": "Echo", "name": "hi"})
    assert workload.name == "hi"
    assert workload.quota_demand()["count/echoes.example.com"] == 1


def test_adapter_errors_pass_through_unchanged(echo_registered):
    with pytest.raises(ManifestError) as caught:
        workload_from_manifest({"apiVersion": "example.com/v1alpha1", "kind": "Echo"})
    assert caught.value.errors == [FieldError("name", "required")]


def test_unknown_kind_lists_every_supported_kind(echo_registered):
    with pytest.raises(ManifestError) as caught:
        workload_from_manifest({"apiVersion": "apps/v1", "kind": "Deployment"})
    message = caught.value.errors[0].message
    assert "TFJob (kubeflow.org/v1)" in message and "Echo (example.com/v1alpha1)" in message


def test_register_refuses_objects_that_are_not_adapters():
    with pytest.raises(TypeError, match="JobAdapter"):
        register(object())  # type: ignore[arg-type]


def test_tfjob_is_registered_on_import():
    assert ("kubeflow.org/v1", "TFJob") in ADAPTERS
    assert ADAPTERS[("kubeflow.org/v1", "TFJob")].plural == "tfjobs"


def test_manifest_error_survives_pickling():
    error = pickle.loads(pickle.dumps(ManifestError([FieldError("a.b", "bad")], too_large=True)))
    assert error.errors == [FieldError("a.b", "bad")]
    assert error.too_large is True
    assert str(error) == "a.b: bad"


def test_public_names_are_exported():
    for name in (
        "load_document",
        "workload_from_manifest",
        "Workload",
        "PodSet",
        "FieldError",
        "ManifestError",
        "parse_quantity",
        "canonical",
        "format_quantity",
        "parse_job",
    ):
        assert name in queueing.__all__
        assert getattr(queueing, name) is not None
