"""TrainJob (Kubeflow Trainer v2): pods from its runtime's JobSet template."""

import copy

import pytest
import yaml

from queueing import adapter_for, parse_job, workload_from_manifest
from queueing.kinds import TRAINJOB
from tests.queueing.kinds_support import GI, Runtimes, condition, errors_of, shape, with_value

# Trainer's manifests/base/runtimes/torch_distributed.yaml
TORCH_DISTRIBUTED = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-distributed
  labels:
    trainer.kubeflow.org/framework: torch
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
"""

# Trainer's manifests/base/runtimes/deepspeed_distributed.yaml (an MPI runtime)
DEEPSPEED = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: deepspeed-distributed
spec:
  mlPolicy:
    numNodes: 1
    mpi:
      numProcPerNode: 1
      mpiImplementation: OpenMPI
      sshAuthMountPath: /home/mpiuser/.ssh
      runLauncherAsNode: true
  template:
    spec:
      network:
        publishNotReadyAddresses: true
      successPolicy:
        operator: All
        targetReplicatedJobs: [launcher]
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: ghcr.io/kubeflow/trainer/deepspeed-runtime
                      command: [/usr/sbin/sshd]
                      args: [-De, -f, /home/mpiuser/.sshd_config]
        - name: launcher
          dependsOn:
            - {name: node, status: Ready}
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: ghcr.io/kubeflow/trainer/deepspeed-runtime
"""

# Trainer's torchtune llama3.2-1B runtime, shortened: two initializers, then the trainer.
TORCHTUNE = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torchtune-llama3.2-1b
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          template:
            metadata:
              labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}
            spec:
              template:
                spec:
                  containers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
                      resources: {requests: {cpu: "1", memory: 2Gi}}
        - name: model-initializer
          template:
            metadata:
              labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}
            spec:
              template:
                spec:
                  containers:
                    - name: model-initializer
                      image: ghcr.io/kubeflow/trainer/model-initializer
        - name: node
          dependsOn:
            - {name: dataset-initializer, status: Complete}
            - {name: model-initializer, status: Complete}
          template:
            metadata:
              labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: ghcr.io/kubeflow/trainer/torchtune-trainer
                      command: [tune, run, full_finetune_distributed]
                      resources:
                        limits: {nvidia.com/gpu: 2}
"""

# Trainer's examples/yaml/03-kueue-integration.yaml
KUEUE_EXAMPLE = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: kueue-example
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: training-queue
spec:
  runtimeRef:
    apiGroup: trainer.kubeflow.org
    kind: ClusterTrainingRuntime
    name: torch-distributed
  suspend: true
  trainer:
    numNodes: 3
    image: python:3.11-slim
    command: [python3, -c, "print('hello')"]
    resourcesPerNode:
      requests:
        cpu: "2"
        memory: "4Gi"
      limits:
        cpu: "4"
        memory: "8Gi"
"""


def runtimes(*texts):
    return Runtimes(*(yaml.safe_load(t) for t in texts or (TORCH_DISTRIBUTED, DEEPSPEED, TORCHTUNE)))


def kueue_example():
    return yaml.safe_load(KUEUE_EXAMPLE)


def train_job(runtime="torch-distributed", **trainer):
    manifest = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tune", "namespace": "team-a"},
        "spec": {"runtimeRef": {"name": runtime}},
    }
    if trainer:
        manifest["spec"]["trainer"] = trainer
    return manifest


def test_kueue_example_on_torch_distributed():
    source = runtimes()
    _, workload = parse_job(KUEUE_EXAMPLE, runtimes=source)
    assert shape(workload) == [("node", 3, {"cpu": 2000, "memory": 4 * GI})]
    assert dict(workload.pod_sets[0].limits) == {"cpu": 4000, "memory": 8 * GI}
    assert workload.quota_demand()["count/trainjobs.trainer.kubeflow.org"] == 1
    # A ClusterTrainingRuntime is cluster-scoped: no namespace in the lookup.
    assert source.reads == [("ClusterTrainingRuntime", "", "torch-distributed")]


def test_adapter_members():
    assert adapter_for("trainer.kubeflow.org/v1alpha1", "TrainJob") is TRAINJOB
    assert (TRAINJOB.plural, TRAINJOB.suspend_path) == ("trainjobs", ("spec", "suspend"))
    assert TRAINJOB.pod_job_label == "jobset.sigs.k8s.io/jobset-name"
    assert TRAINJOB.pod_role_label == "jobset.sigs.k8s.io/replicatedjob-name"


def test_num_nodes_defaults_to_the_runtimes_ml_policy():
    runtime = with_value(yaml.safe_load(TORCH_DISTRIBUTED), "spec.mlPolicy.numNodes", 2)
    assert shape(workload_from_manifest(train_job(), Runtimes(runtime))) == [("node", 2, {})]


def test_without_any_num_nodes_the_runtime_count_stands():
    runtime = with_value(yaml.safe_load(TORCH_DISTRIBUTED), "spec.mlPolicy", None)
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 2
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] = 2
    assert shape(workload_from_manifest(train_job(), Runtimes(runtime))) == [("node", 2, {})]


def test_initializers_count_as_in_the_runtime_and_resources_merge_key_by_key():
    manifest = train_job(
        "torchtune-llama3.2-1b", numNodes=2, resourcesPerNode={"limits": {"cpu": "8", "nvidia.com/gpu": 4}}
    )
    workload = workload_from_manifest(manifest, runtimes())
    assert shape(workload) == [
        ("dataset-initializer", 1, {"cpu": 1000, "memory": 2 * GI}),
        ("model-initializer", 1, {}),
        ("node", 2, {"cpu": 8000, "nvidia.com/gpu": 4}),
    ]


def test_the_runtimes_own_resources_stay_where_the_trainjob_says_nothing():
    manifest = train_job("torchtune-llama3.2-1b", resourcesPerNode={"requests": {"cpu": "4", "memory": "16Gi"}})
    node = workload_from_manifest(manifest, runtimes()).pod_sets[-1]
    assert (node.count, dict(node.requests)) == (1, {"cpu": 4000, "memory": 16 * GI, "nvidia.com/gpu": 2})


def test_mpi_runtime_with_the_launcher_as_a_node():
    manifest = train_job("deepspeed-distributed", numNodes=3, resourcesPerNode={"requests": {"cpu": "2"}})
    workload = workload_from_manifest(manifest, runtimes())
    # numNodes 3 = the launcher + 2 nodes; both run the trainer's resources.
    assert shape(workload) == [("node", 2, {"cpu": 2000}), ("launcher", 1, {"cpu": 2000})]


def test_training_runtime_is_read_from_the_trainjobs_namespace():
    runtime = yaml.safe_load(TORCH_DISTRIBUTED)
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"]["namespace"] = "team-a"
    source = Runtimes(runtime)
    manifest = with_value(train_job(numNodes=2), "spec.runtimeRef.kind", "TrainingRuntime")
    assert workload_from_manifest(manifest, source).pods == 2
    assert source.reads == [("TrainingRuntime", "team-a", "torch-distributed")]


def test_trainer_image_fills_a_runtime_without_one():
    runtime = yaml.safe_load(TORCH_DISTRIBUTED)
    del runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][
        0
    ]["image"]
    assert workload_from_manifest(train_job(image="python:3.12"), Runtimes(runtime)).pods == 1


def test_trainer_found_by_name_when_unlabelled():
    runtime = yaml.safe_load(TORCH_DISTRIBUTED)
    del runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["metadata"]
    assert workload_from_manifest(train_job(numNodes=4), Runtimes(runtime)).pods == 4


# --- refusals ------------------------------------------------------------------------


def test_missing_runtime_names_it_and_its_kind():
    assert errors_of(train_job("no-such-runtime"), runtimes()) == {
        "spec.runtimeRef.name": "ClusterTrainingRuntime 'no-such-runtime' not found: create it before the TrainJob"
    }
    manifest = with_value(train_job("torch-distributed"), "spec.runtimeRef.kind", "TrainingRuntime")
    assert errors_of(manifest, runtimes()) == {
        "spec.runtimeRef.name": (
            "TrainingRuntime 'torch-distributed' not found in namespace 'team-a': create it before the TrainJob"
        )
    }


def test_without_a_runtime_source_the_runtime_cannot_be_read():
    assert errors_of(train_job()) == {
        "spec.runtimeRef.name": (
            "ClusterTrainingRuntime 'torch-distributed' cannot be read here, and the TrainJob's pods come from it"
        )
    }


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("spec.runtimeRef", None, {"spec.runtimeRef": "required"}),
        ("spec.runtimeRef.name", "", {"spec.runtimeRef.name": "required: the ClusterTrainingRuntime to run"}),
        (
            "spec.runtimeRef.kind",
            "Runtime",
            {"spec.runtimeRef.kind": "must be one of 'ClusterTrainingRuntime', 'TrainingRuntime', got 'Runtime'"},
        ),
        (
            "spec.runtimeRef.apiGroup",
            "kubeflow.org",
            {"spec.runtimeRef.apiGroup": "must be one of 'trainer.kubeflow.org', got 'kubeflow.org'"},
        ),
        ("spec.trainer.numNodes", -1, {"spec.trainer.numNodes": "must not be negative, got -1"}),
        ("spec.trainer.numNodes", "3", {"spec.trainer.numNodes": "must be an integer, got a string"}),
        (
            "spec.trainer.resourcesPerNode.requests.cpu",
            "lots",
            {
                "spec.trainer.resourcesPerNode.requests.cpu": (
                    "invalid quantity 'lots': expected a number with an optional suffix such as 500m, 2, 1.5Gi or 1e3"
                )
            },
        ),
        (
            "spec.trainer.resourcesPerNode.requests.cpu",
            "8",
            {"spec.trainer.resourcesPerNode.requests.cpu": "request 8 exceeds limit 4"},
        ),
        (
            "spec.managedBy",
            "example.com/mine",
            {
                "spec.managedBy": (
                    "must be one of 'trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue', "
                    "got 'example.com/mine'"
                )
            },
        ),
        ("spec.suspend", "true", {"spec.suspend": "must be true or false, got a string"}),
        ("metadata.name", "Kueue", None),
    ],
)
def test_rejections(path, value, expected):
    errors = errors_of(with_value(kueue_example(), path, value), runtimes())
    if expected is None:
        assert list(errors) == [path]
    else:
        assert errors == expected


def test_resources_that_clash_with_the_runtimes_are_blamed_on_the_trainjob():
    # torchtune's node container limits nvidia.com/gpu to 2; a request of 4 cannot be.
    manifest = train_job("torchtune-llama3.2-1b", resourcesPerNode={"requests": {"nvidia.com/gpu": 4}})
    assert errors_of(manifest, runtimes()) == {
        "spec.trainer.resourcesPerNode.requests.nvidia.com/gpu": "request 4 must equal limit 2 for nvidia.com/gpu"
    }


def test_a_broken_runtime_is_blamed_on_the_reference():
    runtime = yaml.safe_load(TORCH_DISTRIBUTED)
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert errors_of(train_job(), Runtimes(runtime)) == {
        "spec.runtimeRef.name": (
            "ClusterTrainingRuntime 'torch-distributed' is not usable: spec.template.spec.replicatedJobs[0]"
            ".template.spec.template.spec.restartPolicy: required: OnFailure or Never "
            "(a Job's pods must finish; Always is the pods' default)"
        )
    }
    empty = with_value(copy.deepcopy(runtime), "spec.template", None)
    assert errors_of(train_job(), Runtimes(empty)) == {
        "spec.runtimeRef.name": "ClusterTrainingRuntime 'torch-distributed' has no spec.template.spec.replicatedJobs"
    }


def test_num_nodes_needs_a_trainer_in_the_runtime():
    runtime = yaml.safe_load(TORCHTUNE)
    runtime["spec"]["template"]["spec"]["replicatedJobs"].pop()  # no trainer left
    assert errors_of(train_job("torchtune-llama3.2-1b", numNodes=2), Runtimes(runtime)) == {
        "spec.trainer.numNodes": "ClusterTrainingRuntime 'torchtune-llama3.2-1b' has no trainer replicatedJob"
    }


def test_the_jobset_named_as_the_trainjob_must_have_valid_job_names():
    manifest = with_value(train_job(numNodes=2), "metadata.name", "t" * 58)
    errors = errors_of(manifest, runtimes())
    assert list(errors) == ["metadata.name"]
    assert errors["metadata.name"].startswith(f"too long for its JobSet: the Job name '{'t' * 58}-node-0'")


@pytest.mark.parametrize(
    ("conditions", "phase"),
    [
        ([], ""),
        ([condition("Created")], "Created"),
        ([condition("Suspended", "True")], "Suspended"),
        ([condition("Suspended", "False"), condition("Complete")], "Succeeded"),
        ([condition("Failed", message="DeadlineExceeded")], "Failed"),
    ],
)
def test_status(conditions, phase):
    assert TRAINJOB.status({"status": {"conditions": conditions}}).phase == phase
