"""Issue 48, part 5: the work lost when a running job is stopped to make room, counted by
cause and namespace, and shown in the usage report (page, API, CSV), /metrics, the job's API
and its page."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from jobdash.jobs.models import Job, LostWork, State
from jobdash.usage import lost_work

from .test_metrics import parse, sample

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)
START = NOW - timedelta(hours=2)
WORKLOAD = {
    "requests": {"nvidia.com/gpu": 8, "cpu": 8000},
    "pod_sets": [{"role": "Worker", "count": 2, "requests": {"nvidia.com/gpu": 4, "cpu": 4000}}],
}


def job_row(**overrides) -> dict:
    row = {
        "id": 7,
        "namespace__name": "team-a",
        "submitted_by_name": "alice",
        "kind": "TFJob",
        "priority_class": "",
        "borrowing": True,
        "workload": WORKLOAD,
        "scale": None,
        "started_at": START,
        "checkpoint_every_s": None,
        "checkpoint_on_notice_s": None,
        "last_checkpoint_at": None,
    }
    return {**row, **overrides}


def test_it_is_labelled_with_the_cluster_the_job_ran_in():
    assert lost_work.stopped(job_row(cluster="west"), LostWork.Cause.CLUSTER, NOW).cluster == "west"
    assert lost_work.stopped(job_row(), LostWork.Cause.PREEMPTION, NOW).cluster == ""  # one cluster
    assert "cluster" in lost_work.JOB_FIELDS  # what the writers read of the job


def test_a_run_without_checkpoints_loses_all_of_it():
    lost = lost_work.stopped(job_row(), LostWork.Cause.PREEMPTION, NOW)
    assert lost.seconds == 7200 and lost.gpu_s == 7200 * 8 and lost.checkpointed_at is None
    assert (lost.namespace, lost.user, lost.borrowed, lost.cause) == ("team-a", "alice", True, "preemption")


def test_the_later_of_the_declared_and_the_reported_checkpoint_counts():
    declared = lost_work.stopped(job_row(checkpoint_every_s=1800), LostWork.Cause.RECLAIM, NOW + timedelta(minutes=10))
    assert declared.seconds == 600 and declared.checkpointed_at == NOW  # 4 whole periods
    reported = NOW + timedelta(minutes=5)
    later = lost_work.stopped(
        job_row(checkpoint_every_s=1800, last_checkpoint_at=reported),
        LostWork.Cause.RECLAIM,
        NOW + timedelta(minutes=10),
    )
    assert later.seconds == 300 and later.checkpointed_at == reported
    # A checkpoint reported before this run began is not this run's.
    stale = lost_work.stopped(job_row(last_checkpoint_at=START - timedelta(hours=1)), LostWork.Cause.MOVE, NOW)
    assert stale.seconds == 7200


def test_a_job_that_checkpoints_on_notice_loses_nothing_and_an_elastic_one_its_scale():
    on_notice = lost_work.stopped(job_row(checkpoint_on_notice_s=60), LostWork.Cause.PREEMPTION, NOW)
    assert on_notice.seconds == 0 and on_notice.gpu_s == 0 and on_notice.checkpointed_at == NOW
    shrunk = lost_work.stopped(job_row(scale={"Worker": 1}), LostWork.Cause.PREEMPTION, NOW)
    assert shrunk.gpu_s == 7200 * 4  # one pod of 4 GPUs ran, not the two written


def record(job: Job, cause: str, at: datetime, seconds: float, gpus: float) -> None:
    LostWork.objects.create(
        job_id=job.pk,
        at=at,
        cause=cause,
        namespace=job.namespace.name,
        user=job.submitted_by_name,
        kind=job.kind,
        seconds=seconds,
        gpu_s=seconds * gpus,
        checkpointed_at=at - timedelta(seconds=seconds),
    )


@pytest.fixture
def stops(team_a, team_b):
    jobs = {}
    for namespace in (team_a, team_b):
        jobs[namespace.name] = Job.objects.create(
            namespace=namespace,
            name="trainer",
            kind="TFJob",
            api_version="kubeflow.org/v1",
            kind_key="tfjobs.kubeflow.org",
            manifest="",
            parsed={},
            workload=WORKLOAD,
            source="api",
            state=State.QUEUED,
            submitted_by_name="alice",
            preemptions=2,
        )
    a, b = jobs["team-a"], jobs["team-b"]
    record(a, "preemption", NOW, 1800, 8)  # 4 GPU-h
    record(a, "reclaim", NOW + timedelta(days=1), 900, 8)  # 2 GPU-h, the next day
    record(b, "move", NOW, 450, 8)  # 1 GPU-h
    return a, b


def test_the_usage_report_counts_it_by_cause_namespace_and_day(stops, api, staff_api, client, alice):
    params = {"from": "2026-11-01", "to": "2026-11-30", "group_by": "namespace"}
    rows = {r["namespace"]: r for r in staff_api.get("/api/v1/usage/", params).json()["rows"]}
    assert rows["team-a"]["lost_gpu_hours"] == pytest.approx(6.0)
    assert rows["team-a"]["lost_preemption_gpu_hours"] == pytest.approx(4.0)
    assert rows["team-a"]["lost_reclaim_gpu_hours"] == pytest.approx(2.0)
    assert rows["team-a"]["lost_move_gpu_hours"] == 0
    assert rows["team-b"]["lost_move_gpu_hours"] == pytest.approx(1.0)
    # A member sees their namespace's only; the days split it.
    assert [r["namespace"] for r in api.get("/api/v1/usage/", params).json()["rows"]] == ["team-a"]
    days = api.get("/api/v1/usage/", {**params, "group_by": "day"}).json()["rows"]
    assert [(r["day"], r["lost_gpu_hours"]) for r in days] == [("2026-11-03", 4.0), ("2026-11-04", 2.0)]
    one_day = api.get("/api/v1/usage/", {**params, "to": "2026-11-03"}).json()["rows"]
    assert one_day[0]["lost_gpu_hours"] == pytest.approx(4.0)
    csv_text = staff_api.get("/api/v1/usage/", {**params, "format": "csv"}).content.decode()
    header, first = csv_text.splitlines()[:2]
    assert header.split(",")[-5:] == [
        "lost_gpu_hours",
        "lost_preemption_gpu_hours",
        "lost_reclaim_gpu_hours",
        "lost_move_gpu_hours",
        "lost_cluster_gpu_hours",
    ]
    assert first.split(",")[-5:] == ["6.000000", "4.000000", "2.000000", "0.000000", "0.000000"]
    client.force_login(alice)
    page = client.get("/usage/", params).content.decode()
    assert "6.00 of them lost" in page and "preemption 4.00, reclaim 2.00, moves 0.00" in page


def test_metrics_count_it_by_namespace_and_cause(stops, settings):
    settings.JOBDASH_METRICS_TOKEN = ""
    families = parse(Client().get("/metrics").content.decode())
    total = "jobdash_lost_gpu_seconds_total"
    assert sample(families, "jobdash_lost_gpu_seconds", total, namespace="team-a", cause="preemption") == 4 * 3600
    assert sample(families, "jobdash_lost_gpu_seconds", total, namespace="team-a", cause="reclaim") == 2 * 3600
    assert sample(families, "jobdash_lost_gpu_seconds", total, namespace="team-b", cause="move") == 3600
    assert sample(families, "jobdash_lost_gpu_seconds", total, namespace="team-b", cause="preemption") is None


def test_the_job_says_what_it_lost_in_the_api_and_on_its_page(stops, api, client, alice):
    a, _ = stops
    stops_of = api.get(f"/api/v1/jobs/{a.pk}/").json()["lost_work"]
    assert [(s["cause"], s["gpu_hours"], s["seconds"]) for s in stops_of] == [
        ("preemption", 4.0, 1800.0),
        ("reclaim", 2.0, 900.0),
    ]
    assert stops_of[0]["checkpointed_at"] == "2026-11-03T11:30:00Z"
    client.force_login(alice)
    page = client.get(f"/jobs/{a.pk}/").content.decode()
    assert "6.00 GPU-hours redone over 2 stops (preemption 4.00, reclaim 2.00)" in page
