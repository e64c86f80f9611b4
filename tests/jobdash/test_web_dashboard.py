"""The namespace dashboard, the cluster page and API, the job page's actions and the
submit page's live check, through Django's test client."""

import re
from datetime import timedelta

import pytest
from django.contrib.staticfiles import finders
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import queueing
from jobdash.dispatch.phases.publish import cluster_summary
from jobdash.jobs import dashboard, preview, services
from jobdash.jobs.models import ClusterState, Cycle, Job, JobEvent, State

from .conftest import token_client, with_name
from .dispatch_support import manifest

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
GIB = 1024**3


@pytest.fixture
def browser(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def staff_browser(client, staff, team_a):
    client.force_login(staff)
    return client


def publish(quotas=None, nodes=None, pods=None):
    ClusterState.objects.update_or_create(
        id=1,
        defaults={
            "updated_at": timezone.now(),
            "quotas": quotas or {},
            "nodes": nodes or [],
            **({"pods": pods} if pods else {}),
        },
    )


def submit(user, text, name, **kwargs) -> Job:
    return services.job_submit(user=user, manifest=with_name(text, name), source="web", **kwargs)


def clone_jobs(job: Job, count: int, state=State.QUEUED, prefix="bulk") -> None:
    """Many rows like `job`, cheaply (bulk insert, no events)."""
    Job.objects.bulk_create(
        [
            Job(
                namespace=job.namespace,
                name=f"{prefix}-{state.lower()}-{i}",
                kind=job.kind,
                api_version=job.api_version,
                manifest=job.manifest,
                parsed=job.parsed,
                workload=job.workload,
                source=job.source,
                state=state,
                position=i + 2 if state == State.QUEUED else None,
                reason="QuotaExceeded",
                message="quota requests.cpu",
                started_at=timezone.now() if state == State.RUNNING else None,
            )
            for i in range(count)
        ],
        batch_size=500,
    )


def test_dashboard_shows_queue_in_admission_order_with_reason_and_eta(browser, alice, example_text, cycling):
    text = example_text("mnist-cpu")
    later, first = submit(alice, text, "later"), submit(alice, text, "first")
    Job.objects.filter(pk=first.pk).update(
        position=1,
        reason="QuotaExceeded",
        message="quota requests.cpu in team-a: needs 2",
        eta=timezone.now() + timedelta(minutes=12),
    )
    Job.objects.filter(pk=later.pk).update(position=2, reason="BlockedByQueueHead")
    page = browser.get("/ns/team-a/").content.decode()
    assert page.index(">first<") < page.index(">later<")  # position 1 first, though submitted second
    assert "Waiting for quota" in page and "quota requests.cpu in team-a: needs 2" in page
    assert "Behind the head of the queue" in page
    assert "in 11m" in page or "in 12m" in page
    assert "/static/django_htmx/htmx-2.min.js" in page and 'hx-trigger="every 3s' in page
    assert 'aria-live="polite"' in page


def test_htmx_poll_gets_only_the_live_part_with_the_summary_out_of_band(browser, alice, example_text):
    submit(alice, example_text("mnist-cpu"), "one")
    part = browser.get("/ns/team-a/", **HTMX).content.decode()
    assert "<html" not in part and 'id="live"' in part
    assert 'id="live-summary" hx-swap-oob="innerHTML"' in part and "1 queued" in part


def test_filters_by_state_and_name(browser, alice, example_text):
    text = example_text("mnist-cpu")
    submit(alice, text, "alpha-train")
    running = submit(alice, text, "beta-train")
    Job.objects.filter(pk=running.pk).update(state=State.RUNNING, released_at=timezone.now(), started_at=timezone.now())
    done = submit(alice, text, "gamma-eval")
    services.job_cancel(job_id=done.pk, user=alice)

    active = browser.get("/ns/team-a/").content.decode()
    assert "alpha-train" in active and "beta-train" in active and "gamma-eval" not in active
    assert "running for" in active
    only_running = browser.get("/ns/team-a/?state=Running").content.decode()
    assert "beta-train" in only_running and "alpha-train" not in only_running
    cancelled = browser.get("/ns/team-a/?state=Cancelled").content.decode()
    assert "gamma-eval" in cancelled and "alpha-train" not in cancelled
    searched = browser.get("/ns/team-a/?q=alpha", **HTMX).content.decode()
    assert "alpha-train" in searched and "beta-train" not in searched
    # Unknown filter values fall back to the default view instead of failing.
    assert browser.get("/ns/team-a/?state=Bogus&page=x&rpage=-1").status_code == 200


def test_quota_bars_come_from_the_cluster_state(browser, team_a):
    publish(
        {
            "team-a": {
                "hard": {"requests.cpu": 8000, "requests.memory": 32 * GIB},
                "used": {"requests.cpu": 4000, "requests.memory": 8 * GIB},
                "reserved": {"requests.cpu": 2000},
            }
        }
    )
    page = browser.get("/ns/team-a/").content.decode()
    assert "4 used + 2 reserved of 8 · 2 free" in page
    assert 'style="width: 50.0%"' in page and 'style="width: 25.0%"' in page
    assert "8Gi used + 0 reserved of 32Gi" in page


def test_query_count_does_not_grow_with_the_queue(browser, alice, example_text, cycling):
    job = submit(alice, example_text("mnist-cpu"), "seed")
    clone_jobs(job, 3)
    clone_jobs(job, 2, State.RUNNING)
    with CaptureQueriesContext(connection) as small:
        assert browser.get("/ns/team-a/").status_code == 200
    with CaptureQueriesContext(connection) as small_poll:
        browser.get("/ns/team-a/", **HTMX)

    clone_jobs(job, 1200, prefix="more")
    clone_jobs(job, 300, State.RUNNING, prefix="more")
    with CaptureQueriesContext(connection) as big:
        page = browser.get("/ns/team-a/?page=3")
    with CaptureQueriesContext(connection) as big_poll:
        browser.get("/ns/team-a/", **HTMX)
    assert page.status_code == 200 and "Page 3 of" in page.content.decode()
    assert len(big) == len(small) and len(big_poll) == len(small_poll)
    # session + user + namespace + counts + quota + 2 per table + chart + the viewer's role
    # + the dispatcher's health (the banner's and the reasons') + whether there are several
    # clusters (issue 49: a Cluster column)
    assert len(big) <= 15, [q["sql"][:80] for q in big.captured_queries]
    assert len(big_poll) <= len(big) - 1


def test_history_is_one_bounded_query(alice, team_a, example_text):
    now = timezone.now()
    text = example_text("mnist-cpu")
    waited = submit(alice, text, "waited")
    old = submit(alice, text, "old")
    queued = submit(alice, text, "queued")
    # waited: queued 5h ago, released 2h ago; old: finished a day ago (outside the window)
    Job.objects.filter(pk=waited.pk).update(
        submitted_at=now - timedelta(hours=5), released_at=now - timedelta(hours=2), state=State.RUNNING
    )
    Job.objects.filter(pk=old.pk).update(
        submitted_at=now - timedelta(days=2),
        released_at=now - timedelta(days=1),
        finished_at=now - timedelta(days=1),
        state=State.SUCCEEDED,
    )
    Job.objects.filter(pk=queued.pk).update(submitted_at=now - timedelta(minutes=30))
    with CaptureQueriesContext(connection) as queries:
        history = dashboard.history(team_a, hours=6, buckets=6, now=now)
    assert len(queries) == 1
    # buckets end at -5h, -4h, ... 0h
    assert history.queued == [1, 1, 1, 0, 0, 1]
    assert history.admitted == [0, 0, 0, 1, 0, 0]
    sql = queries.captured_queries[0]["sql"]
    assert "finished_at" in sql and "released_at" in sql  # the window filter is in the WHERE


def test_chart_is_server_rendered_svg(browser, alice, example_text):
    submit(alice, example_text("mnist-cpu"), "one")
    page = browser.get("/ns/team-a/").content.decode()
    assert (
        "<svg" in page
        and "<polyline" in page
        and 'role="img"' in page
        and "<script" not in page.split("<svg")[1].split("</svg>")[0]
    )


NODES = [
    {
        "name": "gpu-1",
        "allocatable": {"cpu": 32000, "memory": 128 * GIB, "nvidia.com/gpu": 8, "pods": 110},
        "allocated": {"cpu": 8000, "memory": 32 * GIB, "nvidia.com/gpu": 5, "pods": 3},
        "labels": {},
        "unschedulable": False,
    },
    {
        "name": "gpu-2",
        "allocatable": {"cpu": 32000, "memory": 128 * GIB, "nvidia.com/gpu": 8, "pods": 110},
        "allocated": {"cpu": 0, "memory": 0, "pods": 0},
        "labels": {},
        "unschedulable": False,
    },
    {
        "name": "gpu-3",
        "allocatable": {"cpu": 32000, "memory": 128 * GIB, "nvidia.com/gpu": 8, "pods": 110},
        "allocated": {},
        "labels": {},
        "unschedulable": True,
    },
]


def test_cluster_page_is_for_staff_and_shows_fragmentation(browser, staff, client):
    publish(nodes=NODES)
    Cycle.objects.create(
        started_at=timezone.now(), duration_ms=12.5, policy="priority", pending=4, admitted=2, released=2
    )
    assert browser.get("/cluster/").status_code == 403
    client.force_login(staff)
    page = client.get("/cluster/").content.decode()
    assert "gpu-1" in page and "(cordoned)" in page and "12.5 ms" in page
    assert "8 / 32" in page and "32Gi / 128Gi" in page
    assert page.count('class="gpu-used"') == 5


def test_cluster_api_matches_the_page_selector(api, staff):
    publish(nodes=NODES)
    assert api.get("/api/v1/cluster/").status_code == 403
    staff_api = token_client(staff)
    data = staff_api.get("/api/v1/cluster/").json()
    # free GPUs: gpu-1 has 3, gpu-2 has 8, gpu-3 is cordoned
    assert data["gpu_fit"] == [
        {"gpus": 1, "nodes": 2, "pods": 11},
        {"gpus": 2, "nodes": 2, "pods": 5},
        {"gpus": 4, "nodes": 1, "pods": 2},
        {"gpus": 8, "nodes": 1, "pods": 1},
    ]
    assert data["nodes"][0]["resources"]["gpu"] == {"allocatable": 8, "allocated": 5, "free": 3}
    assert data["totals"]["cpu"]["allocated"] == 8000 and data["leader"]["backend"]
    schema = staff_api.get("/api/v1/schema/").content.decode()
    assert "/api/v1/cluster/" in schema and "Cluster" in schema


def test_job_page_actions_by_role(browser, alice, staff, client, example_text):
    job = submit(alice, example_text("mnist-cpu"), "acted")
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert "Cancel job" in page and "Set priority" not in page and "Requeue" not in page
    assert browser.post(f"/jobs/{job.pk}/priority/", {"priority": "5"}).status_code == 302
    assert Job.objects.get(pk=job.pk).priority == 0  # not staff: refused, with a message
    assert browser.get(f"/jobs/{job.pk}/requeue/").status_code == 403

    client.force_login(staff)
    assert "Set priority" in client.get(f"/jobs/{job.pk}/").content.decode()
    client.post(f"/jobs/{job.pk}/priority/", {"priority": "7"})
    assert Job.objects.get(pk=job.pk).priority == 7
    assert JobEvent.objects.filter(job=job, type="PriorityChanged", actor="root").exists()
    bad = client.post(f"/jobs/{job.pk}/priority/", {"priority": "lots"}, follow=True)
    assert bad.status_code == 200 and "priority: Enter a whole number." in bad.content.decode()
    queued = client.post(f"/jobs/{job.pk}/requeue/", {"reason": "x"}, follow=True)
    assert queued.status_code == 200 and Job.objects.get(pk=job.pk).state == State.QUEUED
    assert "requeued" in queued.content.decode()  # the service's refusal, shown as a message


def test_job_page_polls_while_active_and_shows_position(browser, alice, example_text, cycling):
    job = submit(alice, example_text("mnist-cpu"), "polled")
    Job.objects.filter(pk=job.pk).update(position=3, reason="NoNodeFits", message="no node fits")
    part = browser.get(f"/jobs/{job.pk}/", **HTMX).content.decode()
    assert "<html" not in part and 'hx-trigger="every' in part
    assert "3 in team-a" in part and "Waiting for room on the nodes" in part
    services.job_cancel(job_id=job.pk, user=alice)
    assert 'hx-trigger="every' not in browser.get(f"/jobs/{job.pk}/").content.decode()


def test_job_page_shows_pod_phases_per_replica(browser, alice, example_text):
    job = submit(alice, example_text("dist-ps-worker"), "pods")
    replicas = {"worker": {"Running": 3, "Pending": 1}, "ps": {"Running": 2}}
    publish(pods={"team-a/pods": {"job": job.pk, "replicas": replicas}})
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    table = page.split('id="pods-table"')[1].split("</table>")[0]
    assert "<td>Worker</td>" in table and '<td class="num phase-pending">1</td>' in table
    assert "<td>PS</td>" in table
    # the TFJob of that name belongs to another (earlier) job: not shown as this job's pods
    publish(pods={"team-a/pods": {"job": job.pk + 1, "replicas": replicas}})
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="pods-table"' not in page and "pods are created when the job is released" in page
    # a finished job's pods are no longer published: the page says so
    Job.objects.filter(pk=job.pk).update(state=State.SUCCEEDED)
    assert "Pods are followed while the job is active" in browser.get(f"/jobs/{job.pk}/").content.decode()


def test_submit_check_reports_paths_with_lines(browser):
    bad = """apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: broken
  namespace: team-a
spec:
  tfReplicaSpecs:
    Worker:
      replicas: -1
      template:
        spec:
          containers:
            - name: tf
              image: tf
"""
    part = browser.post("/submit/check/", {"manifest": bad, "namespace": ""}, **HTMX).content.decode()
    assert "spec.tfReplicaSpecs.Worker.replicas" in part and "line 9" in part
    syntax = browser.post("/submit/check/", {"manifest": "a: [1,\nb: 2\n"}, **HTMX).content.decode()
    assert "problem" in syntax and "line " in syntax
    assert "Paste a training job" in browser.post("/submit/check/", {"manifest": "  "}).content.decode()
    huge = browser.post("/submit/check/", {"manifest": "a: " + "x" * 300_000}).content.decode()
    assert "too large" in huge


def test_submit_check_previews_demand_and_quota_fit(browser, alice, team_b, example_text):
    publish(
        {"team-a": {"hard": {"requests.cpu": 4000}, "used": {"requests.cpu": 1000}, "reserved": {"requests.cpu": 2000}}}
    )
    text = example_text("mnist-cpu")  # needs 2 cpu; 1 free
    part = browser.post("/submit/check/", {"manifest": text}).content.decode()
    assert "Valid for team-a" in part and "cpu 2" in part
    assert "Does not fit the free quota of team-a now" in part and "not now" in part
    Job.objects.all().delete()
    publish({"team-a": {"hard": {"requests.cpu": 4000}, "used": {}, "reserved": {}}})
    assert "Fits the free quota of team-a now" in browser.post("/submit/check/", {"manifest": text}).content.decode()
    other = browser.post("/submit/check/", {"manifest": text.replace("namespace: team-a", "namespace: team-b")})
    assert "not a member of namespace" in other.content.decode()
    assert browser.get("/submit/check/").status_code == 405


def test_submit_check_lists_the_quota_keys_the_job_asks_of(browser, alice, example_text):
    """Not all nine keys of make run's quota for a CPU-only job: a key it asks nothing of
    cannot stop it (the planner's rule), so it is only counted; a key that stops it is one
    it asks of, and shows."""
    hard = {"requests.cpu": 4000, "requests.memory": 16 * GIB, "requests.nvidia.com/gpu": 16}
    hard |= {"requests.aliyun.com/gpu-mem": 16276, "requests.nvidia.com/mig-1g.5gb": 4, "pods": 10}
    publish({"team-a": {"hard": hard, "used": {"requests.nvidia.com/gpu": 16, "requests.cpu": 3000}}})
    part = browser.post("/submit/check/", {"manifest": example_text("mnist-cpu")}).content.decode()
    keys = re.findall(r'<td class="key"><code>(.*?)</code>', part)
    assert [re.sub(r"<[^>]+>", "", key) for key in keys] == ["pods", "requests.cpu", "requests.memory"]
    assert "Not shown: 3 quota keys of team-a it asks nothing of (they cannot stop it)." in part
    assert '<tr class="short"><td class="key"><code><span class="nobr">requests.</span><wbr>' in part  # cpu: 2 > 1 free
    assert "Does not fit the free quota of team-a now" in part


@pytest.mark.parametrize("gpus_used", [16, 20], ids=["gpu-quota-full", "gpu-quota-over-full"])
@pytest.mark.parametrize(
    ("example", "admitted"), [("mnist-cpu", True), ("resnet-multi-gpu", False)], ids=["cpu-only", "gpu"]
)
def test_submit_check_verdict_is_the_planners(browser, alice, example_text, gpus_used, example, admitted):
    """The submit page and the planner decide quota fit by one rule: a namespace whose GPU
    quota is full (or over-full, after the quota was lowered) still admits a CPU-only job."""
    text = example_text(example).replace("namespace: team-b", "namespace: team-a")
    hard = {"requests.cpu": 100_000, "requests.memory": 512 * GIB, "requests.nvidia.com/gpu": 16, "pods": 10}
    used = {"requests.cpu": 10_000, "requests.memory": 40 * GIB, "requests.nvidia.com/gpu": gpus_used, "pods": 2}
    _, workload = services.manifest_check(text)
    snapshot = queueing.Snapshot(
        now=0.0,
        pending=(queueing.PendingJob(id=1, namespace="team-a", priority=0, submitted_at=0.0, workload=workload),),
        quotas={"team-a": queueing.NamespaceQuota("team-a", hard, used)},
        node_fit=False,
    )
    planner_admits = queueing.plan(snapshot).admitted == (1,)
    assert planner_admits is admitted
    publish(cluster_summary(snapshot)[0])  # what the dispatcher writes for the pages

    assert preview.manifest_preview(alice, text).fits is planner_admits
    part = browser.post("/submit/check/", {"manifest": text}).content.decode()
    verdict = "Fits the free quota of team-a now" if planner_admits else "Does not fit the free quota of team-a now"
    assert verdict in part


def test_htmx_is_shipped_as_a_static_file():
    assert finders.find("django_htmx/htmx-2.min.js")


def test_cluster_page_shows_racks_the_jobs_on_each_gpu_and_failed_nodes(staff, client, settings):
    settings.JOBDASH_TOPOLOGY_LEVELS = ("topology.jobdash.io/rack", "kubernetes.io/hostname")
    racked = [
        {**NODES[0], "labels": {"topology.jobdash.io/rack": "rack1"}, "jobs": {"team-a/bert": 4}},
        {**NODES[1], "labels": {"topology.jobdash.io/rack": "rack1"}, "failed": True},
        {**NODES[2], "labels": {"topology.jobdash.io/rack": "rack2"}},
    ]
    publish(nodes=racked)
    client.force_login(staff)
    page = client.get("/cluster/").content.decode()
    assert page.count('title="team-a/bert"') == 4 and "team-a/bert ×4" in page
    assert "(not ready)" in page and "(cordoned)" in page
    data = token_client(staff).get("/api/v1/cluster/").json()
    # rack1: gpu-1 3 free, gpu-2 failed (its 8 not counted); rack2: gpu-3 cordoned
    assert data["domains"] == [
        {"domain": "rack1", "nodes": 2, "gpus": 16, "free": 3, "empty": 0},
        {"domain": "rack2", "nodes": 1, "gpus": 8, "free": 0, "empty": 0},
    ]
    assert data["nodes"][0]["jobs"] == {"team-a/bert": 4} and data["nodes"][1]["failed"] is True


def test_quota_fit_and_node_numbers_read_in_one_unit_per_resource(browser, staff, client):
    """Not "62500m used ... of 64": CPU in cores throughout, memory in one binary unit."""
    mib = 1024**2
    publish(
        {
            "team-a": {
                "hard": {"requests.cpu": 64000, "requests.memory": 256 * GIB},
                "used": {"requests.cpu": 62500, "requests.memory": 43520 * mib},
                "reserved": {"requests.memory": 512 * mib},
            }
        },
        nodes=[{**NODES[0], "allocated": {"cpu": 26500, "memory": 1536 * mib}}],
    )
    page = browser.get("/ns/team-a/").content.decode()
    assert "62.5 used + 0 reserved of 64 · 1.5 free" in page
    assert "42.5Gi used + 0.5Gi reserved of 256Gi · 213Gi free" in page
    part = browser.post("/submit/check/", {"manifest": manifest("half", cpu="500m")}).content.decode()
    assert "<span>cpu 0.5</span>" in part  # the demand
    assert (
        '<td class="num" data-label="needs">0.5</td><td class="num" data-label="free">1.5 <small>of 64</small>' in part
    )
    client.force_login(staff)
    cluster = client.get("/cluster/").content.decode()
    assert "26.5 / 32 <small>(5.5 free)</small>" in cluster
    assert "1.5Gi / 128Gi <small>(126.5Gi free)</small>" in cluster
