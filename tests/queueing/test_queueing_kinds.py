"""The registry of kinds: every adapter keeps the JobAdapter contract, and the repository's
examples of every kind parse and fit the demo quota."""

from pathlib import Path

import pytest
import yaml

import queueing
from queueing import ADAPTERS, BY_KEY, JobAdapter, adapter_by_key, adapter_key, capabilities, parse_job, resource_key
from queueing.workload import RuntimeSource
from tests.queueing.kinds_support import GI, Runtimes
from tests.queueing.test_queueing_trainjob import TORCH_DISTRIBUTED

EXPECTED = {
    ("kubeflow.org/v1", "TFJob"): "tfjobs.kubeflow.org",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjobs.kubeflow.org",
    ("kubeflow.org/v1", "XGBoostJob"): "xgboostjobs.kubeflow.org",
    ("kubeflow.org/v1", "PaddleJob"): "paddlejobs.kubeflow.org",
    ("kubeflow.org/v1", "JAXJob"): "jaxjobs.kubeflow.org",
    ("kubeflow.org/v2beta1", "MPIJob"): "mpijobs.kubeflow.org",
    ("batch/v1", "Job"): "jobs.batch",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobsets.jobset.x-k8s.io",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "trainjobs.trainer.kubeflow.org",
}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# jobdash/embedded/embedded_cluster.yaml: the demo namespace the examples are for
TEAM_A = {"cpu": 64_000, "memory": 256 * GI, "nvidia.com/gpu": 16}


def test_importing_queueing_registers_every_kind():
    assert {key: resource_key(ADAPTERS[key]) for key in EXPECTED} == EXPECTED
    assert set(BY_KEY) >= set(EXPECTED.values())


@pytest.mark.parametrize(("pair", "key"), sorted(EXPECTED.items()))
def test_adapters_keep_the_contract(pair, key):
    adapter = ADAPTERS[pair]
    assert isinstance(adapter, JobAdapter)
    assert (adapter.api_version, adapter.kind) == pair
    assert adapter_by_key(key) is adapter
    assert adapter_key(*pair) == key
    assert adapter.suspend_path[0] == "spec" and adapter.suspend_path[-1] == "suspend"
    assert adapter.pod_job_label
    assert capabilities.role_label(adapter) is None or capabilities.role_label(adapter)
    assert adapter.status({}).phase in queueing.PHASES


def test_old_module_paths_are_gone():
    # queueing.tfjob and queueing.kubeflow became queueing.kinds (see queueing/kinds/).
    with pytest.raises(ImportError):
        __import__("queueing.tfjob")
    with pytest.raises(ImportError):
        __import__("queueing.kubeflow")


def test_runtimes_helper_is_a_runtime_source():
    source: RuntimeSource = Runtimes()
    assert source.runtime("ClusterTrainingRuntime", "", "x") is None


def example_names():
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("name", example_names())
def test_every_example_parses_and_fits_team_a(name):
    text = (EXAMPLES / f"{name}.yaml").read_text()
    manifest, workload = parse_job(text, runtimes=Runtimes(yaml.safe_load(TORCH_DISTRIBUTED)))
    assert workload.pods > 0
    if manifest["metadata"].get("namespace") == "team-a":
        assert all(workload.requests.get(resource, 0) <= limit for resource, limit in TEAM_A.items()), workload.requests


NEW_EXAMPLES = {
    "pytorch-ddp": ("PyTorchJob", [("Master", 1), ("Worker", 3)]),
    "mpi-horovod": ("MPIJob", [("Launcher", 1), ("Worker", 2)]),
    "batch-job": ("Job", [("main", 1)]),
    "batch-indexed": ("Job", [("main", 4)]),
    "jobset": ("JobSet", [("driver", 1), ("workers", 4)]),
    "trainjob": ("TrainJob", [("node", 2)]),
    "xgboost": ("XGBoostJob", [("Master", 1), ("Worker", 2)]),
    "paddle": ("PaddleJob", [("Worker", 2)]),
    "jax": ("JAXJob", [("Worker", 2)]),
}


@pytest.mark.parametrize(("name", "expected"), sorted(NEW_EXAMPLES.items()))
def test_one_example_per_kind(name, expected):
    manifest, workload = parse_job(
        (EXAMPLES / f"{name}.yaml").read_text(), runtimes=Runtimes(yaml.safe_load(TORCH_DISTRIBUTED))
    )
    assert (workload.kind, [(p.role, p.count) for p in workload.pod_sets]) == expected
    assert workload.namespace == "team-a"
    assert float(manifest["metadata"]["annotations"]["kubesim.io/duration-seconds"]) > 0
