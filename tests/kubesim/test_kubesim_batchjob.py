"""batch/v1 Job: the API server's defaulting and validation, and the Job controller."""

import json
import re

import pytest
from kubernetes import client

from kubesim.testing import batch_job_manifest


@pytest.fixture
def batch(sim):
    api_client = sim.api_client("alice@example.com")
    yield client.BatchV1Api(api_client)
    api_client.close()


def job_status(sim, name, namespace="team-a"):
    return sim.cluster.job("jobs.batch", namespace, name)["status"]


def conditions(sim, name, namespace="team-a"):
    return {c["type"]: (c["status"], c["reason"]) for c in job_status(sim, name, namespace).get("conditions", [])}


def phases(sim, name, namespace="team-a"):
    return sorted(p["status"]["phase"] for p in sim.cluster.pods_of("Job", namespace, name))


def test_defaults_selector_and_labels(batch):
    manifest = batch_job_manifest("d", "team-a")
    del manifest["spec"]["parallelism"]  # as `kubectl create job` sends it
    job = batch.create_namespaced_job("team-a", manifest)
    uid = job.metadata.uid
    assert job.spec.parallelism == 1 and job.spec.completions == 1 and job.spec.backoff_limit == 6
    assert job.spec.completion_mode == "NonIndexed" and job.spec.suspend is False
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    expected = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "d",
        "controller-uid": uid,
        "job-name": "d",
    }
    assert job.spec.template.metadata.labels == expected and job.metadata.labels == expected
    work_queue = batch.create_namespaced_job("team-a", batch_job_manifest("wq", "team-a", parallelism=3))
    assert work_queue.spec.parallelism == 3 and work_queue.spec.completions is None


@pytest.mark.parametrize(
    "change, field",
    [
        ({"restart_policy": "Always"}, "spec.template.spec.restartPolicy"),
        ({"parallelism": -1}, "spec.parallelism"),
        ({"indexed": True}, "spec.completions"),
        ({"backoff_limit": -2}, "spec.backoffLimit"),
    ],
)
def test_the_api_server_refuses_invalid_jobs(batch, change, field):
    with pytest.raises(client.ApiException) as caught:
        batch.create_namespaced_job("team-a", batch_job_manifest("bad", "team-a", **change))
    assert caught.value.status == 422
    assert field in [c["field"] for c in json.loads(caught.value.body)["details"]["causes"]]


def test_pods_are_generated_labelled_and_owned(batch, core, sim):
    job = batch.create_namespaced_job("team-a", batch_job_manifest("gen", "team-a", parallelism=2, completions=2))
    sim.settle()
    pods = core.list_namespaced_pod("team-a").items
    assert len(pods) == 2
    for pod in pods:
        assert re.fullmatch(r"gen-[bcdfghjklmnpqrstvwxz2456789]{5}", pod.metadata.name)
        assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "gen"
        assert pod.metadata.labels["job-name"] == "gen"
        assert pod.metadata.labels["controller-uid"] == job.metadata.uid
        owner = pod.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Job", "gen", job.metadata.uid, True)
    selected = core.list_namespaced_pod("team-a", label_selector="batch.kubernetes.io/job-name=gen").items
    assert len(selected) == 2


def test_parallelism_runs_waves_until_completions_then_complete(batch, sim):
    batch.create_namespaced_job(
        "team-a", batch_job_manifest("waves", "team-a", parallelism=2, completions=3, duration=10)
    )
    sim.advance(3)
    status = job_status(sim, "waves")
    assert status["active"] == 2 and status["ready"] == 2 and status["startTime"] and "succeeded" not in status
    assert phases(sim, "waves") == ["Running", "Running"]
    sim.advance(10)  # the first two succeed; one more completion is needed: one pod
    assert job_status(sim, "waves")["succeeded"] == 2
    assert phases(sim, "waves") == ["Pending", "Succeeded", "Succeeded"]
    sim.advance(15)
    status = job_status(sim, "waves")
    assert status["succeeded"] == 3 and "active" not in status and status["completionTime"]
    assert conditions(sim, "waves") == {
        "SuccessCriteriaMet": ("True", "CompletionsReached"),
        "Complete": ("True", "CompletionsReached"),
    }


def test_indexed_pods_carry_their_completion_index(batch, core, sim):
    batch.create_namespaced_job(
        "team-a", batch_job_manifest("idx", "team-a", parallelism=3, completions=3, indexed=True, duration=5)
    )
    sim.settle()
    pods = sorted(core.list_namespaced_pod("team-a").items, key=lambda p: p.metadata.name)
    for i, pod in enumerate(pods):
        assert re.fullmatch(rf"idx-{i}-[a-z0-9]{{5}}", pod.metadata.name)
        assert pod.metadata.labels["batch.kubernetes.io/job-completion-index"] == str(i)
        assert pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == str(i)
        assert pod.spec.hostname == f"idx-{i}"
    sim.advance(10)
    assert job_status(sim, "idx")["completedIndexes"] == "0-2" and "Complete" in conditions(sim, "idx")


def test_failures_are_retried_with_backoff_until_the_backoff_limit(batch, sim):
    batch.create_namespaced_job("team-a", batch_job_manifest("flaky", "team-a", duration=5, fail=True, backoff_limit=1))
    sim.advance(8)  # fails at t=7
    assert job_status(sim, "flaky")["failed"] == 1 and phases(sim, "flaky") == ["Failed"]
    sim.advance(8)  # the replacement waits the 10 s pod-failure backoff
    assert phases(sim, "flaky") == ["Failed"]
    sim.advance(2)
    assert phases(sim, "flaky") == ["Failed", "Pending"]
    sim.advance(10)
    assert job_status(sim, "flaky")["failed"] == 2
    assert conditions(sim, "flaky") == {
        "FailureTarget": ("True", "BackoffLimitExceeded"),
        "Failed": ("True", "BackoffLimitExceeded"),
    }


def test_suspend_deletes_active_pods_and_resume_recreates_them(batch, sim):
    batch.create_namespaced_job("team-a", batch_job_manifest("s", "team-a", parallelism=2, completions=2, duration=50))
    sim.advance(5)
    started = job_status(sim, "s")["startTime"]
    batch.patch_namespaced_job("s", "team-a", {"spec": {"suspend": True}})
    sim.settle()
    assert phases(sim, "s") == [] and conditions(sim, "s") == {"Suspended": ("True", "JobSuspended")}
    assert "active" not in job_status(sim, "s")
    sim.advance(10)
    batch.patch_namespaced_job("s", "team-a", {"spec": {"suspend": False}})
    sim.advance(3)
    assert phases(sim, "s") == ["Running", "Running"]
    assert conditions(sim, "s") == {"Suspended": ("False", "JobResumed")}
    assert job_status(sim, "s")["startTime"] > started
    sim.advance(50)
    assert "Complete" in conditions(sim, "s")


def test_the_pod_template_is_immutable_unless_suspended_and_not_started(batch, sim):
    batch.create_namespaced_job("team-a", batch_job_manifest("imm", "team-a"))
    sim.settle()
    with pytest.raises(client.ApiException) as caught:
        batch.patch_namespaced_job("imm", "team-a", {"spec": {"template": {"spec": {"nodeSelector": {"pool": "cpu"}}}}})
    assert caught.value.status == 422 and "immutable" in caught.value.body
    batch.create_namespaced_job("team-a", batch_job_manifest("held", "team-a", suspend=True))
    sim.settle()
    patched = batch.patch_namespaced_job(
        "held", "team-a", {"spec": {"template": {"spec": {"nodeSelector": {"pool": "cpu"}}}}}
    )
    assert patched.spec.template.spec.node_selector == {"pool": "cpu"}
    with pytest.raises(client.ApiException):  # the containers stay as they are even then
        batch.patch_namespaced_job(
            "held", "team-a", {"spec": {"template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}}
        )
    with pytest.raises(client.ApiException):
        batch.patch_namespaced_job("held", "team-a", {"spec": {"completions": 4}})


def test_deleting_a_job_deletes_its_pods(batch, core, sim):
    batch.create_namespaced_job("team-a", batch_job_manifest("gc", "team-a", parallelism=3))
    sim.settle()
    assert len(core.list_namespaced_pod("team-a").items) == 3
    batch.delete_namespaced_job("gc", "team-a")
    assert core.list_namespaced_pod("team-a").items == []


def test_quota_counts_jobs_and_refused_pods_become_failed_create_events(batch, core, sim):
    core.replace_namespaced_resource_quota(
        "quota", "team-a", {"metadata": {"name": "quota"}, "spec": {"hard": {"count/jobs.batch": "1", "pods": "2"}}}
    )
    batch.create_namespaced_job("team-a", batch_job_manifest("big", "team-a", parallelism=3))
    with pytest.raises(client.ApiException) as caught:
        batch.create_namespaced_job("team-a", batch_job_manifest("second", "team-a"))
    assert caught.value.status == 403 and "count/jobs.batch=1" in json.loads(caught.value.body)["message"]
    sim.advance(5)
    assert phases(sim, "big") == ["Running", "Running"]
    events = core.list_namespaced_event("team-a", field_selector="reason=FailedCreate").items
    assert [(e.involved_object.kind, e.involved_object.name, e.source.component) for e in events] == [
        ("Job", "big", "job-controller")
    ]
    assert "exceeded quota" in events[0].message and events[0].count > 1
