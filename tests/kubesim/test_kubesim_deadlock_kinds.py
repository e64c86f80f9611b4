"""The deadlock with other job kinds: two PyTorchJobs, two batch Jobs whose pods need each other.

The controllers' interleaved pod creations give each job part of its gang before the
quota refuses the rest; no job ever runs whole, so none finishes, and the quota stays full.
"""

import pytest
from kubernetes import client

from kubesim.testing import batch_job_manifest, pytorchjob_manifest


def quota_config(quota: dict) -> dict:
    return {
        "nodes": [{"prefix": "node", "count": 4, "capacity": {"cpu": "16", "memory": "64Gi"}}],
        "namespaces": [{"name": "team-a", "quota": quota}],
        "users": [{"token": "alice-token", "username": "alice@example.com", "groups": ["ml-team"]}],
        "kubelet": {"start_delay_seconds": 5},
        "operator": {"backoff_seconds": 1, "max_backoff_seconds": 60},
    }


@pytest.fixture
def config():
    return quota_config({"requests.cpu": "6", "pods": "4"})


@pytest.fixture
def api_client(sim):
    api_client = sim.api_client("alice@example.com")
    yield api_client
    api_client.close()


def by_job(core, label):
    jobs: dict[str, list[str]] = {}
    for pod in core.list_namespaced_pod("team-a").items:
        jobs.setdefault(pod.metadata.labels[label], []).append(pod.status.phase)
    return jobs


@pytest.mark.parametrize("config", [quota_config({"requests.cpu": "6"})])
def test_two_pytorchjobs_deadlock_on_the_quota(api_client, sim, config):
    custom, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    for name in ("job-a", "job-b"):
        manifest = pytorchjob_manifest(name, "team-a", workers=3, cpu="1", duration=300)
        custom.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", manifest)
    sim.advance(24 * 3600)
    jobs = by_job(core, "training.kubeflow.org/job-name")
    assert sorted(jobs) == ["job-a", "job-b"]
    assert all(phases == ["Running"] * 3 for phases in jobs.values())  # 3 of 4 each: master and two workers
    for name in ("job-a", "job-b"):
        job = custom.get_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", name)
        assert {c["type"]: c["status"] for c in job["status"]["conditions"]} == {"Created": "True", "Running": "True"}
        assert job["status"]["replicaStatuses"]["Worker"]["active"] == 2
    quota = core.read_namespaced_resource_quota("quota", "team-a")
    assert quota.status.used == {"requests.cpu": "6"} == quota.status.hard
    events = core.list_namespaced_event("team-a", field_selector="reason=FailedCreatePod").items
    assert sorted(e.involved_object.name for e in events) == ["job-a", "job-b"]
    assert {e.source.component for e in events} == {"pytorchjob-controller"}
    assert all("exceeded quota" in e.message and e.count > 100 for e in events)


def test_two_batch_jobs_whose_pods_need_each_other_deadlock(api_client, sim):
    batch, core = client.BatchV1Api(api_client), client.CoreV1Api(api_client)
    for name in ("job-a", "job-b"):
        manifest = batch_job_manifest(name, "team-a", parallelism=3, completions=3, cpu="1", duration=300)
        batch.create_namespaced_job("team-a", manifest)
    sim.advance(24 * 3600)
    jobs = by_job(core, "batch.kubernetes.io/job-name")
    assert jobs == {"job-a": ["Running", "Running"], "job-b": ["Running", "Running"]}
    for name in ("job-a", "job-b"):
        job = batch.read_namespaced_job(name, "team-a")
        assert job.status.active == 2 and job.status.ready == 2 and not job.status.succeeded
        assert not job.status.conditions
    assert core.read_namespaced_resource_quota("quota", "team-a").status.used["pods"] == "4"
    events = core.list_namespaced_event("team-a", field_selector="reason=FailedCreate").items
    assert sorted(e.involved_object.name for e in events) == ["job-a", "job-b"]
    assert all("exceeded quota" in e.message and e.count > 100 for e in events)


@pytest.mark.parametrize("config", [quota_config({"requests.cpu": "8", "pods": "8"})])
def test_with_room_for_both_gangs_both_finish(api_client, sim, config):
    custom, batch = client.CustomObjectsApi(api_client), client.BatchV1Api(api_client)
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", "team-a", "pytorchjobs", pytorchjob_manifest("pt", "team-a", workers=3, duration=300)
    )
    batch.create_namespaced_job(
        "team-a", batch_job_manifest("bj", "team-a", parallelism=3, completions=3, cpu="1", duration=300)
    )
    sim.advance(400)  # 4 + 3 pods fit
    job = custom.get_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", "pt")
    assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in job["status"]["conditions"])
    assert batch.read_namespaced_job("bj", "team-a").status.succeeded == 3
