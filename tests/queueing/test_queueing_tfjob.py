"""TFJob validation and the resource demand it reduces to."""

import copy

import pytest
import yaml

from queueing import ManifestError, Workload, parse_job, workload_from_manifest

GI = 2**30
MI = 2**20
WORKER = "spec.tfReplicaSpecs.Worker"
WORKER_SPEC = f"{WORKER}.template.spec"
CONTAINER = f"{WORKER_SPEC}.containers[0]"
RESOURCES = f"{CONTAINER}.resources"
REQUESTS = f"{RESOURCES}.requests"
LIMITS = f"{RESOURCES}.limits"

SINGLE_WORKER_CPU = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: mnist-cpu
  namespace: team-a
  labels: {team: vision}
  annotations: {jobdash.io/expected-duration: "10m"}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: tensorflow
              image: kubeflow/tf-mnist-with-summaries:latest
              command: ["python", "/var/tf_mnist/mnist_with_summaries.py"]
              resources:
                requests: {cpu: "2", memory: 4Gi}
                limits: {cpu: "4", memory: 8Gi}
"""

PS_AND_WORKERS = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist-mnist, namespace: team-a}
spec:
  runPolicy: {cleanPodPolicy: Running, suspend: false}
  tfReplicaSpecs:
    PS:
      replicas: 2
      template:
        spec:
          containers:
            - name: tensorflow
              image: kubeflow/tf-dist-mnist-test:latest
              resources:
                requests: {cpu: 1, memory: 2Gi}
                limits: {cpu: 2, memory: 2Gi}
    Worker:
      replicas: 4
      template:
        spec:
          containers:
            - name: tensorflow
              image: kubeflow/tf-dist-mnist-test:latest
              resources:
                requests: {cpu: 500m, memory: 1536Mi}
                limits: {cpu: 500m, memory: 1536Mi}
            - name: log-shipper
              image: fluent/fluent-bit:3
              resources:
                requests: {cpu: 100m, memory: 64Mi}
"""

CHIEF_AND_GPU_WORKERS = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: resnet50-gpu, namespace: team-b}
spec:
  successPolicy: AllWorkers
  tfReplicaSpecs:
    Worker:
      replicas: 3
      template:
        spec:
          nodeSelector: {pool: gpu}
          tolerations:
            - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.15.0-gpu
              resources:
                requests: {cpu: "16", memory: 64Gi}
                limits: {cpu: "16", memory: 64Gi, nvidia.com/gpu: 4}
    Chief:
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.15.0-gpu
              resources:
                limits: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "1"}
"""


def minimal_tfjob(**worker_pod_spec):
    """A valid one-worker TFJob as a dict; keyword arguments override the pod spec."""
    pod_spec = {
        "containers": [
            {
                "name": "tensorflow",
                "image": "tensorflow/tensorflow:2.15.0",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
            }
        ],
        **worker_pod_spec,
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": pod_spec}}}},
    }


def with_value(manifest, path, value):
    """Copy of ``manifest`` with the dotted ``path`` set (``[i]`` indexes lists; keys without dots)."""
    result = copy.deepcopy(manifest)
    *parents, last = path.replace("[", ".[").split(".")
    target = result
    for part in parents:
        target = target[int(part[1:-1])] if part.startswith("[") else target[part]
    target[last] = value
    return result


def without(manifest, path):
    result = copy.deepcopy(manifest)
    *parents, last = path.split(".")
    target = result
    for part in parents:
        target = target[part]
    del target[last]
    return result


def errors_of(manifest) -> dict[str, str]:
    with pytest.raises(ManifestError) as caught:
        workload_from_manifest(manifest)
    assert caught.value.too_large is False
    return {error.path: error.message for error in caught.value.errors}


# --- realistic manifests -------------------------------------------------------------


def test_single_worker_cpu_job():
    manifest, workload = parse_job(SINGLE_WORKER_CPU)
    assert manifest["metadata"]["name"] == "mnist-cpu"
    assert (workload.kind, workload.api_version, workload.name, workload.namespace) == (
        "TFJob",
        "kubeflow.org/v1",
        "mnist-cpu",
        "team-a",
    )
    assert workload.labels == {"team": "vision"}
    assert workload.annotations == {"jobdash.io/expected-duration": "10m"}
    assert workload.quota_demand() == {
        "requests.cpu": 2000,
        "cpu": 2000,
        "requests.memory": 4 * GI,
        "memory": 4 * GI,
        "limits.cpu": 4000,
        "limits.memory": 8 * GI,
        "pods": 1,
        "count/tfjobs.kubeflow.org": 1,
    }


def test_ps_and_workers_sum_every_container_of_every_pod():
    _, workload = parse_job(PS_AND_WORKERS)
    assert [(p.role, p.count) for p in workload.pod_sets] == [("PS", 2), ("Worker", 4)]
    worker = workload.pod_sets[1]
    assert worker.requests == {"cpu": 600, "memory": 1600 * MI}
    # The sidecar sets no limits, so only the tensorflow container's count.
    assert worker.limits == {"cpu": 500, "memory": 1536 * MI}
    assert workload.pods == 6
    assert workload.requests == {"cpu": 2 * 1000 + 4 * 600, "memory": 2 * 2 * GI + 4 * 1600 * MI}
    assert workload.quota_demand()["limits.cpu"] == 2 * 2000 + 4 * 500


def test_chief_and_gpu_workers():
    _, workload = parse_job(CHIEF_AND_GPU_WORKERS)
    # Reported in the operator's order, not the manifest's.
    assert [(p.role, p.count) for p in workload.pod_sets] == [("Chief", 1), ("Worker", 3)]
    chief, worker = workload.pod_sets
    assert chief.requests == {"cpu": 8000, "memory": 32 * GI, "nvidia.com/gpu": 1}  # limits-only: requests = limits
    assert worker.requests == {"cpu": 16000, "memory": 64 * GI, "nvidia.com/gpu": 4}
    assert worker.node_selector == {"pool": "gpu"}
    assert worker.tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
    assert workload.quota_demand() == {
        "requests.cpu": 8000 + 3 * 16000,
        "cpu": 8000 + 3 * 16000,
        "requests.memory": 32 * GI + 3 * 64 * GI,
        "memory": 32 * GI + 3 * 64 * GI,
        "requests.nvidia.com/gpu": 1 + 3 * 4,
        "limits.cpu": 8000 + 3 * 16000,
        "limits.memory": 32 * GI + 3 * 64 * GI,
        "pods": 4,
        "count/tfjobs.kubeflow.org": 1,
    }


@pytest.mark.parametrize(
    ("name", "pods", "cpu", "memory", "gpus"),
    [
        ("mnist-cpu", 1, 2000, 4 * GI, 0),
        ("dist-ps-worker", 6, 2 * 1000 + 4 * 4000, 2 * 2 * GI + 4 * 8 * GI, 0),
        ("resnet-multi-gpu", 4, 4 * 16000, 4 * 64 * GI, 16),
    ],
)
def test_repository_examples(example_text, name, pods, cpu, memory, gpus):
    demand = parse_job(example_text(name))[1].quota_demand()
    assert (demand["pods"], demand["requests.cpu"], demand["requests.memory"]) == (pods, cpu, memory)
    assert demand.get("requests.nvidia.com/gpu", 0) == gpus


def test_to_json_is_plain_and_round_trips():
    _, workload = parse_job(CHIEF_AND_GPU_WORKERS)
    data = workload.to_json()
    assert yaml.safe_load(yaml.safe_dump(data)) == data  # only plain JSON types inside
    assert data["pods"] == 4
    assert data["requests"]["nvidia.com/gpu"] == 13
    assert data["pod_sets"][0] == {
        "role": "Chief",
        "count": 1,
        "requests": {"cpu": 8000, "memory": 32 * GI, "nvidia.com/gpu": 1},
        "limits": {"cpu": 8000, "memory": 32 * GI, "nvidia.com/gpu": 1},
        "node_selector": {},
        "tolerations": [],
    }
    assert Workload.from_json(data) == workload


def test_workload_is_immutable():
    _, workload = parse_job(SINGLE_WORKER_CPU)
    with pytest.raises(TypeError):
        workload.pod_sets[0].requests["cpu"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        workload.name = "other"  # type: ignore[misc]


# --- pod resource rules --------------------------------------------------------------


def worker_pod(workload):
    assert workload.pod_sets[0].role == "Worker"
    return workload.pod_sets[0]


def test_limits_only_container_requests_its_limits():
    manifest = with_value(minimal_tfjob(), RESOURCES, {"limits": {"cpu": "3", "memory": "2Gi"}})
    assert worker_pod(workload_from_manifest(manifest)).requests == {"cpu": 3000, "memory": 2 * GI}


def test_request_wins_over_limit_when_both_are_set():
    manifest = with_value(minimal_tfjob(), f"{LIMITS}.cpu", "8")
    assert worker_pod(workload_from_manifest(manifest)).requests["cpu"] == 1000


def test_init_containers_count_by_their_maximum_not_their_sum():
    init = [
        {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "3", "memory": "100Mi"}}},
        {"name": "warm", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}},
    ]
    pod = worker_pod(workload_from_manifest(minimal_tfjob(initContainers=init)))
    # cpu: max(app 1, largest init 3) = 3; memory: max(app 1Gi, largest init 2Gi) = 2Gi.
    assert pod.requests == {"cpu": 3000, "memory": 2 * GI}


def test_small_init_containers_change_nothing():
    init = [{"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]
    assert worker_pod(workload_from_manifest(minimal_tfjob(initContainers=init))).requests == {
        "cpu": 1000,
        "memory": GI,
    }


def test_sidecar_init_containers_add_to_the_app_containers():
    init = [
        {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
        {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "1"}}},
    ]
    # The sidecar runs alongside everything: 1 + 0.5 for the app phase,
    # and 1 + 0.5 while "fetch" runs next to it; the pod needs 1.5.
    assert worker_pod(workload_from_manifest(minimal_tfjob(initContainers=init))).requests["cpu"] == 1500


def test_overhead_is_added_to_requests_and_to_set_limits_only():
    manifest = minimal_tfjob(overhead={"cpu": "250m", "memory": "120Mi", "ephemeral-storage": "1Gi"})
    pod = worker_pod(workload_from_manifest(manifest))
    assert pod.requests == {"cpu": 1250, "memory": GI + 120 * MI, "ephemeral-storage": GI}
    assert pod.limits == {"cpu": 2250, "memory": GI + 120 * MI}


def test_ephemeral_storage_reaches_the_quota_keys():
    manifest = with_value(
        minimal_tfjob(), RESOURCES, {"requests": {"ephemeral-storage": "1Gi"}, "limits": {"ephemeral-storage": "2Gi"}}
    )
    demand = workload_from_manifest(manifest).quota_demand()
    assert demand["requests.ephemeral-storage"] == demand["ephemeral-storage"] == 2 * GI
    assert demand["limits.ephemeral-storage"] == 4 * GI
    assert demand["requests.cpu"] == demand["limits.cpu"] == 0


def test_zero_replicas_are_allowed_and_default_is_one():
    assert workload_from_manifest(with_value(minimal_tfjob(), f"{WORKER}.replicas", 0)).pods == 0
    assert workload_from_manifest(without(minimal_tfjob(), f"{WORKER}.replicas")).pods == 1


# --- rejected manifests: exact paths -------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "error_path", "fragment"),
    [
        ("metadata.name", "Bad_Name", "metadata.name", "DNS-1035 label"),
        ("metadata.name", "1train", "metadata.name", "DNS-1035 label"),
        ("metadata.name", "a" * 64, "metadata.name", "at most 63 characters"),
        ("metadata.namespace", "Team A", "metadata.namespace", "DNS-1123 label"),
        ("metadata.labels", {"team": 7}, "metadata.labels.team", "must be a string"),
        ("metadata.annotations", ["a"], "metadata.annotations", "must be a mapping"),
        # The operator renames "worker" to "Worker" before it validates: two spellings clash.
        ("spec.tfReplicaSpecs.worker", {}, "spec.tfReplicaSpecs", "'Worker' and 'worker' are both the Worker"),
        ("spec.tfReplicaSpecs.Launcher", {}, "spec.tfReplicaSpecs.Launcher", "unknown replica type 'Launcher'"),
        ("spec.tfReplicaSpecs", {}, "spec.tfReplicaSpecs", "must define at least one of"),
        (f"{WORKER}.replicas", -1, f"{WORKER}.replicas", "must not be negative"),
        (f"{WORKER}.replicas", 1.5, f"{WORKER}.replicas", "must be an integer, got a number"),
        (f"{WORKER}.replicas", "2", f"{WORKER}.replicas", "must be an integer, got a string"),
        (f"{WORKER}.replicas", True, f"{WORKER}.replicas", "must be an integer, got a boolean"),
        (f"{WORKER}.replicas", 10_001, f"{WORKER}.replicas", "at most 10000"),
        (f"{REQUESTS}.cpu", "lots", f"{REQUESTS}.cpu", "invalid quantity 'lots'"),
        (f"{REQUESTS}.memory", "-1Gi", f"{REQUESTS}.memory", "must not be negative"),
        (f"{LIMITS}.memory", True, f"{LIMITS}.memory", "invalid quantity"),
        (f"{REQUESTS}.gpu", 1, f"{REQUESTS}.gpu", "unknown resource 'gpu'"),
        (RESOURCES, {"limits": {"nvidia.com/gpu": "1.5"}}, f"{LIMITS}.nvidia.com/gpu", "whole number"),
        (RESOURCES, {"requests": {"nvidia.com/gpu": 1}}, f"{LIMITS}.nvidia.com/gpu", "needs a limit"),
        (RESOURCES, {"limits": {"example.com/": 1}}, f"{LIMITS}.example.com/", "invalid resource name"),
        (f"{WORKER_SPEC}.containers", [], f"{WORKER_SPEC}.containers", "at least one container"),
        (f"{WORKER_SPEC}.containers", None, f"{WORKER_SPEC}.containers", "required"),
        (f"{WORKER_SPEC}.containers[0].name", "main", f"{WORKER_SPEC}.containers", "named 'tensorflow'"),
        (f"{WORKER_SPEC}.containers[0].name", "", f"{WORKER_SPEC}.containers[0].name", "required"),
        (f"{WORKER_SPEC}.containers[0].image", "  ", f"{WORKER_SPEC}.containers[0].image", "required"),
        (f"{WORKER_SPEC}.overhead", {"cpu": "x"}, f"{WORKER_SPEC}.overhead.cpu", "invalid quantity 'x'"),
        (f"{WORKER_SPEC}.nodeSelector", {"gpu": True}, f"{WORKER_SPEC}.nodeSelector.gpu", "quote the value"),
        (f"{WORKER_SPEC}.tolerations", {"key": "a"}, f"{WORKER_SPEC}.tolerations", "must be a list"),
        (f"{WORKER_SPEC}.tolerations", ["a"], f"{WORKER_SPEC}.tolerations[0]", "must be a mapping"),
        (
            f"{WORKER_SPEC}.tolerations",
            [{"key": "a", "effct": "NoSchedule"}],
            f"{WORKER_SPEC}.tolerations[0].effct",
            "unknown field",
        ),
        (f"{WORKER}.template", None, f"{WORKER}.template", "required"),
        ("spec.runPolicy", {"suspend": "yes"}, "spec.runPolicy.suspend", "must be true or false"),
        ("spec.successPolicy", "AnyWorker", "spec.successPolicy", "must be '' or 'AllWorkers'"),
    ],
)
def test_rejections_point_at_the_field(path, value, error_path, fragment):
    errors = errors_of(with_value(minimal_tfjob(), path, value))
    assert error_path in errors, errors
    assert fragment in errors[error_path]


def test_missing_name():
    assert errors_of(without(minimal_tfjob(), "metadata.name")) == {
        "metadata.name": "required (or set metadata.generateName)"
    }


@pytest.mark.parametrize("spelling", ["worker", "WORKER", "wOrKeR"])
def test_replica_types_are_case_insensitive_like_the_operators_defaulting(spelling):
    manifest = minimal_tfjob()
    manifest["spec"]["tfReplicaSpecs"] = {
        spelling: manifest["spec"]["tfReplicaSpecs"]["Worker"],
        "ps": {"replicas": 1, "template": manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]},
    }
    workload = workload_from_manifest(manifest)
    assert [(p.role, p.count) for p in workload.pod_sets] == [("PS", 1), ("Worker", 2)]


def test_errors_inside_a_lower_case_replica_type_use_the_key_as_written():
    manifest = minimal_tfjob()
    manifest["spec"]["tfReplicaSpecs"] = {"chief": {**manifest["spec"]["tfReplicaSpecs"]["Worker"], "replicas": 2}}
    assert errors_of(manifest) == {"spec.tfReplicaSpecs.chief.replicas": "must be at most 1 for Chief, got 2"}


def test_missing_metadata_and_spec():
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob"}
    assert errors_of(manifest) == {"metadata": "required", "spec": "required"}


def test_request_above_limit_quotes_the_users_values():
    manifest = with_value(minimal_tfjob(), RESOURCES, {"requests": {"cpu": "8"}, "limits": {"cpu": 4}})
    assert errors_of(manifest) == {f"{REQUESTS}.cpu": "request 8 exceeds limit 4"}


def test_extended_resource_request_must_equal_limit():
    resources = {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}
    errors = errors_of(with_value(minimal_tfjob(), RESOURCES, resources))
    assert errors == {f"{REQUESTS}.nvidia.com/gpu": "request 1 must equal limit 2 for nvidia.com/gpu"}


def test_equal_quantities_in_different_notations_are_not_above_limit():
    resources = {"requests": {"cpu": "1000m", "memory": "1Gi"}, "limits": {"cpu": 1, "memory": str(GI)}}
    assert worker_pod(workload_from_manifest(with_value(minimal_tfjob(), RESOURCES, resources)))


def test_container_names_must_be_unique_across_init_containers():
    init = [{"name": "tensorflow", "image": "busybox"}]
    errors = errors_of(minimal_tfjob(initContainers=init))
    assert errors == {
        f"{WORKER_SPEC}.initContainers[0].name": (
            f"duplicate container name 'tensorflow' (also at {WORKER_SPEC}.containers[0])"
        )
    }


def test_tensorflow_only_as_init_container_does_not_count():
    manifest = minimal_tfjob(initContainers=[{"name": "tensorflow", "image": "busybox"}])
    manifest = with_value(manifest, f"{WORKER_SPEC}.containers[0].name", "main")
    assert f"{WORKER_SPEC}.containers" in errors_of(manifest)


def test_chief_replicas_at_most_one():
    two_replicas = minimal_tfjob()["spec"]["tfReplicaSpecs"]["Worker"]
    manifest = with_value(minimal_tfjob(), "spec.tfReplicaSpecs.Chief", two_replicas)
    assert errors_of(manifest) == {"spec.tfReplicaSpecs.Chief.replicas": "must be at most 1 for Chief, got 2"}


def test_chief_and_master_are_exclusive():
    worker = minimal_tfjob()["spec"]["tfReplicaSpecs"]["Worker"]
    single = {**copy.deepcopy(worker), "replicas": 1}
    manifest = with_value(minimal_tfjob(), "spec.tfReplicaSpecs.Chief", single)
    manifest = with_value(manifest, "spec.tfReplicaSpecs.Master", single)
    assert errors_of(manifest) == {"spec.tfReplicaSpecs": "Chief and Master cannot both be set"}


SUPPORTED = (
    "JAXJob (kubeflow.org/v1), Job (batch/v1), JobSet (jobset.x-k8s.io/v1alpha2), MPIJob (kubeflow.org/v2beta1), "
    "PaddleJob (kubeflow.org/v1), Pod (v1), PyTorchJob (kubeflow.org/v1), TFJob (kubeflow.org/v1), "
    "TrainJob (trainer.kubeflow.org/v1alpha1), XGBoostJob (kubeflow.org/v1)"
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"kind": "CronJob"}, {"kind": f"unsupported kind 'CronJob'; supported: {SUPPORTED}"}),
        (
            {"apiVersion": "kubeflow.org/v2"},
            {"apiVersion": "unsupported apiVersion 'kubeflow.org/v2' for TFJob; supported: kubeflow.org/v1"},
        ),
        ({"kind": None}, {"kind": f"required; supported: {SUPPORTED}"}),
        (
            {"kind": 3, "apiVersion": None},
            {"kind": "must be a string, got an integer", "apiVersion": f"required; supported: {SUPPORTED}"},
        ),
    ],
)
def test_kind_and_api_version(changes, expected):
    manifest = {**minimal_tfjob(), **changes}
    assert errors_of(manifest) == expected


@pytest.mark.parametrize(("document", "described"), [([1, 2], "a list"), ("TFJob", "a string"), (None, "null")])
def test_top_level_must_be_a_mapping(document, described):
    assert errors_of(document) == {"": f"expected a mapping (a Kubernetes object), got {described}"}


def test_all_errors_are_collected_at_once():
    manifest = minimal_tfjob()
    manifest["metadata"]["name"] = "Bad_Name"
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = -3
    evaluator_pod = {"containers": [{"name": "eval"}]}  # no image, no tensorflow container
    manifest["spec"]["tfReplicaSpecs"]["Evaluator"] = {"replicas": 1, "template": {"spec": evaluator_pod}}
    resources = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["cpu"] = "lots"
    resources["limits"]["memory"] = "-1Gi"
    evaluator = "spec.tfReplicaSpecs.Evaluator.template.spec.containers"
    assert set(errors_of(manifest)) == {
        "metadata.name",
        f"{WORKER}.replicas",
        f"{REQUESTS}.cpu",
        f"{LIMITS}.memory",
        f"{evaluator}[0].image",
        evaluator,  # no "tensorflow" container
    }


def test_parse_job_reports_yaml_and_validation_errors_the_same_way():
    with pytest.raises(ManifestError) as caught:
        parse_job(SINGLE_WORKER_CPU.replace("name: mnist-cpu", "name: MNIST"))
    assert [e.path for e in caught.value.errors] == ["metadata.name"]
    with pytest.raises(ManifestError) as caught:
        parse_job(SINGLE_WORKER_CPU + "\nkind: TFJob\n")
    assert [e.path for e in caught.value.errors] == ["kind"]
    with pytest.raises(ManifestError) as caught:
        parse_job(SINGLE_WORKER_CPU, max_bytes=100)
    assert caught.value.too_large
