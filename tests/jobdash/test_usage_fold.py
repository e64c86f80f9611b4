"""Folding timelines into UsageDay on the real database (issue 37): in batches, across a
failover (a process SIGKILLed mid-fold while it holds the mark's lock), and rebuilt from the
first event: always the totals the runs give directly."""

import os
import subprocess
import sys
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from jobdash.usage import selectors, services
from jobdash.usage.models import UsageDay, UsageMark
from queueing.usage import Amounts, summarize

from .usage_support import write_histories

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("real-processes")]

HOLDER = """
import sys, time, django
django.setup()
from django.db import transaction
from jobdash.usage import services
with transaction.atomic():
    folded = services.fold(limit=int(sys.argv[1]), settle_s=0)
    print("holding", folded, flush=True)
    time.sleep(600)
"""


def database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def folded_totals() -> dict:
    return {
        (r.day, r.namespace, r.user, r.kind, r.priority_class, r.borrowed, r.cluster): Amounts(
            r.gpu_s, r.cpu_s, r.memory_gib_s
        )
        for r in UsageDay.objects.all()
    }


def assert_same(got: dict, want: dict) -> None:
    want = {tuple(k): v for k, v in want.items() if v != Amounts()}
    assert set(got) == set(want)
    for key, amounts in want.items():
        assert got[key] == pytest.approx(amounts, rel=1e-9), key


def test_a_fold_killed_while_holding_the_lock_leaves_nothing_and_the_next_folds_on():
    runs, _ = write_histories(60, seed=1)
    closed = [r for r in runs if r.end is not None]
    services.fold(limit=40, settle_s=0)
    first_mark = UsageMark.objects.get().event_id
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "jobdash.settings"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "70"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().split() == ["holding", "70"]  # folded, not committed, lock held
        result = {}
        other = threading.Thread(target=lambda: result.update(n=services.fold_all(batch=25, settle_s=0)))
        other.start()
        time.sleep(1.0)
        assert other.is_alive(), "a second fold ran while the first held the mark"
        holder.kill()
        holder.wait(10)
        other.join(30)
        assert not other.is_alive()
    finally:
        holder.kill()
        connection.close()
    mark = UsageMark.objects.get()
    assert mark.event_id > first_mark and result["n"] > 70  # the killed fold's 70 were folded again
    assert_same(folded_totals(), summarize(closed))
    assert {int(k) for k in mark.open} == {r.job_id for r in runs if r.end is None}


def test_rebuild_usage_gives_the_same_numbers_and_reads_add_the_open_runs_up_to_now():
    runs, _ = write_histories(80, seed=2)
    for limit in (7, 13, 50, 10_000):
        services.fold(limit=limit, settle_s=0)
    services.fold_all(settle_s=0)
    incremental = folded_totals()
    call_command("rebuild_usage", "--batch", "17")
    assert folded_totals() == pytest.approx(incremental, rel=1e-9) and set(folded_totals()) == set(incremental)

    now = datetime(2026, 2, 5, 12, tzinfo=UTC)
    direct = summarize(r if r.end is not None else r.__class__(**{**r.__dict__, "end": now.timestamp()}) for r in runs)
    rows = selectors.usage(date(2026, 1, 31), date(2026, 2, 2), ["namespace", "day"], None, now)
    want: dict = {}
    for key, amounts in direct.items():
        if date(2026, 1, 31) <= key.day <= date(2026, 2, 2):
            want[(key.namespace, key.day)] = want.get((key.namespace, key.day), 0.0) + amounts.gpu_s / 3600
    assert {(r["namespace"], r["day"]): r["gpu_hours"] for r in rows} == pytest.approx(want, rel=1e-9)
    only_b = selectors.usage(None, None, ["namespace"], ["team-b"], now)
    assert [r["namespace"] for r in only_b] == ["team-b"]


def test_reads_count_events_not_folded_yet_once():
    runs, _ = write_histories(30, seed=3)
    now = datetime(2026, 2, 6, tzinfo=UTC)
    before = selectors.usage(None, None, ["user"], None, now)
    services.fold(limit=20, settle_s=0)
    middle = selectors.usage(None, None, ["user"], None, now)
    services.fold_all(settle_s=0)
    after = selectors.usage(None, None, ["user"], None, now)
    assert before == pytest.approx(middle, rel=1e-9) and middle == pytest.approx(after, rel=1e-9)
    total = sum(r.gpus * ((r.end or now.timestamp()) - r.start) for r in runs) / 3600
    assert sum(r["gpu_hours"] for r in after) == pytest.approx(total, rel=1e-9)


def test_unsettled_events_wait_for_the_next_fold():
    write_histories(5, seed=4)
    far_past = datetime(2026, 1, 30, 19, tzinfo=UTC)  # before every event: none has settled
    assert services.fold(now=far_past, settle_s=0) == 0
    assert services.fold(settle_s=0) > 0


def test_the_leaders_beat_sends_the_fold_every_minute_and_the_task_folds(settings):
    from jobdash.celery import app
    from jobdash.dispatch.beat import FOLD_ENTRY, LeaderGatedScheduler
    from jobdash.usage.tasks import usage_fold

    scheduler = LeaderGatedScheduler(app=app, lazy=True)
    scheduler.setup_schedule()
    entry = scheduler.schedule[FOLD_ENTRY]
    assert entry.task == usage_fold.name == "jobdash.usage_fold"
    assert entry.schedule.run_every.total_seconds() == 60
    app.loader.import_default_modules()
    assert "jobdash.usage_fold" in app.tasks  # found by the worker's autodiscovery

    runs, _ = write_histories(10, seed=5)
    settings.JOBDASH_USAGE_SETTLE_SECONDS = 0
    assert usage_fold.run(term=3)["folded"] > 0
    assert_same(folded_totals(), summarize(r for r in runs if r.end is not None))
