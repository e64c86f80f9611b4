"""JobSet (jobset.x-k8s.io/v1alpha2): child Jobs, run by the Job controller, and their pods."""

import json

import pytest
from kubernetes import client

from kubesim.testing import jobset_manifest

G, V, P = "jobset.x-k8s.io", "v1alpha2", "jobsets"


@pytest.fixture
def batch(sim):
    api_client = sim.api_client("alice@example.com")
    yield client.BatchV1Api(api_client)
    api_client.close()


def conditions(sim, name, namespace="team-a"):
    js = sim.cluster.job("jobsets.jobset.x-k8s.io", namespace, name)
    return {c["type"]: (c["status"], c["reason"]) for c in (js.get("status") or {}).get("conditions", [])}


def phases(sim, name, namespace="team-a"):
    return sorted(p["status"]["phase"] for p in sim.cluster.pods_of("JobSet", namespace, name))


def test_defaults_of_the_webhook(custom):
    js = custom.create_namespaced_custom_object(G, V, "team-a", P, jobset_manifest("d", "team-a"))
    assert js["spec"]["successPolicy"] == {"operator": "All"}
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    job_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["completionMode"] == "Indexed" and job_spec["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_one_job_per_replica_labelled_owned_and_their_pods(custom, batch, core, sim):
    js = custom.create_namespaced_custom_object(
        G, V, "team-a", P, jobset_manifest("train", "team-a", jobs=2, workers=2)
    )
    sim.settle()
    jobs = {j.metadata.name: j for j in batch.list_namespaced_job("team-a").items}
    assert sorted(jobs) == ["train-workers-0", "train-workers-1"]
    job = jobs["train-workers-1"]
    labels = job.metadata.labels
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "train"
    assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "workers"
    assert labels["jobset.sigs.k8s.io/job-index"] == "1"
    assert labels["jobset.sigs.k8s.io/replicatedjob-replicas"] == "2"
    assert labels["jobset.sigs.k8s.io/job-global-index"] == "1"
    owner = job.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("JobSet", "train", js["metadata"]["uid"], True)
    assert job.spec.template.spec.subdomain == "train" and job.spec.completion_mode == "Indexed"
    pods = core.list_namespaced_pod("team-a", label_selector="jobset.sigs.k8s.io/jobset-name=train").items
    assert sorted(p.metadata.name[: -len("-xxxxx")] for p in pods) == [
        "train-workers-0-0",
        "train-workers-0-1",
        "train-workers-1-0",
        "train-workers-1-1",
    ]
    pod = next(p for p in pods if p.metadata.name.startswith("train-workers-1-0-"))
    assert pod.metadata.labels["jobset.sigs.k8s.io/job-index"] == "1"
    assert pod.metadata.labels["batch.kubernetes.io/job-name"] == "train-workers-1"
    assert pod.metadata.labels["batch.kubernetes.io/job-completion-index"] == "0"
    assert pod.metadata.owner_references[0].kind == "Job"


def test_completed_when_every_job_completed(custom, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, jobset_manifest("ok", "team-a", jobs=2, workers=2, duration=20)
    )
    sim.advance(3)
    status = sim.cluster.job("JobSet", "team-a", "ok")["status"]
    assert status["replicatedJobsStatus"] == [
        {"name": "workers", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
    ]
    assert phases(sim, "ok") == ["Running"] * 4
    sim.advance(20)
    status = sim.cluster.job("JobSet", "team-a", "ok")["status"]
    assert conditions(sim, "ok") == {"Completed": ("True", "AllJobsCompleted")}
    assert status["terminalState"] == "Completed"
    assert status["replicatedJobsStatus"][0]["succeeded"] == 2
    assert phases(sim, "ok") == ["Succeeded"] * 4


def test_the_jobs_gang_up_across_the_jobset(custom, sim):
    # Two Jobs of 3 pods (3 cpu each): the CPU nodes take 4, so neither Job's work starts.
    custom.create_namespaced_custom_object(
        G, V, "team-b", P, jobset_manifest("big", "team-b", jobs=2, workers=3, cpu="3", duration=10)
    )
    sim.advance(300)
    assert phases(sim, "big", "team-b") == ["Pending", "Pending", "Running", "Running", "Running", "Running"]
    assert conditions(sim, "big", "team-b") == {}


def test_suspend_propagates_to_the_jobs_and_resume_restarts_them(custom, batch, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", P, jobset_manifest("s", "team-a", jobs=2, workers=1, duration=50)
    )
    sim.advance(5)
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "s", {"spec": {"suspend": True}})
    sim.settle()
    assert [j.spec.suspend for j in batch.list_namespaced_job("team-a").items] == [True, True]
    assert phases(sim, "s") == []
    assert conditions(sim, "s") == {"Suspended": ("True", "SuspendedJobs")}
    assert sim.cluster.job("JobSet", "team-a", "s")["status"]["replicatedJobsStatus"][0]["suspended"] == 2
    custom.patch_namespaced_custom_object(G, V, "team-a", P, "s", {"spec": {"suspend": False}})
    sim.advance(3)
    assert [j.spec.suspend for j in batch.list_namespaced_job("team-a").items] == [False, False]
    assert phases(sim, "s") == ["Running", "Running"]
    assert conditions(sim, "s") == {"Suspended": ("False", "ResumeJobs")}
    sim.advance(50)
    assert conditions(sim, "s")["Completed"] == ("True", "AllJobsCompleted")


def test_created_suspended_has_suspended_jobs_and_no_pods(custom, batch, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, jobset_manifest("held", "team-a", jobs=2, suspend=True))
    sim.settle()
    assert [j.spec.suspend for j in batch.list_namespaced_job("team-a").items] == [True, True]
    assert phases(sim, "held") == []


def test_a_failed_job_fails_the_jobset_and_its_other_jobs_go(custom, batch, sim):
    manifest = jobset_manifest("bad", "team-a", jobs=2, workers=1, duration=5, fail=True, backoff_limit=0)
    custom.create_namespaced_custom_object(G, V, "team-a", P, manifest)
    sim.advance(10)
    js = sim.cluster.job("JobSet", "team-a", "bad")
    failed = next(c for c in js["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "FailedJobs")
    assert failed["message"] == "jobset failed due to one or more job failures (first failed job: bad-workers-0)"
    assert js["status"]["terminalState"] == "Failed"
    assert [j.metadata.name for j in batch.list_namespaced_job("team-a").items] == ["bad-workers-0"]


def test_max_restarts_recreates_the_jobs_then_fails(custom, batch, sim):
    manifest = jobset_manifest("retry", "team-a", jobs=1, duration=5, fail=True, backoff_limit=0, max_restarts=1)
    custom.create_namespaced_custom_object(G, V, "team-a", P, manifest)
    sim.advance(10)
    status = sim.cluster.job("JobSet", "team-a", "retry")["status"]
    assert status["restarts"] == 1 and "conditions" not in status
    job = batch.read_namespaced_job("retry-workers-0", "team-a")
    assert job.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] == "1"
    sim.advance(10)
    assert conditions(sim, "retry") == {"Failed": ("True", "ReachedMaxRestarts")}


def test_replicated_jobs_are_immutable(custom):
    created = custom.create_namespaced_custom_object(G, V, "team-a", P, jobset_manifest("imm", "team-a"))
    rjobs = created["spec"]["replicatedJobs"]
    rjobs[0]["replicas"] = 5
    with pytest.raises(client.ApiException) as caught:
        custom.patch_namespaced_custom_object(G, V, "team-a", P, "imm", {"spec": {"replicatedJobs": rjobs}})
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["details"]["causes"][0]["field"] == "spec.replicatedJobs"
    # A suspended JobSet's pod templates may take scheduling directives (as Kueue gives them).
    rjobs[0]["replicas"] = 1
    rjobs[0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "cpu"}
    with pytest.raises(client.ApiException):
        custom.patch_namespaced_custom_object(G, V, "team-a", P, "imm", {"spec": {"replicatedJobs": rjobs}})
    patch = {"spec": {"suspend": True, "replicatedJobs": rjobs}}
    patched = custom.patch_namespaced_custom_object(G, V, "team-a", P, "imm", patch)
    assert patched["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] == {
        "pool": "cpu"
    }


def test_deleting_the_jobset_deletes_jobs_and_pods(custom, batch, core, sim):
    custom.create_namespaced_custom_object(G, V, "team-a", P, jobset_manifest("gc", "team-a", jobs=2, workers=2))
    sim.settle()
    assert len(core.list_namespaced_pod("team-a").items) == 4
    custom.delete_namespaced_custom_object(G, V, "team-a", P, "gc")
    assert batch.list_namespaced_job("team-a").items == [] and core.list_namespaced_pod("team-a").items == []


def test_quota_counts_jobsets(custom, core, sim):
    core.replace_namespaced_resource_quota(
        "quota", "team-a", {"metadata": {"name": "quota"}, "spec": {"hard": {"count/jobsets.jobset.x-k8s.io": "1"}}}
    )
    custom.create_namespaced_custom_object(G, V, "team-a", P, jobset_manifest("one", "team-a"))
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", P, jobset_manifest("two", "team-a"))
    assert caught.value.status == 403
