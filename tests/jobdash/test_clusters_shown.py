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


# --- the cluster page ---

GIB = 1024**3


def node(name: str, cluster: str, gpus: int, used: int, **more) -> dict:
    return {
        "name": name,
        "allocatable": {"cpu": 32000, "memory": 128 * GIB, "nvidia.com/gpu": gpus, "pods": 110},
        "allocated": {"cpu": 1000 * used, "memory": GIB * used, "nvidia.com/gpu": used, "pods": used},
        "labels": {CLUSTER_LABEL: cluster} if cluster else {},
        "unschedulable": False,
        **more,
    }


def publish(nodes: list[dict]) -> None:
    ClusterState.objects.update_or_create(id=1, defaults={"updated_at": timezone.now(), "quotas": {}, "nodes": nodes})


@pytest.fixture
def two_clusters(db):
    now = timezone.now()
    Cluster.objects.create(name="east", labels={"gpu": "a100"}, answered_at=now)
    Cluster.objects.create(
        name="west", labels={"gpu": "h100"}, health=ClusterHealth.LOST, answered_at=now, lost_at=now, cordoned=True
    )
    publish(
        [
            node("east-1", "east", 8, 3),
            node("east-2", "east", 8, 0, unschedulable=True),  # its 8 not free: cordoned
            node("west-1", "west", 8, 8),
            node("west-2", "west", 8, 2),
        ]
    )


def section(page: str, id_: str) -> str:
    start = page.index(f'id="{id_}"')
    return page[start : page.index("</table>", start)]


def test_the_cluster_page_shows_each_clusters_health_nodes_and_gpus_above_the_nodes(client, staff, two_clusters):
    client.force_login(staff)
    page = client.get("/cluster/").content.decode()
    assert "<h1>Clusters</h1>" in page and page.index('id="clusters"') < page.index('id="nodes"')
    table = section(page, "clusters")
    east, west = table.split('<tr data-cluster="east">')[1].split('<tr data-cluster="west">')
    assert '<a href="?cluster=east">east</a>' in east and "Answering" in east and "<span>gpu=a100</span>" in east
    assert '<td class="num">2</td><td class="num">5 / 16</td>' in east  # 5 free of east-1's 8; east-2 cordoned
    assert ">no</td>" in east and "never" not in east
    assert "Lost <small>since" in west and ">cordoned</td>" in west and "<span>gpu=h100</span>" in west
    assert '<td class="num">2</td><td class="num">6 / 16</td>' in west
    nodes = section(page, "nodes")  # all together
    assert all(name in nodes for name in ("east-1", "east-2", "west-1", "west-2"))
    assert "Nodes (4)" in page and "cluster-filter" not in page


def test_the_cluster_page_filters_the_nodes_by_cluster(client, staff, two_clusters):
    client.force_login(staff)
    page = client.get("/cluster/?cluster=west").content.decode()
    nodes = section(page, "nodes")
    assert "west-1" in nodes and "west-2" in nodes and "east-1" not in nodes and "east-2" not in nodes
    assert "Nodes of west (2)" in page and 'id="cluster-filter"' in page
    assert '<tr data-cluster="west" aria-current="true">' in page  # the clusters' table stays whole
    assert '<tr data-cluster="east">' in page
    # the GPU fit is of west's nodes alone: 6 GPUs free on west-2, none on west-1
    fit = section(page, "gpu-fit")
    assert '<td>1 GPU</td><td class="num">1</td><td class="num">6</td>' in fit
    assert '<td>8 GPUs</td><td class="num">0</td><td class="num">0</td>' in fit


def test_an_unknown_cluster_is_an_empty_node_table(client, staff, two_clusters):
    client.force_login(staff)
    reply = client.get("/cluster/?cluster=nowhere<b>")
    assert reply.status_code == 200
    page = reply.content.decode()
    assert "Nodes of nowhere&lt;b&gt; (0)" in page and "No nodes in cluster nowhere&lt;b&gt;." in page
    assert "east-1" not in section(page, "nodes")
    data = token_client(staff).get("/api/v1/cluster/?cluster=nowhere").json()
    assert data["nodes"] == [] and data["cluster"] == "nowhere" and len(data["clusters"]) == 2


def test_the_cluster_api_tells_the_clusters_and_filters_alike(staff, two_clusters):
    api = token_client(staff)
    data = api.get("/api/v1/cluster/").json()
    assert [(c["name"], c["health"], c["cordoned"], c["nodes"], c["gpus"], c["free"]) for c in data["clusters"]] == [
        ("east", "Answering", False, 2, 16, 5),
        ("west", "Lost", True, 2, 16, 6),
    ]
    assert data["clusters"][1]["labels"] == {"gpu": "h100"} and data["clusters"][1]["lost_at"]
    assert [n["cluster"] for n in data["nodes"]] == ["east", "east", "west", "west"]
    east = api.get("/api/v1/cluster/?cluster=east").json()
    assert [n["name"] for n in east["nodes"]] == ["east-1", "east-2"]
    assert east["totals"]["gpu"] == {"allocatable": 16, "allocated": 3, "free": 13}


def test_one_cluster_looks_as_before(client, staff):
    publish([node("gpu-1", "", 8, 3)])
    client.force_login(staff)
    page = client.get("/cluster/").content.decode()
    assert "<h1>Cluster</h1>" in page and 'id="clusters"' not in page and "Nodes (1)" in page
    assert "gpu-1" in section(page, "nodes") and "cluster-filter" not in page
    data = token_client(staff).get("/api/v1/cluster/").json()
    assert data["clusters"] == [] and data["cluster"] == "" and data["nodes"][0]["cluster"] == ""
