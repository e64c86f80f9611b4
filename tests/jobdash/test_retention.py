"""Retention with real PostgreSQL: old finished jobs go to the archive and out of the tables,
the rest stay; the archive reads back field for field; a dry run writes nothing; a sweep
killed mid-way leaves every job whole or gone, and the next one finishes."""

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from jobdash.jobs.models import (
    EventOutbox,
    Job,
    JobDependency,
    JobEvent,
    PodGroupMember,
    QueuedMirror,
    State,
)
from jobdash.usage import archive, retention
from jobdash.usage.models import Archive, UsageDay, UsageMark

ROOT = Path(__file__).resolve().parents[2]
FIELDS = [f.attname for f in Job._meta.concrete_fields]
OLD = timezone.now() - timedelta(days=100)


def _job(namespace, name, state, finished_at=OLD, **fields) -> Job:
    job = Job.objects.create(
        namespace=namespace,
        name=name,
        kind="TFJob",
        api_version="kubeflow.org/v1",
        kind_key="tfjobs.kubeflow.org",
        manifest=f"kind: TFJob\nmetadata: {{name: {name}}}\n",
        parsed={"metadata": {"name": name}},
        workload={"requests": {"nvidia.com/gpu": 2}, "ünïcode": "✓"},
        state=state,
        source="api",
        finished_at=finished_at if state in (State.SUCCEEDED, State.FAILED, State.CANCELLED) else None,
        **fields,
    )
    for kind in ("Submitted", "Running", str(state)):
        JobEvent.objects.create(job=job, type=kind, actor="dispatcher", message=f"{name} {kind}")
    return job


def _fold_everything() -> None:
    UsageMark.objects.update_or_create(id=1, defaults={"event_id": JobEvent.objects.order_by("-id").first().id})


def _snapshot(job_ids) -> dict[int, dict]:
    rows = {row["id"]: row for row in Job.objects.filter(id__in=job_ids).values(*FIELDS)}
    for event in JobEvent.objects.filter(job_id__in=job_ids).order_by("created_at", "id").values():
        rows[event["job_id"]].setdefault("events", []).append(event)
    return rows


def test_old_finished_jobs_are_archived_and_removed_and_read_back_field_for_field(team_a, tmp_path):
    done = _job(
        team_a,
        "done",
        State.SUCCEEDED,
        started_at=OLD - timedelta(hours=2),
        priority=7,
        predicted_duration_s=1234.5678901,
    )
    failed = _job(team_a, "failed", State.FAILED, failure={"reason": "OOMKilled"}, finished_at=OLD - timedelta(days=40))
    after = _job(team_a, "after", State.CANCELLED)
    JobDependency.objects.create(job=after, on=failed, condition="any")
    PodGroupMember.objects.create(job=done, name="pod-0")
    recent = _job(team_a, "recent", State.SUCCEEDED, finished_at=timezone.now() - timedelta(days=2))
    needed = _job(team_a, "needed", State.SUCCEEDED)  # an active job waits for it
    waiting = _job(team_a, "waiting", State.QUEUED, preempted_for=done)
    JobDependency.objects.create(job=waiting, on=needed, condition="ok")
    QueuedMirror.objects.create(job=waiting, name="waiting")
    UsageDay.objects.create(day=OLD.date(), namespace="team-a", gpu_s=7200)
    _fold_everything()
    unfolded = _job(team_a, "unfolded", State.FAILED)  # its events are past the usage mark
    gone = [done.id, failed.id, after.id]
    assert EventOutbox.objects.filter(event__job_id__in=gone).exists()
    before = _snapshot(gone)

    swept = retention.sweep(30, directory=tmp_path)

    assert (swept.jobs, swept.events) == (3, 9)
    assert not Job.objects.filter(id__in=gone).exists()
    assert not JobEvent.objects.filter(job_id__in=gone).exists()
    assert not JobDependency.objects.filter(on_id=failed.id).exists() and not PodGroupMember.objects.exists()
    # (a trigger puts cluster-facing events in the outbox: the removed jobs' went with them)
    assert not EventOutbox.objects.filter(event__job_id__in=gone).exists()
    assert EventOutbox.objects.filter(event__job_id=recent.id).exists()
    kept = {recent.id, needed.id, waiting.id, unfolded.id}
    assert set(Job.objects.values_list("id", flat=True)) == kept
    assert JobEvent.objects.filter(job_id__in=kept).count() == 12 and QueuedMirror.objects.filter(job=waiting).exists()
    assert Job.objects.get(id=waiting.id).preempted_for_id is None  # its link to a removed job cleared
    assert UsageDay.objects.get().gpu_s == 7200  # usage is never touched

    # One file per month the jobs finished in, each recorded with its counts.
    rows = list(Archive.objects.order_by("month"))
    assert [(r.month, r.jobs, r.events) for r in rows] == [
        (failed.finished_at.date().replace(day=1), 1, 3),
        (OLD.date().replace(day=1), 2, 6),
    ]
    assert all(Path(r.path).name == f"{r.month:%Y-%m}.1.jsonl.gz" for r in rows)
    back = {job["id"]: job for row in rows for job in archive.read(row.path)}
    assert back.keys() == set(gone)
    for job_id, row in before.items():
        assert {name: back[job_id][name] for name in FIELDS} == {name: row[name] for name in FIELDS}
        assert back[job_id]["events"] == row["events"]
        assert back[job_id]["namespace"] == "team-a"
    assert back[after.id]["dependencies"] == [
        {"id": back[after.id]["dependencies"][0]["id"], "job_id": after.id, "on_id": failed.id, "condition": "any"}
    ]
    assert [d["job_id"] for d in back[failed.id]["dependents"]] == [after.id]

    # The command prints the same jobs as JSON lines.
    out = io.StringIO()
    call_command("read_archive", rows[1].path, stdout=out)
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(j["id"], j["name"], len(j["events"])) for j in printed] == [(done.id, "done", 3), (after.id, "after", 3)]

    # A second sweep finds nothing and makes no file.
    assert retention.sweep(30, directory=tmp_path).jobs == 0
    assert Archive.objects.count() == 2


def test_a_dry_run_counts_by_month_and_writes_nothing(team_a, tmp_path, settings):
    settings.JOBDASH_ARCHIVE_DIR = tmp_path / "archive"
    for n in range(3):
        _job(team_a, f"old-{n}", State.SUCCEEDED)
    _fold_everything()
    out = io.StringIO()
    call_command("retention_sweep", "--days", "30", "--dry-run", stdout=out)
    report = json.loads(out.getvalue())
    assert (report["dry_run"], report["jobs"], report["events"]) == (True, 3, 9)
    assert report["files"] == {f"{OLD:%Y-%m}": 3}
    assert Job.objects.count() == 3 and not Archive.objects.exists()
    assert not (tmp_path / "archive").exists()


def test_zero_days_keeps_everything(team_a, tmp_path, settings):
    settings.JOBDASH_RETENTION_DAYS = 0
    _job(team_a, "ancient", State.SUCCEEDED, finished_at=timezone.now() - timedelta(days=3000))
    _fold_everything()
    assert retention.sweep(directory=tmp_path).jobs == 0
    assert Job.objects.count() == 1


def test_nothing_is_archived_before_the_usage_fold_has_passed_it(team_a, tmp_path):
    _job(team_a, "old", State.SUCCEEDED)  # no UsageMark yet: nothing folded
    assert retention.sweep(30, directory=tmp_path).jobs == 0
    _fold_everything()
    assert retention.sweep(30, directory=tmp_path).jobs == 1


@pytest.mark.django_db
def test_every_foreign_key_to_a_job_is_deleted_by_the_sweep_through_an_index():
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.conrelid::regclass::text, a.attname FROM pg_constraint c
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
               WHERE c.contype = 'f' AND c.confrelid = %s::regclass""",
            [Job._meta.db_table],
        )
        references = set(cursor.fetchall())
        cursor.execute(
            """SELECT i.indrelid::regclass::text, a.attname FROM pg_index i
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"""
        )
        leading = set(cursor.fetchall())
    assert references == set(retention.REFERENCES)
    assert references <= leading  # each column leads an index: no CASCADE check scans


def _sweep_process(tmp_path) -> subprocess.Popen:
    s = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}",
        "JOBDASH_ARCHIVE_DIR": str(tmp_path),
    }
    return subprocess.Popen(
        [sys.executable, "manage.py", "retention_sweep", "--days", "30", "--batch", "10"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


@pytest.mark.django_db(transaction=True)
def test_a_sweep_killed_midway_leaves_every_job_whole_or_gone_and_the_next_one_finishes(tmp_path):
    from jobdash.jobs.models import Namespace

    team = Namespace.objects.create(name="team-k")
    jobs = [_job(team, f"j{n}", State.SUCCEEDED) for n in range(1000)]
    _fold_everything()
    before = _snapshot([j.id for j in jobs])

    process = _sweep_process(tmp_path)
    deadline = time.monotonic() + 60
    while not Archive.objects.filter(jobs__gt=0).exists():  # killed once some batches committed
        assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)

    left = set(Job.objects.values_list("id", flat=True))
    assert 0 < len(left) < len(jobs)
    events = {}
    for job_id in JobEvent.objects.values_list("job_id", flat=True):
        events[job_id] = events.get(job_id, 0) + 1
    assert events == {job_id: 3 for job_id in left}  # no job half-deleted
    archived = [job["id"] for row in Archive.objects.all() for job in archive.read(row.path)]
    assert sorted(archived) == sorted(set(before) - left)  # the archive holds exactly what went

    finish = _sweep_process(tmp_path)
    assert finish.wait(timeout=120) == 0, finish.stdout.read()
    assert not Job.objects.exists() and not JobEvent.objects.exists()
    back = {job["id"]: job for row in Archive.objects.all() for job in archive.read(row.path)}
    assert len(back) == sum(Archive.objects.values_list("jobs", flat=True)) == len(jobs)
    for job_id, row in before.items():
        assert {name: back[job_id][name] for name in FIELDS} == {name: row[name] for name in FIELDS}
        assert back[job_id]["events"] == row["events"]


@pytest.mark.parametrize("days", [180, 0])
def test_the_leaders_beat_schedules_the_sweep_daily_unless_retention_is_off(settings, days):
    from jobdash.celery import app
    from jobdash.dispatch.beat import CYCLE_ENTRY, FOLD_ENTRY, RETENTION_ENTRY, LeaderGatedScheduler

    settings.JOBDASH_RETENTION_DAYS = days
    scheduler = LeaderGatedScheduler(app=app, lazy=True)
    scheduler.setup_schedule()
    entry = scheduler.schedule.get(RETENTION_ENTRY)
    assert {CYCLE_ENTRY, FOLD_ENTRY} <= set(scheduler.schedule)  # (the sweep's entry drops no other)
    if days:
        assert entry.task == "jobdash.retention_sweep"
        assert entry.schedule.remaining_estimate(timezone.now()) <= timedelta(days=1)
    else:
        assert entry is None


def test_the_beat_task_sweeps_with_the_settings(team_a, tmp_path, settings):
    from jobdash.dispatch.tasks import retention_sweep

    settings.JOBDASH_RETENTION_DAYS = 30
    settings.JOBDASH_ARCHIVE_DIR = tmp_path
    _job(team_a, "old", State.FAILED)
    _job(team_a, "young", State.FAILED, finished_at=timezone.now() - timedelta(days=29))
    _fold_everything()
    assert retention_sweep(term=3)["jobs"] == 1
    assert list(Job.objects.values_list("name", flat=True)) == ["young"]
    assert [p.name for p in tmp_path.iterdir()] == [f"{OLD:%Y-%m}.1.jsonl.gz"]


def test_a_file_is_read_up_to_the_jobs_its_archive_row_counts(team_a, tmp_path):
    """What a sweep killed between appending a batch and committing it leaves: complete lines
    past the committed count, or a member cut short; neither is read back."""
    for n in range(3):
        _job(team_a, f"old-{n}", State.SUCCEEDED)
    _fold_everything()
    swept = retention.sweep(30, directory=tmp_path)
    path = Path(next(iter(swept.files)))
    committed = [job["id"] for job in archive.read(path)]
    assert len(committed) == 3
    line = gzip.decompress(path.read_bytes()).splitlines()[0]
    again = json.dumps({**json.loads(line), "id": 999}).encode() + b"\n"
    archive.append_member(path, archive.member([again]) + archive.member([again])[:15])
    assert [job["id"] for job in archive.read(path)] == committed
    # A copy without its Archive row: every complete line, up to the member cut short.
    copy = tmp_path / "copy.jsonl.gz"
    copy.write_bytes(path.read_bytes())
    assert [job["id"] for job in archive.read(copy)] == [*committed, 999]
