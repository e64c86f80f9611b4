"""Many clusters, one queue (issue 49), end to end: `make run`'s stack with two kubesim
clusters (JOBDASH_EMBEDDED_CLUSTERS=2) and the real dispatcher. Jobs land in the cluster
their annotations ask for or where they fit, a job created with kubectl in the second
cluster is queued by the same jobdash, and a cluster cut off (its API server silent) is
marked lost: nothing new goes there, a running job that may be restarted starts again in the
other cluster, and when the cluster comes back its copy there is deleted before it takes
jobs again; no job ever has two live objects while both clusters answer."""

import json

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from jobdash.clusters.models import Cluster, ClusterHealth, LeftCopy
from jobdash.embedded.stack import EmbeddedStack
from jobdash.jobs.models import Job, JobEvent, LostWork, Namespace, State
from jobdash.usage import selectors as usage
from kubesim.manifests import tfjob_manifest
from tests.jobdash.conftest import token_client
from tests.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)
EMBEDDED = "jobdash/embedded/embedded_cluster.yaml"


def quick_config(tmp_path):
    quick = yaml.safe_load(open(EMBEDDED).read())
    quick["kubelet"] = {"start_delay_seconds": 0.1}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(quick))
    return path


def submit(api, name: str, annotations: dict | None = None, **shape) -> Job:
    manifest = tfjob_manifest(name, "team-a", **shape)
    manifest["metadata"]["annotations"] = {**manifest["metadata"].get("annotations", {}), **(annotations or {})}
    response = api.post("/api/v1/jobs/", data=yaml.safe_dump(manifest), content_type="application/yaml")
    assert response.status_code == 201, response.content
    return Job.objects.get(pk=response.json()["id"])


def objects_in(embedded, name: str) -> list[dict]:
    admin = client.CustomObjectsApi(
        config.new_client_from_config(str(embedded.people_kubeconfig), context="kubernetes-admin")
    )
    listed = admin.list_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs")
    return [o for o in listed["items"] if o["metadata"]["name"] == name and not o["metadata"].get("deletionTimestamp")]


@pytest.fixture
def two(tmp_path, settings):
    staff = User.objects.create_user("root", password="root-pass-123", is_staff=True, is_superuser=True)
    settings.JOBDASH_CLUSTER_LOST_AFTER_SECONDS = 2.0
    settings.JOBDASH_CLUSTER_REPLAN_RELEASED_SECONDS = 1.0
    settings.JOBDASH_CLUSTER_REPLAN_RUNNING_SECONDS = 1.0
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name)
    with EmbeddedStack(tmp_path, quick_config(tmp_path), tick_seconds=0.2, clusters=2) as stack:
        stack.gateway.probe()
        yield stack, token_client(staff)


def test_jobs_land_in_the_cluster_they_ask_for_and_kubectl_in_the_second_cluster_queues_in_the_same_jobdash(two):
    stack, api = two
    east, west = stack.clusters
    to_west = submit(api, "to-west", {"jobdash.io/cluster": "west"}, workers=2, gpu=8, duration=1)
    by_label = submit(api, "a100", {"jobdash.io/cluster-selector": "gpu=a100"}, gpu=8, duration=1)
    for job, cluster, nodes in ((to_west, "west", "west-"), (by_label, "east", "rack")):
        eventually(lambda job=job: Job.objects.get(pk=job.pk).state == State.SUCCEEDED, 40)
        job.refresh_from_db()
        assert job.cluster == cluster
        assert all(node.startswith(nodes) for _, _, node in job.placement)
        assert JobEvent.objects.filter(job=job, type="Released", message__contains=f"cluster {cluster}").exists()
    created = [a for a in west.cluster.audit if a["name"] == "to-west" and a["outcome"] == "Created"]
    assert len(created) == 1 and not [a for a in east.cluster.audit if a["name"] == "to-west"]
    # The demo member creates a job with kubectl in the west cluster: its webhook queues it in jobdash.
    member = client.CustomObjectsApi(config.new_client_from_config(str(west.people_kubeconfig)))
    with pytest.raises(ApiException) as queued:
        member.create_namespaced_custom_object(
            "kubeflow.org", "v1", "team-a", "tfjobs", tfjob_manifest("from-west", "team-a", duration=1)
        )
    job = Job.objects.get(name="from-west")
    assert queued.value.status == 403 and f"jobdash job #{job.pk}" in json.loads(queued.value.body)["message"]
    eventually(lambda: Job.objects.get(pk=job.pk).state == State.SUCCEEDED, 40)
    # The API names the cluster.
    assert api.get(f"/api/v1/jobs/{to_west.pk}/").json()["cluster"] == "west"


def test_a_cluster_cut_off_is_lost_its_restartable_job_runs_again_elsewhere_and_its_copy_goes_when_it_is_back(
    two, settings
):
    stack, api = two
    east, west = stack.clusters
    restartable = {"jobdash.io/preferred-cluster": "west", "jobdash.io/restartable": "true"}
    moved = submit(api, "restartable", restartable, gpu=8, duration=20)
    eventually(lambda: Job.objects.get(pk=moved.pk).state == State.RUNNING, 30)
    assert Job.objects.get(pk=moved.pk).cluster == "west"
    stays = submit(api, "stays", {"jobdash.io/cluster": "west"}, gpu=8, duration=20)
    eventually(lambda: Job.objects.get(pk=stays.pk).state == State.RUNNING, 30)

    west.cluster.cut_off(True)
    eventually(lambda: Cluster.objects.get(name="west").health == ClusterHealth.LOST, 20)
    waiting = submit(api, "needs-west", {"jobdash.io/cluster": "west"}, gpu=1, duration=1)
    # The restartable job is planned again and runs in east; the one that may not be restarted waits.
    eventually(
        lambda: (
            Job.objects.get(pk=moved.pk).cluster == "east"
            and Job.objects.get(pk=moved.pk).state in (State.RELEASED, State.RUNNING)
        ),
        30,
    )
    assert JobEvent.objects.filter(job_id=moved.pk, type="ClusterLost").exists()
    assert LostWork.objects.filter(job_id=moved.pk, cause="cluster").exists()
    assert Job.objects.get(pk=stays.pk).state == State.RUNNING and Job.objects.get(pk=stays.pk).cluster == "west"
    eventually(lambda: Job.objects.get(pk=waiting.pk).reason == "NoClusterAvailable", 20)
    assert "lost (not answering): west" in Job.objects.get(pk=waiting.pk).message
    # running in east (its object created there just after its claim), while its copy in west runs on behind the cut
    eventually(lambda: objects_in(east, "restartable"), 10)

    west.cluster.cut_off(False)
    eventually(lambda: Cluster.objects.get(name="west").health == ClusterHealth.ANSWERING, 30)
    # Back: the copy there was deleted before it took jobs again.
    copy = LeftCopy.objects.get(job_id=moved.pk)
    assert copy.cluster == "west" and copy.deleted_at is not None
    assert not objects_in(west, "restartable") and len(objects_in(east, "restartable")) == 1
    assert JobEvent.objects.filter(job_id=moved.pk, type="CopyDeleted").exists()
    eventually(lambda: Job.objects.get(pk=waiting.pk).state == State.SUCCEEDED, 40)
    assert Job.objects.get(pk=waiting.pk).cluster == "west"
    # Nothing was sent to west before the copy left there was deleted.
    deleted = JobEvent.objects.get(job_id=moved.pk, type="CopyDeleted").created_at
    assert JobEvent.objects.get(job_id=waiting.pk, type="Released").created_at > deleted
    eventually(lambda: Job.objects.get(pk=moved.pk).state == State.SUCCEEDED, 60)
    assert Job.objects.get(pk=stays.pk).state in (State.RUNNING, State.SUCCEEDED)
    # Shown: its run in west is billed to west and its run after the loss to east (usage by
    # cluster); both clusters answer on the cluster page and in /metrics.
    runs = JobEvent.objects.filter(job_id=moved.pk, type__in=("Running", "ClusterLost", "Succeeded"))
    assert [t for (t,) in runs.order_by("id").values_list("type")] == ["Running", "ClusterLost", "Running", "Succeeded"]
    mine = {r["cluster"]: r["gpu_hours"] for r in usage.usage(None, None, ["cluster"], ["team-a"])}
    assert mine["west"] > 0 and mine["east"] > 0
    clusters = api.get("/api/v1/cluster/").json()["clusters"]
    assert [(c["name"], c["health"]) for c in clusters] == [("east", "Answering"), ("west", "Answering")]
    assert all(c["nodes"] > 0 and c["gpus"] > 0 for c in clusters)
    settings.JOBDASH_METRICS_TOKEN = ""
    scrape = Client().get("/metrics").content.decode()
    assert 'jobdash_cluster_up{cluster="east"} 1.0' in scrape and 'jobdash_cluster_up{cluster="west"} 1.0' in scrape
