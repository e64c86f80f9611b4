"""MPIJob (kubeflow.org/v2beta1) as mpi-operator v2 validates it."""

import pytest
import yaml

from queueing import adapter_for, parse_job, workload_from_manifest
from queueing.kinds import MPIJOB
from tests.queueing.kinds_support import GI, condition, errors_of, shape, with_value

# mpi-operator examples/v2beta1/pi/pi.yaml
PI = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: pi
spec:
  slotsPerWorker: 1
  runPolicy:
    cleanPodPolicy: Running
    ttlSecondsAfterFinished: 60
  sshAuthMountPath: /home/mpiuser/.ssh
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - image: mpioperator/mpi-pi:openmpi
            name: mpi-launcher
            securityContext:
              runAsUser: 1000
            command:
            - mpirun
            args:
            - -n
            - "2"
            - /home/mpiuser/pi
            resources:
              limits:
                cpu: 1
                memory: 1Gi
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - image: mpioperator/mpi-pi:openmpi
            name: mpi-worker
            securityContext:
              runAsUser: 1000
            command:
            - /usr/sbin/sshd
            args:
            - -De
            - -f
            - /home/mpiuser/.sshd_config
            resources:
              limits:
                cpu: 1
                memory: 1Gi
"""

SPECS = "spec.mpiReplicaSpecs"


def pi():
    return yaml.safe_load(PI)


def test_pi_example():
    _, workload = parse_job(PI)
    assert shape(workload) == [("Launcher", 1, {"cpu": 1000, "memory": GI}), ("Worker", 2, {"cpu": 1000, "memory": GI})]
    assert workload.quota_demand()["count/mpijobs.kubeflow.org"] == 1


def test_adapter_members():
    assert adapter_for("kubeflow.org/v2beta1", "MPIJob") is MPIJOB
    assert MPIJOB.plural == "mpijobs"
    assert MPIJOB.suspend_path == ("spec", "runPolicy", "suspend")
    assert MPIJOB.pod_job_label == "training.kubeflow.org/job-name"
    assert MPIJOB.pod_role_label == "training.kubeflow.org/job-role"


def test_launcher_only_job():
    workload = workload_from_manifest(with_value(pi(), f"{SPECS}.Worker", None))
    assert [(p.role, p.count) for p in workload.pod_sets] == [("Launcher", 1)]


def test_launcher_replicas_default_to_one():
    workload = workload_from_manifest(with_value(pi(), f"{SPECS}.Launcher.replicas", None))
    assert workload.pod_sets[0].count == 1


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (f"{SPECS}.Launcher", None, {f"{SPECS}.Launcher": "required: an MPIJob needs a Launcher"}),
        (f"{SPECS}.Launcher.replicas", 2, {f"{SPECS}.Launcher.replicas": "must be 1 for Launcher, got 2"}),
        (f"{SPECS}.Launcher.replicas", 0, {f"{SPECS}.Launcher.replicas": "must be 1 for Launcher, got 0"}),
        (f"{SPECS}.Worker.replicas", 0, {f"{SPECS}.Worker.replicas": "must be at least 1 for Worker, got 0"}),
        (f"{SPECS}.Worker.replicas", -1, {f"{SPECS}.Worker.replicas": "must not be negative, got -1"}),
        (
            f"{SPECS}.Worker.replicas",
            None,
            {f"{SPECS}.Worker.replicas": "required: at least 1 (the operator's default, 0, is refused)"},
        ),
        (
            f"{SPECS}.worker",
            {},
            {f"{SPECS}.worker": "unknown replica type 'worker'; expected Launcher or Worker (case-sensitive)"},
        ),
        (
            f"{SPECS}.Worker.restartPolicy",
            "Always",
            {f"{SPECS}.Worker.restartPolicy": "must be one of 'Never', 'OnFailure', got 'Always'"},
        ),
        (
            f"{SPECS}.Worker.template.spec.containers",
            [],
            {f"{SPECS}.Worker.template.spec.containers": "must contain at least one container"},
        ),
        ("spec.slotsPerWorker", -1, {"spec.slotsPerWorker": "must not be negative, got -1"}),
        (
            "spec.mpiImplementation",
            "OpenMPI5",
            {"spec.mpiImplementation": "must be one of 'OpenMPI', 'Intel', 'MPICH', got 'OpenMPI5'"},
        ),
        (
            "spec.runPolicy.cleanPodPolicy",
            "Some",
            {"spec.runPolicy.cleanPodPolicy": "must be one of 'None', 'Running', 'All', got 'Some'"},
        ),
        ("spec.runPolicy.backoffLimit", -1, {"spec.runPolicy.backoffLimit": "must not be negative, got -1"}),
        (
            "spec.runPolicy.managedBy",
            "kubeflow.org/training-operator",
            {
                "spec.runPolicy.managedBy": (
                    "must be one of 'kubeflow.org/mpi-operator', 'kueue.x-k8s.io/multikueue', "
                    "got 'kubeflow.org/training-operator'"
                )
            },
        ),
        ("spec.runPolicy.suspend", "no", {"spec.runPolicy.suspend": "must be true or false, got a string"}),
        (SPECS, None, {SPECS: "required"}),
    ],
)
def test_rejections(path, value, expected):
    assert errors_of(with_value(pi(), path, value)) == expected


def test_worker_hostnames_must_be_dns_labels():
    # "<name>-worker-<replicas-1>" names the pods and their headless Service.
    manifest = with_value(pi(), "metadata.name", "a" * 54)
    manifest = with_value(manifest, f"{SPECS}.Worker.replicas", 100)
    assert errors_of(manifest) == {
        "metadata.name": f"too long: the worker pods' hostname '{'a' * 54}-worker-99' would not be a DNS label"
    }
    assert workload_from_manifest(with_value(manifest, f"{SPECS}.Worker.replicas", 10)).pods == 11


@pytest.mark.parametrize(
    ("conditions", "phase"),
    [
        ([condition("Created")], "Created"),
        ([condition("Created"), condition("Running")], "Running"),
        ([condition("Created"), condition("Running", "False"), condition("Succeeded")], "Succeeded"),
        ([condition("Created"), condition("Suspended")], "Suspended"),
        ([condition("Created"), condition("Failed", message="launcher failed")], "Failed"),
    ],
)
def test_status(conditions, phase):
    assert MPIJOB.status({"status": {"conditions": conditions}}).phase == phase
