"""The article's deadlock, reproduced with TFJobs created straight on the cluster (no jobdash).

Two TFJobs of 4 workers (1 cpu each) in a namespace whose quota holds 6 pods' worth of
CPU: the operator's interleaved pod creations give each job 3 running pods, the 4th is
refused by the quota, and since distributed TensorFlow makes no progress until the
whole gang runs, neither job ever finishes -- while the quota stays full.
"""

import pytest
from kubernetes import client

from kubesim.testing import tfjob_manifest

G, V, P = "kubeflow.org", "v1", "tfjobs"


def quota_config(cpu: str) -> dict:
    return {
        "nodes": [{"prefix": "node", "count": 4, "capacity": {"cpu": "16", "memory": "64Gi"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": cpu}}],
        "users": [{"token": "alice-token", "username": "alice@example.com", "groups": ["ml-team"]}],
        "kubelet": {"start_delay_seconds": 5},
        "operator": {"backoff_seconds": 1, "max_backoff_seconds": 60},
    }


@pytest.fixture
def config():
    return quota_config("6")


@pytest.fixture
def custom(sim):
    """A person submitting straight to the cluster: no jobdash anywhere."""
    return client.CustomObjectsApi(sim.api_client("alice@example.com"))


@pytest.fixture
def core(sim):
    return client.CoreV1Api(sim.api_client("alice@example.com"))


def submit_both(custom):
    for name in ("job-a", "job-b"):
        custom.create_namespaced_custom_object(
            G, V, "team-a", P, tfjob_manifest(name, "team-a", workers=4, cpu="1", duration=300)
        )


def test_two_gangs_deadlock_on_the_quota(custom, core, sim):
    submit_both(custom)
    sim.advance(24 * 3600)  # a simulated day: plenty of time for 5-minute jobs
    pods = core.list_namespaced_pod("team-a").items
    by_job: dict[str, list[str]] = {}
    for pod in pods:
        by_job.setdefault(pod.metadata.labels["training.kubeflow.org/job-name"], []).append(pod.status.phase)
    # Both jobs hold some of their gang, running, and neither has all of it.
    assert sorted(by_job) == ["job-a", "job-b"]
    assert all(0 < len(phases) < 4 and set(phases) == {"Running"} for phases in by_job.values())
    assert sum(len(p) for p in by_job.values()) == 6
    # Neither ever succeeds; both look Running to anyone reading conditions.
    for name in ("job-a", "job-b"):
        job = custom.get_namespaced_custom_object(G, V, "team-a", P, name)
        types = {c["type"]: c["status"] for c in job["status"]["conditions"]}
        assert types == {"Created": "True", "Running": "True"}
        assert job["status"]["replicaStatuses"]["Worker"]["active"] == 3
    # The quota stays full, and the operator keeps being refused.
    quota = core.read_namespaced_resource_quota("quota", "team-a")
    assert quota.status.used == {"requests.cpu": "6"} == quota.status.hard
    events = core.list_namespaced_event("team-a", field_selector="reason=FailedCreatePod").items
    assert sorted(e.involved_object.name for e in events) == ["job-a", "job-b"]
    assert all("exceeded quota" in e.message and e.count > 100 for e in events)


@pytest.mark.parametrize("config", [quota_config("8")])
def test_with_room_for_both_gangs_both_finish(custom, sim, config):
    submit_both(custom)
    sim.advance(400)
    for name in ("job-a", "job-b"):
        job = custom.get_namespaced_custom_object(G, V, "team-a", P, name)
        assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in job["status"]["conditions"])
