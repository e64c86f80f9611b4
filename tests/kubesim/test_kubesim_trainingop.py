"""The training-operator's other kinds: PyTorchJob, XGBoostJob, PaddleJob, JAXJob (kubeflow.org/v1)."""

import json

import pytest
from kubernetes import client

from kubesim.testing import (
    jaxjob_manifest,
    paddlejob_manifest,
    pytorchjob_manifest,
    tfjob_manifest,
    xgboostjob_manifest,
)

G, V = "kubeflow.org", "v1"


def conditions(sim, plural, name, namespace="team-a"):
    job = sim.cluster.job(f"{plural}.{G}", namespace, name)
    return {c["type"]: (c["status"], c["reason"]) for c in job["status"]["conditions"]}


def message(sim, plural, name, ctype, namespace="team-a"):
    job = sim.cluster.job(f"{plural}.{G}", namespace, name)
    return next(c["message"] for c in job["status"]["conditions"] if c["type"] == ctype)


def phases(sim, kind, name, namespace="team-a"):
    return {p["metadata"]["name"]: p["status"]["phase"] for p in sim.cluster.pods_of(kind, namespace, name)}


def test_pytorchjob_pods_are_named_labelled_and_owned_like_the_operators(custom, core, sim):
    job = custom.create_namespaced_custom_object(
        G, V, "team-a", "pytorchjobs", pytorchjob_manifest("pt", "team-a", workers=2)
    )
    sim.settle()
    pods = {p.metadata.name: p for p in core.list_namespaced_pod("team-a").items}
    assert sorted(pods) == ["pt-master-0", "pt-worker-0", "pt-worker-1"]
    worker = pods["pt-worker-1"]
    assert worker.metadata.labels == {
        "training.kubeflow.org/job-name": "pt",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    assert pods["pt-master-0"].metadata.labels["training.kubeflow.org/job-role"] == "master"
    owner = worker.metadata.owner_references[0]
    assert (owner.api_version, owner.kind, owner.name, owner.uid, owner.controller) == (
        "kubeflow.org/v1",
        "PyTorchJob",
        "pt",
        job["metadata"]["uid"],
        True,
    )
    assert worker.spec.restart_policy == "OnFailure"  # the PyTorchJob default
    selected = core.list_namespaced_pod("team-a", label_selector="training.kubeflow.org/job-name=pt").items
    assert len(selected) == 3


@pytest.mark.parametrize(
    "plural, manifest, pods, lead",
    [
        ("xgboostjobs", xgboostjob_manifest("xg", "team-a", workers=1), ["xg-master-0", "xg-worker-0"], "xg-master-0"),
        ("paddlejobs", paddlejob_manifest("pd", "team-a", workers=2), ["pd-worker-0", "pd-worker-1"], None),
        ("jaxjobs", jaxjob_manifest("jx", "team-a", workers=2), ["jx-worker-0", "jx-worker-1"], "jx-worker-0"),
    ],
)
def test_each_kind_names_its_pods_and_master(custom, core, sim, plural, manifest, pods, lead):
    custom.create_namespaced_custom_object(G, V, "team-a", plural, manifest)
    sim.settle()
    listed = {p.metadata.name: p.metadata.labels for p in core.list_namespaced_pod("team-a").items}
    assert sorted(listed) == pods
    masters = [name for name, labels in listed.items() if labels.get("training.kubeflow.org/job-role") == "master"]
    assert masters == ([lead] if lead else [])
    operator = {"xgboostjobs": "xgboostjob", "paddlejobs": "paddlejob", "jaxjobs": "jaxjob"}[plural]
    assert {labels["training.kubeflow.org/operator-name"] for labels in listed.values()} == {f"{operator}-controller"}


@pytest.mark.parametrize(
    "plural, kind, manifest, created, running, succeeded",
    [
        (
            "pytorchjobs",
            "PyTorchJob",
            pytorchjob_manifest("run", "team-a", workers=2, duration=30),
            "PyTorchJob run is created.",
            "PyTorchJob run is running.",
            "PyTorchJob run is successfully completed.",
        ),
        (
            "xgboostjobs",
            "XGBoostJob",
            xgboostjob_manifest("run", "team-a", workers=2, duration=30),
            "XGBoostJob run is created.",
            "XGBoostJob run is running.",
            "XGBoostJob run is successfully completed.",
        ),
        (
            "paddlejobs",
            "PaddleJob",
            paddlejob_manifest("run", "team-a", workers=2, duration=30),
            "PaddleJob run is created.",
            "PaddleJob team-a/run is running.",
            "PaddleJob team-a/run successfully completed.",
        ),
        (
            "jaxjobs",
            "JAXJob",
            jaxjob_manifest("run", "team-a", workers=2, duration=30),
            "JAXJob run is created.",
            "JAXJob team-a/run is running.",
            "JAXJob team-a/run successfully completed.",
        ),
    ],
)
def test_created_running_succeeded_after_the_duration(custom, sim, plural, kind, manifest, created, running, succeeded):
    custom.create_namespaced_custom_object(G, V, "team-a", plural, manifest)
    sim.advance(3)
    assert conditions(sim, plural, "run") == {
        "Created": ("True", f"{kind}Created"),
        "Running": ("True", f"{kind}Running"),
    }
    assert message(sim, plural, "run", "Created") == created and message(sim, plural, "run", "Running") == running
    assert set(phases(sim, kind, "run").values()) == {"Running"}
    sim.advance(29)
    status = sim.cluster.job(f"{plural}.{G}", "team-a", "run")["status"]
    assert conditions(sim, plural, "run")["Succeeded"] == ("True", f"{kind}Succeeded")
    assert conditions(sim, plural, "run")["Running"][0] == "False"
    assert message(sim, plural, "run", "Succeeded") == succeeded
    assert set(phases(sim, kind, "run").values()) == {"Succeeded"}  # cleanPodPolicy None keeps them
    assert status["completionTime"] and all("active" not in s for s in status["replicaStatuses"].values())
    assert sum(s.get("succeeded", 0) for s in status["replicaStatuses"].values()) == len(phases(sim, kind, "run"))


def test_pytorch_master_decides_success_and_without_master_all_workers_do(custom, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", "pytorchjobs", pytorchjob_manifest("m", "team-a", workers=2, duration=1000)
    )
    custom.create_namespaced_custom_object(
        G, V, "team-a", "pytorchjobs", pytorchjob_manifest("w", "team-a", workers=2, master=False, duration=1000)
    )
    sim.advance(3)
    assert sim.cluster.pods("team-a", "w")[0]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    sim.cluster.kubelet.terminate(("team-a", "m-master-0"), 0, sim.clock.now())
    sim.cluster.kubelet.terminate(("team-a", "w-worker-0"), 0, sim.clock.now())
    sim.settle()
    assert conditions(sim, "pytorchjobs", "m")["Succeeded"][0] == "True"
    assert "Succeeded" not in conditions(sim, "pytorchjobs", "w")  # worker 0 alone is not enough
    sim.cluster.kubelet.terminate(("team-a", "w-worker-1"), 0, sim.clock.now())
    sim.settle()
    assert message(sim, "pytorchjobs", "w", "Succeeded") == "PyTorchJob team-a/w successfully completed."


def test_an_elastic_pytorchjob_succeeds_with_any_worker(custom, sim):
    manifest = pytorchjob_manifest("el", "team-a", workers=3, master=False, elastic={"minReplicas": 1}, duration=1000)
    custom.create_namespaced_custom_object(G, V, "team-a", "pytorchjobs", manifest)
    sim.advance(3)
    sim.cluster.kubelet.terminate(("team-a", "el-worker-2"), 0, sim.clock.now())
    sim.settle()
    assert conditions(sim, "pytorchjobs", "el")["Succeeded"] == ("True", "PyTorchJobSucceeded")


def test_a_failing_master_fails_the_job_and_cleanpodpolicy_none_keeps_the_rest(custom, sim):
    manifest = pytorchjob_manifest("f", "team-a", workers=2, duration=5, fail=True, restart_policy="Never")
    custom.create_namespaced_custom_object(G, V, "team-a", "pytorchjobs", manifest)
    sim.advance(10)
    assert conditions(sim, "pytorchjobs", "f")["Failed"] == ("True", "PyTorchJobFailed")
    assert message(sim, "pytorchjobs", "f", "Failed") == "PyTorchJob f is failed because 1 Master replica(s) failed."
    assert phases(sim, "PyTorchJob", "f") == {"f-master-0": "Failed", "f-worker-0": "Running", "f-worker-1": "Running"}


def test_on_failure_restarts_in_place_until_the_backoff_limit(custom, sim):
    manifest = pytorchjob_manifest("r", "team-a", workers=1, duration=10, fail=True, backoff_limit=1)
    custom.create_namespaced_custom_object(G, V, "team-a", "pytorchjobs", manifest)
    sim.advance(13)
    assert conditions(sim, "pytorchjobs", "r")["Failed"] == ("True", "PyTorchJobFailed")
    assert (
        message(sim, "pytorchjobs", "r", "Failed")
        == "Job r has failed because it has reached the specified backoff limit"
    )


def test_suspend_deletes_pods_and_resume_recreates_them(custom, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", "xgboostjobs", xgboostjob_manifest("s", "team-a", workers=1, duration=100)
    )
    sim.advance(5)
    custom.patch_namespaced_custom_object(
        G, V, "team-a", "xgboostjobs", "s", {"spec": {"runPolicy": {"suspend": True}}}
    )
    sim.settle()
    assert phases(sim, "XGBoostJob", "s") == {}
    assert conditions(sim, "xgboostjobs", "s")["Suspended"] == ("True", "XGBoostJobSuspended")
    assert conditions(sim, "xgboostjobs", "s")["Running"] == ("False", "XGBoostJobSuspended")
    assert message(sim, "xgboostjobs", "s", "Suspended") == "XGBoostJob s is suspended."
    custom.patch_namespaced_custom_object(
        G, V, "team-a", "xgboostjobs", "s", {"spec": {"runPolicy": {"suspend": False}}}
    )
    sim.advance(3)
    assert phases(sim, "XGBoostJob", "s") == {"s-master-0": "Running", "s-worker-0": "Running"}
    assert conditions(sim, "xgboostjobs", "s")["Suspended"] == ("False", "XGBoostJobResumed")
    sim.advance(100)
    assert "Succeeded" in conditions(sim, "xgboostjobs", "s")


def test_created_suspended_creates_no_pods(custom, sim):
    custom.create_namespaced_custom_object(
        G, V, "team-a", "jaxjobs", jaxjob_manifest("later", "team-a", workers=2, suspend=True)
    )
    sim.settle()
    assert phases(sim, "JAXJob", "later") == {}
    assert conditions(sim, "jaxjobs", "later") == {
        "Created": ("True", "JAXJobCreated"),
        "Suspended": ("True", "JAXJobSuspended"),
    }


def test_the_webhooks_want_exact_replica_types_but_tfjobs_accept_any_case(custom):
    manifest = pytorchjob_manifest("lower", "team-a", workers=1)
    manifest["spec"]["pytorchReplicaSpecs"]["worker"] = manifest["spec"]["pytorchReplicaSpecs"].pop("Worker")
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", "pytorchjobs", manifest)
    body = json.loads(caught.value.body)
    assert caught.value.status == 422
    assert body["details"]["causes"][0]["field"] == "spec.pytorchReplicaSpecs[worker]"
    tf = tfjob_manifest("lower", "team-a", workers=1)
    tf["spec"]["tfReplicaSpecs"]["worker"] = tf["spec"]["tfReplicaSpecs"].pop("Worker")
    custom.create_namespaced_custom_object(G, V, "team-a", "tfjobs", tf)


@pytest.mark.parametrize(
    "plural, manifest, field",
    [
        ("xgboostjobs", jaxjob_manifest("x", "team-a"), "spec.xgbReplicaSpecs"),
        (
            "pytorchjobs",
            pytorchjob_manifest("x", "team-a", workers=0),
            "spec.pytorchReplicaSpecs[Master].template.spec.containers",
        ),
    ],
)
def test_invalid_jobs_are_refused(custom, plural, manifest, field):
    manifest["kind"] = {"xgboostjobs": "XGBoostJob", "pytorchjobs": "PyTorchJob"}[plural]
    if plural == "pytorchjobs":
        manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["name"] = "main"
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", plural, manifest)
    assert caught.value.status == 422
    assert field in [c["field"] for c in json.loads(caught.value.body)["details"]["causes"]]


def test_xgboost_needs_a_master(custom):
    manifest = xgboostjob_manifest("nomaster", "team-a", workers=2)
    del manifest["spec"]["xgbReplicaSpecs"]["Master"]
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", "xgboostjobs", manifest)
    causes = json.loads(caught.value.body)["details"]["causes"]
    assert caught.value.status == 422 and causes[0]["field"] == "spec.xgbReplicaSpecs[Master]"


def test_managed_by_is_checked_and_multikueue_jobs_are_left_alone(custom, sim):
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(
            G, V, "team-a", "pytorchjobs", pytorchjob_manifest("other", "team-a", managed_by="example.com/mine")
        )
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["details"]["causes"][0]["field"] == "spec.runPolicy.managedBy"
    custom.create_namespaced_custom_object(
        G, V, "team-a", "pytorchjobs", pytorchjob_manifest("mk", "team-a", managed_by="kueue.x-k8s.io/multikueue")
    )
    sim.settle()
    assert phases(sim, "PyTorchJob", "mk") == {}
    assert "status" not in sim.cluster.job("PyTorchJob", "team-a", "mk")
    with pytest.raises(client.ApiException) as caught:  # and the field is immutable
        custom.patch_namespaced_custom_object(
            G,
            V,
            "team-a",
            "pytorchjobs",
            "mk",
            {"spec": {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}},
        )
    assert caught.value.status == 422


def test_quota_counts_each_kind_and_deleting_a_job_deletes_its_pods(custom, core, sim):
    core.replace_namespaced_resource_quota(
        "quota",
        "team-a",
        {
            "metadata": {"name": "quota"},
            "spec": {"hard": {"count/pytorchjobs.kubeflow.org": "1", "count/jaxjobs.kubeflow.org": "5", "pods": "20"}},
        },
    )
    custom.create_namespaced_custom_object(
        G, V, "team-a", "pytorchjobs", pytorchjob_manifest("one", "team-a", workers=1)
    )
    custom.create_namespaced_custom_object(G, V, "team-a", "jaxjobs", jaxjob_manifest("jx", "team-a", workers=1))
    with pytest.raises(client.ApiException) as caught:
        custom.create_namespaced_custom_object(G, V, "team-a", "pytorchjobs", pytorchjob_manifest("two", "team-a"))
    assert caught.value.status == 403
    assert (
        "exceeded quota: quota, requested: count/pytorchjobs.kubeflow.org=1" in json.loads(caught.value.body)["message"]
    )
    sim.settle()
    used = core.read_namespaced_resource_quota("quota", "team-a").status.used
    assert used == {"count/pytorchjobs.kubeflow.org": "1", "count/jaxjobs.kubeflow.org": "1", "pods": "3"}
    custom.delete_namespaced_custom_object(G, V, "team-a", "pytorchjobs", "one")
    assert [p.metadata.name for p in core.list_namespaced_pod("team-a").items] == ["jx-worker-0"]
    assert core.read_namespaced_resource_quota("quota", "team-a").status.used["count/pytorchjobs.kubeflow.org"] == "0"
