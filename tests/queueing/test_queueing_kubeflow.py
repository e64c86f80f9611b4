"""The training-operator family beyond TFJob: PyTorchJob, XGBoostJob, PaddleJob, JAXJob
(release-1.9's defaulting and webhooks), and the rules every member shares."""

import pytest
import yaml

from queueing import ManifestError, Workload, adapter_for, parse_job, workload_from_manifest
from queueing.kinds import FAMILY, PYTORCHJOB
from tests.queueing.kinds_support import GI, condition, container, errors_of, shape, with_value

# training-operator examples/pytorch/simple.yaml, with resources
PYTORCH_SIMPLE = """
apiVersion: "kubeflow.org/v1"
kind: PyTorchJob
metadata:
  name: pytorch-simple
  namespace: kubeflow
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              imagePullPolicy: Always
              command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
              resources: {requests: {cpu: "2", memory: 4Gi}}
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
              imagePullPolicy: Always
              command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
              resources:
                requests: {cpu: "4", memory: 8Gi}
                limits: {nvidia.com/gpu: 1}
"""

# training-operator examples/pytorch/elastic/imagenet/imagenet.yaml
PYTORCH_ELASTIC = """
apiVersion: "kubeflow.org/v1"
kind: PyTorchJob
metadata:
  name: elastic-example-imagenet
spec:
  elasticPolicy:
    rdzvBackend: c10d
    minReplicas: 1
    maxReplicas: 3
    maxRestarts: 100
    metrics:
      - type: Resource
        resource:
          name: cpu
          target: {type: Utilization, averageUtilization: 80}
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: kubeflow/pytorch-elastic-example-imagenet:latest
              imagePullPolicy: IfNotPresent
              resources:
                requests:
                  cpu: 4
              command: [python, -m, torch.distributed.run, /workspace/examples/imagenet.py]
"""

# training-operator examples/xgboost/xgboostjob.yaml
XGBOOST = """
apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata:
  name: xgboost-dist-iris-test-train
spec:
  xgbReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: xgboost
            image: docker.io/kubeflow/xgboost-dist-iris:latest
            ports: [{containerPort: 9991, name: xgboostjob-port}]
            args: [--job_type=Train, --n_estimators=10]
            resources: {requests: {cpu: 500m, memory: 1Gi}}
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template:
        spec:
          containers:
          - name: xgboost
            image: docker.io/kubeflow/xgboost-dist-iris:latest
            ports: [{containerPort: 9991, name: xgboostjob-port}]
            resources: {requests: {cpu: "1", memory: 2Gi}}
"""

# training-operator examples/paddlepaddle/simple-cpu.yaml
PADDLE = """
apiVersion: "kubeflow.org/v1"
kind: PaddleJob
metadata:
  name: paddle-simple-cpu
  namespace: kubeflow
spec:
  paddleReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: paddle
              image: registry.baidubce.com/paddlepaddle/paddle:2.4.0rc0-cpu
              command: [python]
              args: ["-m", paddle.distributed.launch, "run_check"]
              ports: [{containerPort: 37777, name: master}]
              resources: {requests: {cpu: "2", memory: 2Gi}}
"""

# training-operator examples/jax/cpu-demo/demo.yaml
JAX = """
apiVersion: "kubeflow.org/v1"
kind: JAXJob
metadata:
  name: jaxjob-simple
  namespace: kubeflow
spec:
  jaxReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: jax
              image: docker.io/kubeflow/jaxjob-simple:latest
              command: ["python3", "train.py"]
              resources: {limits: {cpu: "1", memory: 1Gi}}
"""


def pytorch():
    return yaml.safe_load(PYTORCH_SIMPLE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            PYTORCH_SIMPLE,
            [
                ("Master", 1, {"cpu": 2000, "memory": 4 * GI}),
                ("Worker", 3, {"cpu": 4000, "memory": 8 * GI, "nvidia.com/gpu": 1}),
            ],
        ),
        # Elastic: the job asks its replicas; it may start with minReplicas (the pod set's minimum).
        (PYTORCH_ELASTIC, [("Worker", 2, {"cpu": 4000})]),
        (XGBOOST, [("Master", 1, {"cpu": 500, "memory": GI}), ("Worker", 2, {"cpu": 1000, "memory": 2 * GI})]),
        (PADDLE, [("Worker", 2, {"cpu": 2000, "memory": 2 * GI})]),
        (JAX, [("Worker", 2, {"cpu": 1000, "memory": GI})]),
    ],
)
def test_upstream_examples(text, expected):
    _, workload = parse_job(text)
    assert shape(workload) == expected
    assert workload.pods == sum(count for _, count, _ in expected)


def test_quota_count_key_per_kind():
    demand = parse_job(XGBOOST)[1].quota_demand()
    assert demand["count/xgboostjobs.kubeflow.org"] == 1
    assert demand["requests.cpu"] == 500 + 2 * 1000


@pytest.mark.parametrize(
    ("kind", "plural", "field", "container_name"),
    [
        ("TFJob", "tfjobs", "tfReplicaSpecs", "tensorflow"),
        ("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "pytorch"),
        ("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", "xgboost"),
        ("PaddleJob", "paddlejobs", "paddleReplicaSpecs", "paddle"),
        ("JAXJob", "jaxjobs", "jaxReplicaSpecs", "jax"),
    ],
)
def test_the_family_table(kind, plural, field, container_name):
    adapter = adapter_for("kubeflow.org/v1", kind)
    assert adapter in FAMILY
    assert (adapter.plural, adapter.replica_specs_field, adapter.container_name) == (plural, field, container_name)
    assert adapter.suspend_path == ("spec", "runPolicy", "suspend")
    assert adapter.pod_job_label == "training.kubeflow.org/job-name"
    assert adapter.pod_role_label == "training.kubeflow.org/replica-type"


def minimal(kind, field, types, container_name, replicas=1):
    spec = {t: {"replicas": replicas, "template": {"spec": {"containers": [container(container_name)]}}} for t in types}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "job"}, "spec": {field: spec}}


MINIMAL = {
    "PyTorchJob": minimal("PyTorchJob", "pytorchReplicaSpecs", ["Master", "Worker"], "pytorch"),
    "XGBoostJob": minimal("XGBoostJob", "xgbReplicaSpecs", ["Master", "Worker"], "xgboost"),
    "PaddleJob": minimal("PaddleJob", "paddleReplicaSpecs", ["Master", "Worker"], "paddle"),
    "JAXJob": minimal("JAXJob", "jaxReplicaSpecs", ["Worker"], "jax"),
}
PT = "spec.pytorchReplicaSpecs"
XGB = "spec.xgbReplicaSpecs"


@pytest.mark.parametrize(
    ("kind", "path", "value", "expected"),
    [
        # the webhooks' replica rules
        ("PyTorchJob", f"{PT}.Master.replicas", 2, {f"{PT}.Master.replicas": "must be 1 for Master, got 2"}),
        ("PyTorchJob", f"{PT}.Master.replicas", 0, {f"{PT}.Master.replicas": "must be 1 for Master, got 0"}),
        ("PyTorchJob", f"{PT}.Worker.replicas", 0, {f"{PT}.Worker.replicas": "must be at least 1 for Worker, got 0"}),
        ("PyTorchJob", f"{PT}.Worker.replicas", -2, {f"{PT}.Worker.replicas": "must not be negative, got -2"}),
        ("XGBoostJob", f"{XGB}.Master", None, {f"{XGB}.Master": "required: XGBoostJob needs a Master"}),
        ("XGBoostJob", f"{XGB}.Master.replicas", 3, {f"{XGB}.Master.replicas": "must be 1 for Master, got 3"}),
        (
            "PaddleJob",
            "spec.paddleReplicaSpecs.Master.replicas",
            2,
            {"spec.paddleReplicaSpecs.Master.replicas": "must be at most 1 for Master, got 2"},
        ),
        # replica types
        (
            "JAXJob",
            "spec.jaxReplicaSpecs.Master",
            {},
            {"spec.jaxReplicaSpecs.Master": "unknown replica type 'Master'; expected one of Worker"},
        ),
        (
            "PyTorchJob",
            f"{PT}.PS",
            {},
            {f"{PT}.PS": "unknown replica type 'PS'; expected one of Master, Worker"},
        ),
        (
            "PyTorchJob",
            f"{PT}.MASTER",
            {"replicas": 1},
            {
                f"{PT}.MASTER": "unknown replica type 'MASTER'; PyTorchJob's replica types are case-sensitive: "
                "did you mean 'Master'?"
            },
        ),
        # the default container must be in every replica type's pods
        (
            "PaddleJob",
            "spec.paddleReplicaSpecs.Worker.template.spec.containers[0].name",
            "main",
            {
                "spec.paddleReplicaSpecs.Worker.template.spec.containers": (
                    "must include a container named 'paddle' (the operator runs that one)"
                )
            },
        ),
        (
            "JAXJob",
            "spec.jaxReplicaSpecs.Worker.template.spec.containers",
            [],
            {"spec.jaxReplicaSpecs.Worker.template.spec.containers": "must contain at least one container"},
        ),
        # runPolicy.managedBy: a job the training-operator would not run
        (
            "XGBoostJob",
            "spec.runPolicy",
            {"managedBy": "example.com/other"},
            {
                "spec.runPolicy.managedBy": (
                    "must be one of 'kubeflow.org/training-operator', 'kueue.x-k8s.io/multikueue', "
                    "got 'example.com/other'"
                )
            },
        ),
        (
            "JAXJob",
            "spec.runPolicy",
            {"suspend": 1},
            {"spec.runPolicy.suspend": "must be true or false, got an integer"},
        ),
    ],
)
def test_rejections(kind, path, value, expected):
    assert errors_of(with_value(MINIMAL[kind], path, value)) == expected


@pytest.mark.parametrize("managed_by", ["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"])
def test_managed_by_the_operator_or_multikueue(managed_by):
    manifest = with_value(MINIMAL["PyTorchJob"], "spec.runPolicy", {"managedBy": managed_by, "suspend": True})
    assert workload_from_manifest(manifest).pods == 2


def lower_cased(kind):
    manifest = MINIMAL[kind] if kind in MINIMAL else TFJOB_PS_WORKER
    field = next(iter(manifest["spec"]))
    renamed = {key.lower(): spec for key, spec in manifest["spec"][field].items()}
    return manifest, field, with_value(manifest, f"spec.{field}", renamed)


TFJOB_PS_WORKER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "dist", "namespace": "team-a"},
    "spec": {
        "tfReplicaSpecs": {
            t: {"replicas": 1, "template": {"spec": {"containers": [container("tensorflow")]}}}
            for t in ("PS", "Worker")
        }
    },
}


def test_tfjob_replica_types_in_any_case_are_renamed_like_the_operator_does():
    """TFJob's webhook lists no valid types; the operator's defaulting renames them."""
    manifest, field, lower = lower_cased("TFJob")
    assert [p.role for p in workload_from_manifest(lower).pod_sets] == list(manifest["spec"][field])


@pytest.mark.parametrize("kind", sorted(set(MINIMAL) - {"TFJob"}))
def test_other_kinds_replica_types_are_case_sensitive_as_their_webhooks_are(kind):
    """release-1.9's utils.ValidateReplicaSpecs compares them exactly, before any defaulting."""
    _manifest, field, lower = lower_cased(kind)
    with pytest.raises(ManifestError) as refused:
        workload_from_manifest(lower)
    assert any(e.path.startswith(f"spec.{field}.") and "case-sensitive" in e.message for e in refused.value.errors)


def test_pytorch_master_replicas_default_to_one():
    manifest = with_value(MINIMAL["PyTorchJob"], f"{PT}.Master.replicas", None)
    assert shape(workload_from_manifest(manifest))[0][:2] == ("Master", 1)


# --- PyTorchJob elasticPolicy --------------------------------------------------------


def elastic(policy, workers=2):
    manifest = with_value(MINIMAL["PyTorchJob"], "spec.elasticPolicy", policy)
    return with_value(manifest, f"{PT}.Worker.replicas", workers)


@pytest.mark.parametrize(
    ("policy", "workers", "low", "high"),
    [
        ({"minReplicas": 2, "maxReplicas": 4}, 3, 2, 4),
        ({"minReplicas": 3}, 3, 3, 3),  # max defaults to min
        ({"maxReplicas": 2}, 2, 2, 2),  # min defaults to max
        ({"rdzvBackend": "c10d"}, 4, 4, 4),  # both default to the Worker replicas
    ],
)
def test_elastic_worker_asks_its_replicas_within_its_range(policy, workers, low, high):
    workload = workload_from_manifest(elastic(policy, workers))
    found = [(p.role, p.count, p.minimum, p.maximum) for p in workload.pod_sets]
    assert found == [("Master", 1, None, None), ("Worker", workers, low, high)]
    assert workload.elastic
    assert Workload.from_json(workload.to_json()) == workload


def test_a_job_without_elastic_policy_is_not_elastic_and_its_json_is_unchanged():
    workload = workload_from_manifest(MINIMAL["PyTorchJob"])
    assert not workload.elastic
    assert all("minimum" not in p and "maximum" not in p for p in workload.to_json()["pod_sets"])


@pytest.mark.parametrize(
    ("policy", "workers", "expected"),
    [
        ({"minReplicas": 0, "maxReplicas": 2}, 1, {"spec.elasticPolicy.minReplicas": "must be at least 1, got 0"}),
        (
            {"minReplicas": 3, "maxReplicas": 2},
            2,
            {"spec.elasticPolicy.maxReplicas": "must be at least minReplicas (3), got 2"},
        ),
        (
            {"minReplicas": 1, "maxReplicas": 2},
            5,
            {f"{PT}.Worker.replicas": "must be between minReplicas 1 and maxReplicas 2, got 5"},
        ),
        ({"minReplicas": "1"}, 1, {"spec.elasticPolicy.minReplicas": "must be an integer, got a string"}),
        ([1], 1, {"spec.elasticPolicy": "must be a mapping, got a list"}),
    ],
)
def test_elastic_policy_rejections(policy, workers, expected):
    assert errors_of(elastic(policy, workers)) == expected


def test_elastic_policy_needs_workers():
    manifest = with_value(elastic({"minReplicas": 1}), f"{PT}.Worker", None)
    assert errors_of(manifest) == {f"{PT}.Worker": "required when elasticPolicy is set"}


def test_deprecated_nproc_per_node_conflicts_with_the_new_field():
    manifest = with_value(elastic({"nProcPerNode": 2}), "spec.nprocPerNode", "2")
    assert errors_of(manifest) == {
        "spec.elasticPolicy.nProcPerNode": "must not be used with spec.nprocPerNode (deprecated; use that)"
    }


# --- status ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "phase"),
    [
        ([], ""),
        ([condition("Created")], "Created"),
        ([condition("Created"), condition("Running")], "Running"),
        ([condition("Created"), condition("Running", "False"), condition("Restarting")], "Restarting"),
        ([condition("Created"), condition("Suspended")], "Suspended"),
        ([condition("Created"), condition("Running", "False"), condition("Succeeded", message="done")], "Succeeded"),
        ([condition("Created"), condition("Failed", message="oom")], "Failed"),
        ([condition("Created"), condition("SomethingNew")], ""),
    ],
)
def test_status_is_the_latest_true_operator_condition(conditions, phase):
    status = PYTORCHJOB.status({"status": {"conditions": conditions}})
    assert status.phase == phase
    assert status.finished == (phase in ("Succeeded", "Failed"))


def test_status_message_comes_from_the_condition():
    status = PYTORCHJOB.status({"status": {"conditions": [condition("Failed", message="worker 0 OOMKilled")]}})
    assert status.message == "worker 0 OOMKilled"


def test_status_of_an_object_without_status():
    assert PYTORCHJOB.status({}).phase == ""
