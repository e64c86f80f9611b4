"""Many clusters (issue 49): `jobdash list` has a CLUSTER column when a job was released to
one of several clusters, `jobdash describe` names it, `-o json` is the API's object with its
`cluster`; and `jobdash usage --group-by cluster` splits the hours by cluster."""

import json

import pytest

from jobdash.jobs.models import Job, State
from tests.client.support import columns
from tests.jobdash.dispatch_support import manifest

pytestmark = pytest.mark.django_db(transaction=True)


def test_list_describe_and_json_name_the_cluster(jobdash):
    done = jobdash("submit", "-", input=manifest("east-job") + "---\n" + manifest("waits"), check=0)
    ids = {row["NAME"]: int(row["ID"]) for row in columns(done.stdout)}
    assert "CLUSTER" not in done.stdout.splitlines()[0]  # none released to a cluster: no column
    assert "CLUSTER" not in jobdash("list", check=0).stdout.splitlines()[0]
    Job.objects.filter(pk=ids["east-job"]).update(state=State.RUNNING, cluster="east")

    listed = {row["NAME"]: row for row in columns(jobdash("list", check=0).stdout)}
    assert listed["east-job"]["CLUSTER"] == "east" and listed["waits"]["CLUSTER"] == "-"
    assert listed["east-job"]["STATE"] == "Running" and listed["waits"]["STATE"] == "Queued"
    described = jobdash("describe", ids["east-job"], check=0).stdout
    assert "\nCluster:      east\n" in described
    assert "Cluster:" not in jobdash("describe", ids["waits"], check=0).stdout
    data = json.loads(jobdash("describe", ids["east-job"], "-o", "json", check=0).stdout)
    assert data["cluster"] == "east"
    assert json.loads(jobdash("describe", ids["waits"], "-o", "json", check=0).stdout)["cluster"] == ""


def test_usage_by_cluster(jobdash):
    from datetime import UTC, datetime

    from jobdash.usage.models import UsageDay

    today = datetime.now(UTC).date()
    UsageDay.objects.create(day=today, namespace="team-a", cluster="west", gpu_s=7200)
    UsageDay.objects.create(day=today, namespace="team-a", cluster="east", gpu_s=3600)
    rows = columns(jobdash("usage", "--group-by", "cluster", check=0).stdout.split("\n", 1)[1])
    assert [(row["CLUSTER"], row["GPU-HOURS"]) for row in rows] == [("east", "1.00"), ("west", "2.00")]
    as_csv = jobdash("usage", "--group-by", "cluster,namespace", "-o", "csv", check=0).stdout.splitlines()
    assert as_csv[0].startswith("cluster,namespace,gpu_hours,") and as_csv[0].endswith(",lost_cluster_gpu_hours")
    assert as_csv[2].startswith("west,team-a,2.000000,")
