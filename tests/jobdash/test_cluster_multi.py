"""One gateway over two clusters (jobdash/cluster/multi.py), against two kubesims over HTTPS:
nodes carry their cluster's label, quotas their cluster, a job's object is created in the
cluster its manifest names and later writes follow it there; a node name in both clusters is
left out; a frozen (lost) cluster's objects are not live, and its copy of a job is not the
job's; a cluster cut off stops answering and answers again; the configuration is checked."""

import re

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from jobdash.cluster.factory import gateway_of
from jobdash.cluster.kube import KubeGateway, api_client
from jobdash.cluster.multi import MultiGateway
from jobdash.clusters.config import ClusterConfig, load
from jobdash.dispatch.cycle import Dispatcher
from kubesim.manifests import tfjob_manifest
from kubesim.testing import running_kubesim
from queueing.clusters import CLUSTER_LABEL
from tests.waiting import eventually

from .dispatch_support import cluster_config, settings, tf


def config(prefix: str, quota_cpu: str) -> dict:
    found = cluster_config(quota_cpu=quota_cpu)
    found["nodes"][0]["prefix"] = prefix
    return found


@pytest.fixture
def two():
    with running_kubesim(config("east", "6")) as east, running_kubesim(config("west", "8")) as west:
        gateways = {
            name: KubeGateway(api_client("kubeconfig", sim.kubeconfig_path), retries=1, backoff=0.01)
            for name, sim in (("east", east), ("west", west))
        }
        multi = MultiGateway(gateways, {"east": {"gpu": "a100"}, "west": {"gpu": "h100"}})
        multi.start(timeout=10, probe_every=0.2)
        try:
            yield multi, east, west
        finally:
            multi.stop()


def created_in(sim, name: str) -> bool:
    return any(a["name"] == name and a["code"] == 201 for a in sim.cluster.audit)


def test_reads_are_both_clusters_each_labelled_with_its_own(two):
    multi, _, _ = two
    nodes = {node.name: node.labels[CLUSTER_LABEL] for node in multi.nodes()}
    assert nodes == {"east-0": "east", "east-1": "east", "west-0": "west", "west-1": "west"}
    assert all(a is b for a, b in zip(multi.nodes(), multi.nodes(), strict=True))  # unchanged: the same objects
    quotas = {(q.cluster, q.namespace): q.hard["requests.cpu"] for q in multi.quotas()}
    assert quotas == {("east", "team-a"): 6000, ("west", "team-a"): 8000}
    assert multi.answered_at("east") and multi.answered_at("west")


def test_a_job_is_created_where_its_manifest_says_and_followed_there(two):
    multi, east, west = two
    manifest = tfjob_manifest("to-west", "team-a", duration=60)
    manifest["metadata"]["annotations"] = {CLUSTER_LABEL: "west"}
    created = multi.create_job_object(job_id=7, manifest=manifest)
    assert created_in(west, "to-west") and not created_in(east, "to-west")
    key = tf("team-a", "to-west")
    assert multi.cluster_of(key) == "west"
    eventually(lambda: multi.job_object(key) is not None, 10)
    assert multi.job_objects_of([7])[7].uid == created.uid
    multi.set_suspended(key, True)
    assert multi.gateways["west"].read_job_object(key).suspended
    multi.delete_job_object(key)
    eventually(lambda: multi.job_objects_of([7]) == {}, 10)
    # Without the annotation: the first cluster (the primary).
    multi.create_job_object(job_id=8, manifest=tfjob_manifest("plain", "team-a", duration=60))
    assert created_in(east, "plain")


def test_a_frozen_clusters_copy_is_not_live_and_not_the_job(two):
    multi, _, _ = two
    for cluster in ("west", "east"):  # the same job in both: a copy left in a lost cluster
        manifest = tfjob_manifest("twin", "team-a", duration=60)
        manifest["metadata"]["annotations"] = {CLUSTER_LABEL: cluster}
        multi.create_job_object(job_id=9, manifest=manifest)
    key = tf("team-a", "twin")
    eventually(lambda: all(g.job_object(key) is not None for g in multi.gateways.values()), 10)
    eventually(lambda: len(multi.pods_of_jobs([key]).get(key, [])) == 1, 10)
    multi.frozen = frozenset({"west"})
    assert multi.cluster_of(key) == "east"
    assert 9 in multi.live_job_ids()
    assert multi.job_objects_of([9])[9].uid == multi.gateways["east"].job_object(key).uid
    assert len(multi.pods_of_jobs([key])[key]) == 1  # east's pod only, not west's of the same name
    multi.frozen = frozenset({"east", "west"})
    assert multi.live_job_ids() == set() and multi.job_objects_of([9]) == {}


def test_a_node_name_in_both_clusters_is_left_out():
    with running_kubesim(config("node", "6")) as east, running_kubesim(config("node", "6")) as west:
        multi = gateway_of([ClusterConfig("east", east.kubeconfig_path), ClusterConfig("west", west.kubeconfig_path)])
        assert isinstance(multi, MultiGateway)
        multi.start(timeout=10)
        try:
            assert multi.nodes() == []
        finally:
            multi.stop()


def test_a_cluster_cut_off_stops_answering_and_answers_again(two):
    multi, _, west = two
    west.cluster.cut_off(True)
    assert not multi.gateways["west"].answers(timeout=1)
    before = multi.answered_at("west")
    multi.probe()
    assert multi.answered_at("west") == before
    west.cluster.cut_off(False)
    eventually(lambda: multi.answered_at("west") > before, 10)


def test_the_clusters_file_is_checked_naming_the_field(tmp_path):
    kubeconfig = tmp_path / "k.yaml"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    good = {
        "clusters": [
            {"name": "east", "kubeconfig": "k.yaml", "labels": {"gpu": "a100"}},
            {"name": "west", "incluster": True},
        ]
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(good))
    found = load(tmp_path / "c.yaml")
    assert [(c.name, c.kubeconfig, c.incluster, dict(c.labels)) for c in found] == [
        ("east", str(kubeconfig), False, {"gpu": "a100"}),
        ("west", None, True, {}),
    ]
    bad = [
        ({"clusters": []}, "`clusters` must be a list"),
        ({"clusters": [{"name": "East"}]}, "clusters[0].name must be a DNS label"),
        ({"clusters": [{"name": "east"}]}, "clusters[0]: give exactly one of kubeconfig and incluster"),
        ({"clusters": [{"name": "east", "kubeconfig": "nope.yaml"}]}, "clusters[0].kubeconfig: no file"),
        ({"clusters": [{"name": "e", "incluster": True}, {"name": "e", "incluster": True}]}, "given to two clusters"),
        ({"clusters": [{"name": "e", "incluster": True, "zone": "x"}]}, "unknown key(s) zone"),
        ({"clusters": [{"name": "e", "incluster": True, "labels": {"gpu": 1}}]}, "clusters[0].labels must map strings"),
    ]
    for document, words in bad:
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(document))
        with pytest.raises(ImproperlyConfigured, match=re.escape(words)):
            load(tmp_path / "c.yaml")


@pytest.mark.django_db
def test_a_held_object_in_another_cluster_sends_its_job_back_to_the_queue_for_that_cluster(two, alice):
    """Release mode unsuspend: a job created with kubectl in west is held there; released to
    east (the plan did not know), nothing is let run: it is queued again, for west."""
    from jobdash.cluster.gateway import ElsewhereHeld
    from jobdash.dispatch.writers import release
    from jobdash.jobs import services
    from jobdash.jobs.models import Job, State

    multi, east, _ = two
    held = tfjob_manifest("held", "team-a", duration=60, suspend=True)
    held["metadata"]["annotations"] = {CLUSTER_LABEL: "west"}
    multi.create_job_object(job_id=11, manifest=held)
    key = tf("team-a", "held")
    eventually(lambda: multi.job_object(key) is not None, 10)
    job = services.job_submit(user=alice, manifest=yaml.safe_dump(tfjob_manifest("held", "team-a")), source="api")
    Job.objects.filter(pk=job.pk).update(state=State.RELEASED, cluster="east")
    to_east = release.object_manifest(job.parsed, "team-a", "east")
    outcome = release.send(multi, job.pk, key, to_east, "unsuspend")
    assert isinstance(outcome.error, ElsewhereHeld) and outcome.error.cluster == "west"
    assert multi.gateways["west"].read_job_object(key).suspended  # nothing let run
    assert release.record(outcome, backoff_seconds=1.0) == "requeued"
    job.refresh_from_db()
    assert (job.state, job.cluster) == (State.QUEUED, "west")
    assert not created_in(east, "held")


def test_nothing_is_written_to_a_lost_cluster_and_saying_so_takes_no_time(two):
    import time

    from jobdash.cluster.gateway import Transient

    multi, _, west = two
    west.cluster.cut_off(True)  # silent: a write there would wait for its timeouts and retries
    multi.frozen = frozenset({"west"})
    manifest = tfjob_manifest("to-lost", "team-a", duration=60)
    manifest["metadata"]["annotations"] = {CLUSTER_LABEL: "west"}
    started = time.monotonic()
    with pytest.raises(Transient, match="cluster west is lost"):
        multi.create_job_object(job_id=12, manifest=manifest)
    assert time.monotonic() - started < 0.5
    multi.frozen = frozenset({"east"})  # the primary lost: its mirror and its Events wait too
    with pytest.raises(Transient, match="cluster east is lost"):
        multi.update_queued("team-a", "anything", {"position": 1})


@pytest.mark.django_db
def test_a_leader_of_one_cluster_forgets_the_clusters_a_run_with_several_recorded(sim, gateway, term):
    """make run with two clusters, then with one: the pages, metrics and submissions no longer
    know the two (a job's jobdash.io/cluster is then not checked against them)."""
    from jobdash.clusters.models import Cluster
    from jobdash.jobs import cluster_port

    Cluster.objects.create(name="east")
    Cluster.objects.create(name="west", labels={"gpu": "h100"})
    assert cluster_port.cluster_labels() == {"east": {}, "west": {"gpu": "h100"}}
    Dispatcher(gateway, settings()).cycle(term)
    assert not Cluster.objects.exists() and cluster_port.cluster_labels() == {}
