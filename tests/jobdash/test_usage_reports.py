"""The usage reports (issue 37): members see their namespaces' usage, staff everyone's; a bad
parameter is a 400 naming it; the page draws a bar per day and lists the groups."""

from datetime import UTC, datetime

import pytest

from jobdash.jobs.models import LostWork
from jobdash.usage import selectors, services
from jobdash.usage.models import UsageDay
from jobdash.usage.query import COLUMNS

from .usage_support import write_histories

pytestmark = pytest.mark.django_db
RANGE = {"from": "2026-01-30", "to": "2026-02-05"}


@pytest.fixture
def histories(team_a, team_b):
    return write_histories(40, seed=7)


def test_members_see_their_namespaces_and_staff_all(histories, api, staff_api):
    mine = api.get("/api/v1/usage/", {**RANGE, "group_by": "namespace"}).json()
    assert {r["namespace"] for r in mine["rows"]} == {"team-a"}
    every = staff_api.get("/api/v1/usage/", {**RANGE, "group_by": "namespace"}).json()
    assert {r["namespace"] for r in every["rows"]} == {"team-a", "team-b"}
    (team_a,) = [r for r in every["rows"] if r["namespace"] == "team-a"]
    assert mine["rows"][0] == team_a
    assert (mine["from"], mine["to"]) == ("2026-01-30", "2026-02-05")


def test_the_groups_split_the_same_total(histories, staff_api):
    def total(group_by):
        rows = staff_api.get("/api/v1/usage/", {**RANGE, "group_by": group_by}).json()["rows"]
        return sum(r["gpu_hours"] for r in rows), rows

    whole, _ = total("namespace")
    every = "namespace,user,kind,priority_class,day,borrowed,cluster"
    for group_by in ("user", "kind,priority_class", "day,borrowed", "cluster", every):
        split, rows = total(group_by)
        assert split == pytest.approx(whole, rel=1e-9)
        assert set(rows[0]) == {*group_by.split(","), *COLUMNS}
    days = staff_api.get("/api/v1/usage/", {**RANGE, "group_by": "day"}).json()["rows"]
    assert [r["day"] for r in days] == sorted(r["day"] for r in days) and days[0]["day"] >= "2026-01-30"


@pytest.mark.parametrize(
    "params, path",
    [
        ({"from": "2026-13-01"}, "from"),
        ({"to": "yesterday"}, "to"),
        ({"from": "2026-02-05", "to": "2026-02-01"}, "to"),
        ({"group_by": "namespace,colour"}, "group_by"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(api, client, alice, params, path):
    answer = api.get("/api/v1/usage/", params)
    assert answer.status_code == 400
    assert [e["path"] for e in answer.json()["errors"]] == [path]
    as_csv = api.get("/api/v1/usage/", {**params, "format": "csv"})
    assert as_csv.status_code == 400 and as_csv.content.decode().startswith(f"path,message\n{path},")
    client.force_login(alice)
    page = client.get("/usage/", params)
    assert page.status_code == 400 and 'role="alert"' in page.content.decode()


def test_the_page_draws_each_day_and_links_its_csv(histories, client, alice):
    client.force_login(alice)
    page = client.get("/usage/", {**RANGE, "group_by": ["namespace", "user"]}).content.decode()
    assert page.count("<rect ") == 7  # one bar per day, empty ones too
    assert 'href="/usage/"' in page  # in the navigation
    assert "group_by=namespace&amp;group_by=user" in page and "format=csv" in page
    rows = selectors.usage(
        __import__("datetime").date(2026, 1, 30),
        __import__("datetime").date(2026, 2, 5),
        ["namespace", "user"],
        ["team-a"],
    )
    for row in rows:
        assert f"<td>{row['namespace']}</td><td>{row['user']}</td>" in page
    csv_text = client.get("/usage/", {**RANGE, "group_by": ["namespace", "user"], "format": "csv"}).content.decode()
    assert csv_text.splitlines()[0] == "namespace,user,gpu_hours,cpu_hours,memory_gib_hours," + ",".join(
        f"lost_{c}gpu_hours" for c in ("", "preemption_", "reclaim_", "move_", "cluster_")
    )
    assert len(csv_text.splitlines()) == len(rows) + 1


def test_month_and_decayed_gpu_hours(histories):
    from datetime import UTC, datetime

    now = datetime(2026, 2, 20, tzinfo=UTC)
    month = selectors.month_gpu_hours(None, now)
    february = selectors.usage(datetime(2026, 2, 1).date(), None, ["namespace"], None, now)
    assert month == {r["namespace"]: r["gpu_hours"] for r in february}
    decayed = selectors.decayed_gpu_hours(now, half_life_days=7)
    whole = {r["namespace"]: r["gpu_hours"] for r in selectors.usage(None, None, ["namespace"], None, now)}
    for namespace, hours in decayed.items():
        assert 0 < hours < whole[namespace]
    assert selectors.decayed_gpu_hours(now, half_life_days=0) == pytest.approx(whole)


def test_usage_by_cluster_is_each_runs_cluster(histories, staff_api, client, staff):
    """Issue 49: a run is billed to the cluster the job's last Released event before it
    names, else to the job's cluster now (usage_support writes both kinds of history)."""
    runs, _ = histories
    now = datetime(2026, 2, 20, tzinfo=UTC)
    want: dict[str, float] = {}
    for run in runs:
        want[run.cluster] = want.get(run.cluster, 0.0) + run.gpus * ((run.end or now.timestamp()) - run.start) / 3600
    assert {"", "east", "west"} <= set(want) and len({round(v, 6) for v in want.values()}) == len(want)
    rows = selectors.usage(None, None, ["cluster"], None, now)
    assert {r["cluster"]: r["gpu_hours"] for r in rows} == pytest.approx(want, rel=1e-9)
    services.fold_all(settle_s=0)  # folded: the same, from the day rows
    assert {r["cluster"]: r["gpu_hours"] for r in selectors.usage(None, None, ["cluster"], None, now)} == (
        pytest.approx(want, rel=1e-9)
    )
    assert set(UsageDay.objects.values_list("cluster", flat=True)) == set(want)

    answer = staff_api.get("/api/v1/usage/", {**RANGE, "group_by": "cluster,namespace"}).json()
    assert answer["group_by"] == ["cluster", "namespace"] and {r["cluster"] for r in answer["rows"]} == set(want)
    as_csv = staff_api.get("/api/v1/usage/", {**RANGE, "group_by": "cluster", "format": "csv"}).content.decode()
    assert as_csv.startswith("cluster,gpu_hours,") and "\nwest," in as_csv and "\neast," in as_csv
    client.force_login(staff)
    page = client.get("/usage/", {**RANGE, "group_by": "cluster"}).content.decode()
    assert '<input type="checkbox" name="group_by" value="cluster" checked>' in page
    assert "<td>west</td>" in page and "<td>–</td>" in page  # "": the one cluster


def test_lost_work_is_grouped_by_its_cluster(staff_api):
    at = datetime(2026, 2, 1, 12, tzinfo=UTC)
    for cluster, gpu_s in (("west", 7200.0), ("east", 3600.0)):
        LostWork.objects.create(
            job_id=1, at=at, cause=LostWork.Cause.CLUSTER, namespace="team-a", cluster=cluster, gpu_s=gpu_s
        )
    rows = staff_api.get("/api/v1/usage/", {**RANGE, "group_by": "cluster"}).json()["rows"]
    assert {r["cluster"]: r["lost_cluster_gpu_hours"] for r in rows} == {"east": 1.0, "west": 2.0}
