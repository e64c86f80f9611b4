"""batch/v1 Job: pods from parallelism and completions, validated as the API server does."""

import pytest
import yaml

from queueing import adapter_for, capabilities, parse_job, workload_from_manifest
from queueing.kinds import JOB
from tests.queueing.kinds_support import GI, MI, condition, errors_of, shape, with_value

# Katib's trial template for a batch Job (katib examples/v1beta1/hp-tuning/random.yaml)
KATIB_TRIAL = """
apiVersion: batch/v1
kind: Job
metadata:
  name: random-exp-trial-1
  namespace: kubeflow
  labels: {katib.kubeflow.org/trial: random-exp-trial-1}
spec:
  template:
    metadata:
      annotations: {sidecar.istio.io/inject: "false"}
    spec:
      containers:
        - name: training-container
          image: docker.io/kubeflowkatib/mxnet-mnist:latest
          command: ["python3", "/opt/mxnet-mnist/mnist.py", "--batch-size=64", "--lr=0.01"]
          resources:
            requests: {cpu: 500m, memory: 512Mi}
            limits: {cpu: "1", memory: 1Gi}
      restartPolicy: Never
"""

# Kubernetes docs: an Indexed Job (indexed-job.yaml)
INDEXED = """
apiVersion: batch/v1
kind: Job
metadata:
  name: indexed-job
spec:
  completions: 5
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - name: input
        image: docker.io/library/bash
        command: [bash, -c, 'items=(foo bar baz qux xyz); echo ${items[$JOB_COMPLETION_INDEX]} > /input/data.txt']
        resources: {requests: {cpu: "2"}}
      containers:
      - name: worker
        image: docker.io/library/busybox
        command: [rev, /input/data.txt]
        resources: {requests: {cpu: 250m, memory: 64Mi}}
"""


def trial():
    return yaml.safe_load(KATIB_TRIAL)


def test_katib_trial():
    _, workload = parse_job(KATIB_TRIAL)
    assert shape(workload) == [("main", 1, {"cpu": 500, "memory": 512 * MI})]
    demand = workload.quota_demand()
    assert demand["count/jobs.batch"] == 1
    assert (demand["limits.cpu"], demand["limits.memory"]) == (1000, GI)


def test_indexed_job_runs_parallelism_pods_at_once():
    _, workload = parse_job(INDEXED)
    # init container's 2 cpu is the peak of the pod
    assert shape(workload) == [("main", 3, {"cpu": 2000, "memory": 64 * MI})]


def test_adapter_members():
    assert adapter_for("batch/v1", "Job") is JOB
    assert (JOB.plural, JOB.suspend_path) == ("jobs", ("spec", "suspend"))
    assert JOB.pod_job_label == "batch.kubernetes.io/job-name"
    assert capabilities.role_label(JOB) is None  # one pod set: its pods carry no role label


@pytest.mark.parametrize(
    ("parallelism", "completions", "pods"),
    [
        (None, None, 1),  # a non-parallel Job
        (4, None, 4),  # a work queue: completions unset means "until one succeeds", parallelism pods
        (None, 5, 1),  # parallelism defaults to 1
        (4, 2, 2),  # never more pods than completions left
        (2, 10, 2),
        (0, 3, 0),  # parallelism 0 is a paused Job
        (3, 0, 0),  # completions 0 finishes at once
    ],
)
def test_pods_are_min_of_parallelism_and_completions(parallelism, completions, pods):
    manifest = with_value(with_value(trial(), "spec.parallelism", parallelism), "spec.completions", completions)
    assert workload_from_manifest(manifest).pods == pods


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("spec.parallelism", -1, {"spec.parallelism": "must not be negative, got -1"}),
        ("spec.completions", -2, {"spec.completions": "must not be negative, got -2"}),
        ("spec.parallelism", 2**31, {"spec.parallelism": "must be at most 2147483647, got 2147483648"}),
        ("spec.parallelism", "2", {"spec.parallelism": "must be an integer, got a string"}),
        ("spec.backoffLimit", -1, {"spec.backoffLimit": "must not be negative, got -1"}),
        ("spec.activeDeadlineSeconds", -5, {"spec.activeDeadlineSeconds": "must not be negative, got -5"}),
        (
            "spec.completionMode",
            "Parallel",
            {"spec.completionMode": "must be one of 'NonIndexed', 'Indexed', got 'Parallel'"},
        ),
        ("spec.template", None, {"spec.template": "required"}),
        ("spec.template.spec", None, {"spec.template.spec": "required"}),
        ("spec.template.spec.containers", None, {"spec.template.spec.containers": "required: at least one container"}),
        (
            "spec.template.spec.restartPolicy",
            None,
            {
                "spec.template.spec.restartPolicy": (
                    "required: OnFailure or Never (a Job's pods must finish; Always is the pods' default)"
                )
            },
        ),
        (
            "spec.template.spec.restartPolicy",
            "Always",
            {
                "spec.template.spec.restartPolicy": (
                    "required: OnFailure or Never (a Job's pods must finish; Always is the pods' default)"
                )
            },
        ),
        (
            "spec.template.spec.restartPolicy",
            "Sometimes",
            {"spec.template.spec.restartPolicy": "must be OnFailure or Never, got 'Sometimes'"},
        ),
        ("spec.suspend", "true", {"spec.suspend": "must be true or false, got a string"}),
        (
            "spec.managedBy",
            "no-slash",
            {"spec.managedBy": "must be a domain-prefixed path such as 'example.com/controller', got 'no-slash'"},
        ),
        (
            "metadata.name",
            "Trial_1",
            {"metadata.name": "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'"},
        ),
        (
            "metadata.name",
            "a" * 64,
            {"metadata.name": "must be at most 63 characters (it becomes the pods' job-name label)"},
        ),
        ("spec", None, {"spec": "required"}),
    ],
)
def test_rejections(path, value, expected):
    assert errors_of(with_value(trial(), path, value)) == expected


def test_job_names_may_contain_dots_unlike_operator_jobs():
    assert workload_from_manifest(with_value(trial(), "metadata.name", "trial.v1")).name == "trial.v1"


def test_indexed_needs_completions():
    manifest = with_value(with_value(trial(), "spec.completionMode", "Indexed"), "spec.parallelism", 2)
    assert errors_of(manifest) == {"spec.completions": "required when completionMode is Indexed"}


def test_indexed_parallelism_limit():
    manifest = yaml.safe_load(INDEXED)
    manifest["spec"]["parallelism"] = 100_001
    assert errors_of(manifest) == {"spec.parallelism": "must be at most 100000 when completionMode is Indexed"}


def test_indexed_pod_hostnames_must_be_dns_labels():
    manifest = with_value(yaml.safe_load(INDEXED), "metadata.name", "x" * 60)
    manifest["spec"]["completions"] = 1000  # hostname "<name>-999" has 64 characters
    assert errors_of(manifest) == {
        "metadata.name": f"too long for Indexed pods: their hostname '{'x' * 60}-999' is not a DNS label"
    }


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        ({}, "Created"),
        ({"active": 0}, "Created"),
        ({"active": 2}, "Running"),
        ({"conditions": [condition("Suspended")]}, "Suspended"),
        ({"conditions": [condition("Suspended", "False")], "active": 1}, "Running"),
        ({"conditions": [condition("SuccessCriteriaMet"), condition("Complete")], "succeeded": 1}, "Succeeded"),
        ({"conditions": [condition("FailureTarget"), condition("Failed", message="BackoffLimitExceeded")]}, "Failed"),
    ],
)
def test_status(status, phase):
    assert JOB.status({"status": status}).phase == phase


def test_failed_status_keeps_the_message():
    job = {"status": {"conditions": [condition("Failed", message="Job has reached the specified backoff limit")]}}
    assert JOB.status(job).message == "Job has reached the specified backoff limit"
