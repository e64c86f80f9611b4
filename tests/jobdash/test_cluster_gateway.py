"""The gateway against a real kubesim over HTTP, through the official client: no mocks."""

import pytest
from kubernetes.client.exceptions import ApiException

from jobdash.cluster import gateway as gw
from jobdash.cluster import informer
from jobdash.cluster.kube import KubeGateway, api_client, translate
from kubesim.testing import running_kubesim
from tests.jobdash.dispatch_support import tf
from tests.waiting import wait_until

JOBDASH = "system:serviceaccount:jobdash:jobdash"
CONFIG = {
    "nodes": [
        {"prefix": "cpu", "count": 2, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        {
            "prefix": "gpu",
            "count": 1,
            "capacity": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "labels": {"pool": "gpu"},
            "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        },
    ],
    "namespaces": [
        {
            "name": "team-a",
            "quota": {"requests.cpu": "12", "requests.memory": "48Gi", "count/tfjobs.kubeflow.org": "3"},
        },
        {"name": "team-b"},
    ],
    "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
    "kubelet": {"start_delay_seconds": 1.0},
    "workload": {"default_duration_seconds": 30.0},
}


def tfjob(name: str, workers: int = 2, cpu: str = "2", namespace: str = "team-a") -> dict:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "vision"}},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": workers,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "tf:2",
                                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                                }
                            ]
                        }
                    },
                }
            }
        },
    }


def watch_is_live(gateway) -> None:
    """After the initial list, a new object can only reach the cache through the watch."""
    gateway.create_job_object(job_id=999, manifest=tfjob("probe", workers=1, cpu="100m", namespace="team-b"))
    assert wait_until(lambda: gateway.job_object(tf("team-b", "probe")) is not None)


@pytest.fixture
def sim():
    with running_kubesim(CONFIG, manual_clock=True) as sim:
        yield sim


@pytest.fixture
def gateway(sim):
    events = []
    gateway = KubeGateway(api_client("kubeconfig", sim.kubeconfig_path), retries=2, backoff=0.01)
    gateway.start(on_event=events.append, timeout=10)
    gateway.events = events
    yield gateway
    gateway.stop()


def test_reads_quotas_and_nodes_in_canonical_units(gateway):
    quotas = {q.namespace: q for q in gateway.quotas()}
    assert set(quotas) == {"team-a"}  # no ResourceQuota in team-b
    assert quotas["team-a"].hard == {
        "requests.cpu": 12000,
        "requests.memory": 48 * 2**30,
        "count/tfjobs.kubeflow.org": 3,
    }
    nodes = {n.name: n for n in gateway.nodes()}
    assert len(nodes) == 3
    gpu = next(n for n in nodes.values() if n.labels.get("pool") == "gpu")
    assert gpu.allocatable["nvidia.com/gpu"] == 8 and gpu.allocatable["cpu"] == 32000
    assert gpu.taints[0]["key"] == "gpu" and not gpu.unschedulable


def test_create_labels_the_tfjob_and_is_idempotent_for_the_same_job(sim, gateway):
    info = gateway.create_job_object(job_id=41, manifest=tfjob("train"))
    assert (info.namespace, info.name, info.job_id) == ("team-a", "train", 41)
    stored = sim.cluster.tfjob("team-a", "train")
    assert stored["metadata"]["labels"] == {"team": "vision", gw.JOB_ID_LABEL: "41", gw.MANAGED_LABEL: "true"}
    # a retry (or a new leader after a crash) lands on the same object
    again = gateway.create_job_object(job_id=41, manifest=tfjob("train"))
    assert again.uid == info.uid
    assert wait_until(lambda: gateway.job_object(tf("team-a", "train")) is not None)
    assert gateway.job_object(tf("team-a", "train")).job_id == 41
    attempts = [a for a in sim.cluster.audit if a["name"] == "train"]
    assert [a["code"] for a in attempts] == [201, 409]  # created once; the retry was refused, not duplicated
    assert {a["user"] for a in attempts} == {JOBDASH}


def test_a_foreign_tfjob_of_the_same_name_is_already_exists(gateway):
    gateway.create_job_object(job_id=1, manifest=tfjob("shared"))
    with pytest.raises(gw.AlreadyExists, match="belongs to job 1"):
        gateway.create_job_object(job_id=2, manifest=tfjob("shared"))


def test_pods_show_up_in_the_cache_with_requests_and_owner(sim, gateway):
    gateway.create_job_object(job_id=7, manifest=tfjob("gang", workers=3, cpu="1"))
    sim.advance(0.5)
    sim.advance(2.0)
    gang = lambda: gateway.pods_of_jobs([tf("team-a", "gang")])[tf("team-a", "gang")]  # noqa: E731
    assert wait_until(lambda: len(gang()) == 3), "the operator's pods never reached the cache"
    pods = gang()
    assert {p.name for p in pods} == {f"gang-worker-{i}" for i in range(3)}
    assert all(p.requests["cpu"] == 1000 and p.requests["memory"] == 2**30 for p in pods)
    assert all(p.labels["training.kubeflow.org/replica-type"] == "worker" for p in pods)
    assert {p.name for p in gateway.pods() if p.labels.get("training.kubeflow.org/job-name") == "gang"} == {
        p.name for p in pods
    }


def test_suspend_and_resume(sim, gateway):
    gateway.create_job_object(job_id=3, manifest=tfjob("pausable"))
    assert wait_until(lambda: 3 in gateway.changed_job_ids())  # the journal of new and changed objects
    gateway.set_suspended(tf("team-a", "pausable"), True)
    assert gateway.read_job_object(tf("team-a", "pausable")).suspended
    assert wait_until(lambda: gateway.job_object(tf("team-a", "pausable")).suspended)
    assert 3 in gateway.changed_job_ids()  # a change of the object journals it again
    gateway.set_suspended(tf("team-a", "pausable"), False)
    assert not gateway.read_job_object(tf("team-a", "pausable")).suspended


def test_a_journal_nobody_drains_stops_growing(monkeypatch):
    """A standby dispatcher's watch cache journals changes nobody drains: past the limit
    it keeps only that there were too many."""
    monkeypatch.setattr(informer, "JOURNAL_LIMIT", 2)
    cache = informer.Informer(
        "things", list, lambda obj: obj, lambda *_: None, indexes={"id": lambda obj: obj["id"]}, journal=("id",)
    )

    def event(kind: str, i: int) -> None:
        cache._apply(kind, {"metadata": {"namespace": "ns", "name": f"thing-{i}"}, "id": i})

    event("ADDED", 0)
    event("ADDED", 1)
    assert cache.drain_changed("id") == {0, 1}
    for i in range(3):
        event("MODIFIED", i)
    assert cache.drain_changed("id") is None  # more than it keeps: look at everything
    event("MODIFIED", 0)
    assert cache.drain_changed("id") == {0}  # and it starts again


def test_delete_and_delete_of_a_missing_tfjob(sim, gateway):
    gateway.create_job_object(job_id=5, manifest=tfjob("doomed"))
    assert wait_until(lambda: gateway.job_object(tf("team-a", "doomed")))
    # the cycle finds objects by job id (an index kept up to date with every event)
    assert 5 in gateway.live_job_ids()
    assert {job_id: o.name for job_id, o in gateway.job_objects_of([5, 6]).items()} == {5: "doomed"}
    gateway.delete_job_object(tf("team-a", "doomed"))
    gateway.delete_job_object(tf("team-a", "doomed"))  # already gone: no error
    assert wait_until(lambda: gateway.job_object(tf("team-a", "doomed")) is None)
    assert 5 not in gateway.live_job_ids() and gateway.job_objects_of([5]) == {}
    assert any(e.kind == "tfjobs.kubeflow.org" and e.type == "DELETED" and e.name == "doomed" for e in gateway.events)
    with pytest.raises(gw.NotFound):
        gateway.read_job_object(tf("team-a", "doomed"))


def test_quota_on_tfjob_count_is_quota_exceeded(gateway):
    for i in range(3):
        gateway.create_job_object(job_id=100 + i, manifest=tfjob(f"count-{i}", workers=1, cpu="100m"))
    with pytest.raises(gw.QuotaExceeded, match="exceeded quota"):
        gateway.create_job_object(job_id=200, manifest=tfjob("count-3", workers=1, cpu="100m"))


def test_invalid_object_is_fatal(gateway):
    bad = tfjob("Not_Valid")
    with pytest.raises(gw.Fatal):
        gateway.create_job_object(job_id=9, manifest=bad)


def test_transient_errors_are_retried_then_reported(sim, gateway):
    sim.cluster.faults.add(verbs=["create"], resources=["tfjobs"], status=429, times=2)
    info = gateway.create_job_object(job_id=11, manifest=tfjob("flaky"))  # 2 refusals, 3rd try passes
    assert info.job_id == 11
    sim.cluster.faults.add(verbs=["create"], resources=["tfjobs"], status=503, error_rate=1.0)
    with pytest.raises(gw.Transient):
        gateway.create_job_object(job_id=12, manifest=tfjob("down"))


@pytest.mark.parametrize("abrupt", [False, True])
def test_dropped_watches_reconnect_without_losing_changes(sim, gateway, abrupt):
    tfjobs = gateway.informers["tfjobs.kubeflow.org"]
    watch_is_live(gateway)
    watches, reconnects = tfjobs.watches, tfjobs.reconnects
    assert sim.cluster.drop_watches(abrupt=abrupt) >= 1
    gateway.create_job_object(job_id=21, manifest=tfjob("after-drop"))
    assert wait_until(lambda: gateway.job_object(tf("team-a", "after-drop")) is not None)
    assert tfjobs.watches > watches
    if abrupt:
        assert tfjobs.reconnects > reconnects


def test_watch_too_old_relists(sim, gateway):
    """Changes missed while the watch was down and then compacted away: 410 Gone, then a fresh list."""
    tfjobs = gateway.informers["tfjobs.kubeflow.org"]
    watch_is_live(gateway)
    relists = tfjobs.relists
    # Keep the informer from re-watching for a while, change things, and compact the history.
    sim.cluster.faults.add(verbs=["watch"], resources=["tfjobs"], status=503, times=3)
    sim.cluster.drop_watches()
    for i in range(3):
        gateway.create_job_object(
            job_id=300 + i, manifest=tfjob(f"missed-{i}", workers=1, cpu="100m", namespace="team-b")
        )
    sim.cluster.store.compact()
    assert wait_until(lambda: tfjobs.relists > relists, timeout=10)
    assert {"missed-0", "missed-1", "missed-2"} <= {j.name for j in gateway.job_objects()}


def test_translate_maps_statuses():
    def error(status, reason="", message=""):
        e = ApiException(status=status, reason=reason)
        e.body = f'{{"reason": "{reason}", "message": "{message}"}}'
        return e

    assert isinstance(translate(error(409, "AlreadyExists")), gw.AlreadyExists)
    assert isinstance(translate(error(409, "Conflict")), gw.Conflict)
    assert isinstance(translate(error(403, "Forbidden", "pods is forbidden: exceeded quota: q")), gw.QuotaExceeded)
    assert isinstance(translate(error(403, "Forbidden", "admission webhook denied")), gw.Fatal)
    assert isinstance(translate(error(422, "Invalid")), gw.Fatal)
    assert isinstance(translate(error(404, "NotFound")), gw.NotFound)
    for status in (0, 429, 500, 503, 504):
        assert isinstance(translate(error(status)), gw.Transient)


def test_a_kind_the_cluster_does_not_serve_syncs_empty_and_is_looked_at_again(monkeypatch):
    """A cluster without JobSet's or Trainer's CRDs answers 404: the dispatcher still starts,
    and a CRD installed later is picked up without a restart."""
    from jobdash.cluster import informer as informer_module
    from jobdash.cluster.informer import Informer

    monkeypatch.setattr(informer_module, "NOT_SERVED_RETRY_S", 0.05)
    served = {"yes": False}

    class Response:
        status, reason = 200, "OK"
        data = b'{"items": [{"metadata": {"namespace": "a", "name": "x"}}], "metadata": {"resourceVersion": "5"}}'

    def list_call(watch=False, **kwargs):
        if not served["yes"]:
            raise ApiException(status=404, reason="the server could not find the requested resource")
        if watch:
            raise ApiException(status=500, reason="no watch in this test")
        return Response()

    cache = Informer("jobsets.jobset.x-k8s.io", list_call, lambda obj: obj["metadata"]["name"], lambda *a: None)
    cache.start()
    try:
        assert cache.wait_synced(5) and cache.items() == [] and not cache.served
        served["yes"] = True
        assert wait_until(lambda: cache.items() == ["x"], 5) and cache.served
    finally:
        cache.stop()
