"""JobSet (jobset.x-k8s.io/v1alpha2): one pod set per replicatedJob."""

import pytest
import yaml

from queueing import adapter_for, parse_job, workload_from_manifest
from queueing.kinds import JOBSET
from tests.queueing.kinds_support import GI, condition, container, errors_of, shape, with_value

# JobSet's examples/simple/paralleljobs.yaml, with resources
PARALLEL_JOBS = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: paralleljobs
spec:
  replicatedJobs:
  - name: workers
    template:
      spec:
        parallelism: 4
        completions: 4
        backoffLimit: 0
        template:
          spec:
            containers:
            - name: sleep
              image: busybox
              command: [sleep]
              args: [100s]
              resources: {requests: {cpu: "1", memory: 1Gi}}
  - name: driver
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          spec:
            containers:
            - name: sleep
              image: busybox
              command: [sleep]
              args: [100s]
              resources: {requests: {cpu: 500m}}
"""


def jobset(*replicated_jobs, name="trainer"):
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"replicatedJobs": list(replicated_jobs)},
    }


def replicated(name, replicas=None, parallelism=None, completions=None, cpu="1"):
    spec = {"template": {"spec": {"containers": [container("main", cpu=cpu)]}}}
    for key, value in (("parallelism", parallelism), ("completions", completions)):
        if value is not None:
            spec[key] = value
    item = {"name": name, "template": {"spec": spec}}
    if replicas is not None:
        item["replicas"] = replicas
    return item


def test_parallel_jobs_example():
    _, workload = parse_job(PARALLEL_JOBS)
    assert shape(workload) == [("workers", 4, {"cpu": 1000, "memory": GI}), ("driver", 1, {"cpu": 500})]
    assert workload.quota_demand()["count/jobsets.jobset.x-k8s.io"] == 1


def test_adapter_members():
    assert adapter_for("jobset.x-k8s.io/v1alpha2", "JobSet") is JOBSET
    assert (JOBSET.plural, JOBSET.suspend_path) == ("jobsets", ("spec", "suspend"))
    assert JOBSET.pod_job_label == "jobset.sigs.k8s.io/jobset-name"
    assert JOBSET.pod_role_label == "jobset.sigs.k8s.io/replicatedjob-name"


@pytest.mark.parametrize(
    ("item", "pods"),
    [
        (replicated("w"), 1),  # replicas 1, a one-pod Job
        (replicated("w", replicas=3), 3),
        (replicated("w", replicas=2, parallelism=4, completions=4), 8),
        (replicated("w", replicas=2, parallelism=4, completions=2), 4),
        (replicated("w", replicas=0, parallelism=4, completions=4), 0),
        (replicated("w", replicas=3, completions=5), 3),  # parallelism defaults to 1
    ],
)
def test_pods_are_replicas_times_pods_per_job(item, pods):
    assert [(p.role, p.count) for p in workload_from_manifest(jobset(item)).pod_sets] == [("w", pods)]


def test_the_pods_restart_policy_defaults_to_on_failure():
    # JobSet's webhook sets it before the Jobs exist; a bare Job would be refused.
    item = replicated("w")
    assert "restartPolicy" not in item["template"]["spec"]["template"]["spec"]
    assert workload_from_manifest(jobset(item)).pods == 1


def test_indexed_is_the_default_completion_mode_so_a_work_queue_needs_completions():
    errors = errors_of(jobset(replicated("w", parallelism=4)))
    assert errors == {"spec.replicatedJobs[0].template.spec.completions": "required when completionMode is Indexed"}
    item = replicated("w", parallelism=4)
    item["template"]["spec"]["completionMode"] = "NonIndexed"
    assert workload_from_manifest(jobset(item)).pods == 4


RJ = "spec.replicatedJobs"


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            jobset(replicated("workers"), replicated("workers")),
            {f"{RJ}[1].name": f"duplicate replicatedJob name 'workers' (also at {RJ}[0].name)"},
        ),
        (
            jobset(replicated("Workers")),
            {
                f"{RJ}[0].name": (
                    "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and "
                    "ending with a letter or digit), got 'Workers'"
                )
            },
        ),
        (jobset(replicated("")), {f"{RJ}[0].name": "required"}),
        (jobset(replicated("w", replicas=-1)), {f"{RJ}[0].replicas": "must not be negative, got -1"}),
        (
            jobset(replicated("w", parallelism=-1, completions=1)),
            {f"{RJ}[0].template.spec.parallelism": "must not be negative, got -1"},
        ),
        (
            jobset(replicated("w", completions=-3)),
            {f"{RJ}[0].template.spec.completions": "must not be negative, got -3"},
        ),
        (jobset(), {RJ: "required: at least one replicatedJob"}),
        (jobset("w"), {f"{RJ}[0]": "must be a mapping with name and template, got a string"}),
        (
            jobset({"name": "w", "template": {}}),
            {f"{RJ}[0].template.spec": "required"},
        ),
        (
            jobset(with_value(replicated("w"), "template.spec.template.spec.restartPolicy", "Always")),
            {
                f"{RJ}[0].template.spec.template.spec.restartPolicy": (
                    "required: OnFailure or Never (a Job's pods must finish; Always is the pods' default)"
                )
            },
        ),
        (
            jobset(with_value(replicated("w"), "template.spec.template.spec.containers", [])),
            {f"{RJ}[0].template.spec.template.spec.containers": "must contain at least one container"},
        ),
    ],
)
def test_rejections(manifest, expected):
    assert errors_of(manifest) == expected


def test_spec_fields():
    assert errors_of(with_value(jobset(replicated("w")), "spec.suspend", "yes")) == {
        "spec.suspend": "must be true or false, got a string"
    }
    assert errors_of(with_value(jobset(replicated("w")), "spec.replicatedJobs", {"w": {}})) == {
        RJ: "must be a list, got a mapping"
    }


def test_job_names_derived_from_the_jobset_must_be_dns_labels():
    # Jobs are "<jobset>-<replicatedJob>-<index>"
    manifest = jobset(replicated("workers", replicas=10), name="j" * 54)
    assert errors_of(manifest) == {
        f"{RJ}[0].name": f"the Job name '{'j' * 54}-workers-9' would not be a DNS label of at most 63 characters"
    }


def test_indexed_pod_names_derived_from_the_jobset_must_be_dns_labels():
    # Indexed pods are "<job>-<completion index>-<5 random>"
    manifest = jobset(replicated("workers", replicas=10, parallelism=2, completions=2), name="j" * 46)
    assert errors_of(manifest) == {
        f"{RJ}[0].name": (
            f"the pod name '{'j' * 46}-workers-9-1-abcde' would not be a DNS label of at most 63 characters"
        )
    }
    assert workload_from_manifest(with_value(manifest, "metadata.name", "j" * 45)).pods == 20


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        ({}, "Created"),
        ({"replicatedJobsStatus": [{"name": "w", "active": 0, "ready": 0}]}, "Created"),
        ({"replicatedJobsStatus": [{"name": "d", "active": 0}, {"name": "w", "active": 2}]}, "Running"),
        ({"conditions": [condition("Suspended")]}, "Suspended"),
        (
            {"conditions": [condition("Suspended", "False")], "replicatedJobsStatus": [{"name": "w", "active": 1}]},
            "Running",
        ),
        ({"conditions": [condition("StartupPolicyCompleted"), condition("Completed")]}, "Succeeded"),
        ({"conditions": [condition("Failed", message="jobset failed due to reaching max restarts")]}, "Failed"),
    ],
)
def test_status(status, phase):
    assert JOBSET.status({"status": status}).phase == phase


def test_example_of_the_repository(example_text):
    workload = parse_job(example_text("jobset"))[1]
    assert [(p.role, p.count) for p in workload.pod_sets] == [("driver", 1), ("workers", 4)]


def test_generate_name_only_jobset_uses_a_generated_length_for_derived_names():
    manifest = jobset(replicated("workers", replicas=10))
    del manifest["metadata"]["name"]
    manifest["metadata"]["generateName"] = "j" * 60  # cut to 58 + 5 random characters
    assert set(errors_of(manifest)) == {f"{RJ}[0].name"}
    manifest["metadata"]["generateName"] = "short-"
    assert workload_from_manifest(manifest).name == ""


def test_load_from_yaml_equals_dict():
    assert parse_job(yaml.safe_dump(jobset(replicated("w"))))[1] == workload_from_manifest(jobset(replicated("w")))
