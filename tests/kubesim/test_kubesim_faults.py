"""Fault injection (errors, latency, 429s on chosen verbs) and the real-time clock."""

import time

import pytest
from kubernetes import client

from kubesim.faults import Faults
from kubesim.testing import running_kubesim, tfjob_manifest

G, V, P = "kubeflow.org", "v1", "tfjobs"


def test_the_next_creates_get_429_then_succeed(custom, sim):
    sim.cluster.faults.add(verbs=["create"], resources=["tfjobs"], status=429, times=2, retry_after=3)
    for _ in range(2):
        with pytest.raises(client.ApiException) as caught:
            custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("t", "team-a", suspend=True))
        assert caught.value.status == 429 and caught.value.headers["Retry-After"] == "3"
    custom.create_namespaced_custom_object(G, V, "team-a", P, tfjob_manifest("t", "team-a", suspend=True))
    assert sim.cluster.tfjob("team-a", "t") is not None
    assert (
        sim.cluster.audit[-1]["outcome"] == "Created" and len(sim.cluster.audit) == 1
    )  # refused before reaching the API


def test_faults_only_hit_the_chosen_verbs_and_resources(custom, core, sim):
    sim.cluster.faults.add(verbs=["list"], resources=["pods"], status=500, error_rate=1.0)
    with pytest.raises(client.ApiException) as caught:
        core.list_namespaced_pod("team-a")
    assert caught.value.status == 500
    assert core.list_namespaced_resource_quota("team-a").items  # other resources are untouched
    assert custom.list_namespaced_custom_object(G, V, "team-a", P)["items"] == []
    sim.cluster.faults.clear()
    assert core.list_namespaced_pod("team-a").items == []


def test_latency_is_added_to_matching_requests(core, sim):
    sim.cluster.faults.add(verbs=["get"], resources=["resourcequotas"], latency_ms=150)
    started = time.monotonic()
    core.read_namespaced_resource_quota("quota", "team-a")
    assert time.monotonic() - started >= 0.15


def test_error_rate_is_a_seeded_probability():
    faults = Faults([{"verbs": ["patch"], "status": 503, "error_rate": 0.25}], seed=7)
    outcomes = [faults.check("patch", "tfjobs")[1] is not None for _ in range(2000)]
    assert 400 < sum(outcomes) < 600
    assert faults.check("get", "tfjobs") == (0.0, None)
    again = Faults([{"verbs": ["patch"], "status": 503, "error_rate": 0.25}], seed=7)
    assert [again.check("patch", "tfjobs")[1] is not None for _ in range(2000)] == outcomes


def test_bad_fault_rules_are_refused():
    with pytest.raises(ValueError):
        Faults([{"verbs": ["explode"]}])
    with pytest.raises(ValueError):
        Faults([{"status": 418}])


def test_real_clock_runs_controllers_by_itself_at_speed(config):
    fast = {**config, "speed": 50.0}
    with running_kubesim(fast) as sim:  # 2 s start delay + 20 s of work = 0.44 real seconds
        custom = client.CustomObjectsApi(sim.api_client())
        custom.create_namespaced_custom_object(
            G, V, "team-a", P, tfjob_manifest("rt", "team-a", workers=2, duration=20)
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            job = sim.cluster.tfjob("team-a", "rt")
            if any(c["type"] == "Succeeded" for c in (job.get("status") or {}).get("conditions", [])):
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the job did not finish in real time")
        started, finished = job["status"]["startTime"], job["status"]["completionTime"]
        assert started < finished
        with pytest.raises(RuntimeError):
            sim.advance(1)  # a real clock is not advanced by hand
