"""Many clusters, one queue (issue 49), shown: the job page names the cluster a job was
released to, the namespace's tables a Cluster column when several clusters are configured,
and the cluster page a table of the clusters above the nodes, which it filters by cluster.
With one cluster (no Cluster rows) the pages are as they were."""

import pytest
from django.utils import timezone

from jobdash.clusters.models import Cluster, ClusterHealth
from jobdash.jobs import services
from jobdash.jobs.models import ClusterState, Job, State

from .conftest import token_client, with_name

pytestmark = pytest.mark.django_db
CLUSTER_LABEL = "jobdash.io/cluster"


@pytest.fixture
def browser(client, alice):
    client.force_login(alice)
    return client


def released(alice, example_text, name: str, cluster: str, state=State.RUNNING) -> Job:
    job = services.job_submit(user=alice, manifest=with_name(example_text("mnist-cpu"), name), source="web")
    now = timezone.now()
    finished = now if state == State.SUCCEEDED else None
    Job.objects.filter(pk=job.pk).update(
        state=state, cluster=cluster, released_at=now, started_at=now, finished_at=finished
    )
    return Job.objects.get(pk=job.pk)


# --- the job page and the namespace's tables ---


def test_the_job_page_names_its_cluster_and_says_when_that_cluster_is_lost(browser, alice, example_text, cycling):
    Cluster.objects.create(name="east")
    west = Cluster.objects.create(name="west")
    job = released(alice, example_text, "in-west", "west")
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert '<dt>Cluster</dt><dd id="job-cluster">west</dd>' in page
    Cluster.objects.filter(pk=west.pk).update(health=ClusterHealth.LOST)
    page = browser.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()  # the polled part too
    assert 'id="job-cluster">west <small class="warn">(lost: its API server does not answer' in page


def test_a_job_of_the_one_cluster_or_not_released_names_none(browser, alice, example_text, cycling):
    job = released(alice, example_text, "one", "")
    queued = services.job_submit(user=alice, manifest=with_name(example_text("mnist-cpu"), "q"), source="web")
    for shown in (job, queued):
        page = browser.get(f"/jobs/{shown.pk}/").content.decode()
        assert page.count("<dt>") > 3 and "job-cluster" not in page and "<dt>Cluster</dt>" not in page


def test_the_namespace_tables_have_a_cluster_column_only_with_several_clusters(browser, alice, example_text, cycling):
    released(alice, example_text, "runs-west", "west")
    released(alice, example_text, "ran-east", "east", State.SUCCEEDED)
    page = browser.get("/ns/team-a/").content.decode()
    assert "runs-west" in page and '<th scope="col">Cluster</th>' not in page and 'class="cluster"' not in page

    Cluster.objects.bulk_create([Cluster(name="east"), Cluster(name="west")])
    page = browser.get("/ns/team-a/").content.decode()
    running = page[page.index('id="running-table"') :]
    assert '<th scope="col">Cluster</th>' in running
    assert '<td class="cluster" data-label="Cluster">west</td>' in running
    finished = browser.get("/ns/team-a/?state=Succeeded", HTTP_HX_REQUEST="true").content.decode()
    assert '<th scope="col">Cluster</th>' in finished
    assert '<td class="cluster" data-label="Cluster">east</td>' in finished
