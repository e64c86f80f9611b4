"""Usage over a million finished jobs (issue 37): the fold's rate and the report's answer time.

    python -m bench.usage [--jobs 1000000] [--namespaces 20] [--users 50]

Run it through the harness (PostgreSQL): `.venv/bin/python tests/harness.py --
.venv/bin/python -m bench.usage`. Prints one JSON line.

The jobs and their timelines are generated straight into PostgreSQL (INSERT ... SELECT over
generate_series): `--jobs` finished jobs spread over October 2026 (UTC), of `--namespaces`
namespaces and `--users` users, 1-8 GPUs each, runs of up to 12 hours (some over midnight);
one in ten preempted once and run again (Running, Preempted, Running, Succeeded), the others
Running then Succeeded. Then every event is folded (services.fold_all: a transaction per
10,000 events) and timed: events/s. Then the API's request for the month grouped by
namespace,user (GET /api/v1/usage/, as staff) is timed 5 times, once with every event
folded and once with the last `--unfolded` events (10,000) not folded yet: what a read adds
itself between two folds.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

from bench import stack

MONTH = ("2026-10-01", "2026-10-31")
DEFAULTS = {"text": "''", "character varying": "''", "integer": "0", "bigint": "0", "smallint": "0"}
DEFAULTS |= {"boolean": "false", "jsonb": "'{}'::jsonb", "timestamp with time zone": "now()", "double precision": "0"}


def generate(jobs: int, namespaces: int, users: int) -> int:
    """Jobs and events written by PostgreSQL itself; returns the events written."""
    from django.db import connection

    from jobdash.jobs.models import Job, JobEvent, Namespace

    ids = list(Namespace.objects.order_by("name").values_list("id", flat=True))[:namespaces]
    job_table, event_table = Job._meta.db_table, JobEvent._meta.db_table
    # Every column that must be given (no default in the database): a plain value of its type,
    # unless set below.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
            "AND is_nullable = 'NO' AND column_default IS NULL AND is_identity = 'NO'",
            [job_table],
        )
        required = dict(cursor.fetchall())
    ns_array = "ARRAY[" + ",".join(str(i) for i in ids) + "]"
    # Job i: starts somewhere in October, runs 10 min to 12 h, 1, 2, 4 or 8 GPUs.
    chosen = {
        "namespace_id": f"({ns_array})[1 + (i % {len(ids)})]",
        "name": "'job-' || i",
        "kind": "CASE WHEN i % 3 = 0 THEN 'PyTorchJob' ELSE 'Job' END",
        "api_version": "'batch/v1'",
        "kind_key": "'jobs.batch'",
        "state": "'Succeeded'",
        "source": "'api'",
        "submitted_by_name": f"'user-' || (i % {users})",
        "priority_class": "CASE WHEN i % 5 = 0 THEN 'high' ELSE '' END",
        "borrowing": "(i % 7 = 0)",
        "workload": "jsonb_build_object('requests', jsonb_build_object('cpu', 4000 * g, 'memory', "
        "(16::bigint << 30) * g, 'nvidia.com/gpu', g))",
        "submitted_at": "t0",
        "started_at": "t0",
        "finished_at": "t0 + d",
    }
    columns = sorted(set(required) | set(chosen))
    values = ", ".join(chosen.get(c) or DEFAULTS[required[c]] for c in columns)
    series = (
        f"SELECT i, (ARRAY[1,2,4,8])[1 + (i * 7) % 4] AS g, "
        f"timestamptz '2026-10-01' + (hashint(i) * interval '30 days') AS t0, "
        f"interval '10 minutes' + hashint(i + 1) * interval '12 hours' AS d "
        f"FROM generate_series(1, {jobs}) AS i"
    )
    with connection.cursor() as cursor:
        # Writing millions of rows takes longer than the deployment's statement timeout
        # (JOBDASH_DB_STATEMENT_TIMEOUT_SECONDS): lifted for the generation only.
        cursor.execute("SET statement_timeout = 0")
        # A repeatable "random" fraction of i (no random(): the same data every run).
        cursor.execute(
            "CREATE OR REPLACE FUNCTION hashint(bigint) RETURNS double precision IMMUTABLE LANGUAGE sql AS "
            "$$ SELECT ((($1 * 2654435761) % 4294967296 + 4294967296) % 4294967296)::double precision / 4294967296 $$"
        )
        cursor.execute(f"INSERT INTO {job_table} ({', '.join(columns)}) SELECT {values} FROM ({series}) s")
        # Timelines in time order (ids follow time, as the dispatcher writes them).
        cursor.execute(
            f"""
            INSERT INTO {event_table} (job_id, type, message, actor, created_at)
            SELECT job_id, type, '', 'bench', at FROM (
                SELECT j.id AS job_id, e.type, j.started_at + e.offset_s * (j.finished_at - j.started_at) AS at, e.n
                FROM {job_table} j
                CROSS JOIN LATERAL (VALUES
                    ('Submitted', 0.0, 0), ('Running', 0.0, 1),
                    ('Preempted', 0.3, 2), ('Running', 0.4, 3),
                    ('Succeeded', 1.0, 4)
                ) AS e(type, offset_s, n)
                WHERE e.n IN (0, 1, 4) OR j.id % 10 = 0
            ) x ORDER BY at, job_id, n
            """
        )
        cursor.execute(f"SELECT count(*) FROM {event_table}")
        events = cursor.fetchone()[0]
        cursor.execute(f"ANALYZE {job_table}; ANALYZE {event_table}")
        cursor.execute("RESET statement_timeout")
    return int(events)


def timed_reads(client, params: dict, times: int = 5) -> dict:
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        answer = client.get("/api/v1/usage/", params)
        seconds.append(time.perf_counter() - started)
        assert answer.status_code == 200, answer.content
    rows = answer.json()["rows"]
    return {
        "p50_s": round(statistics.median(seconds), 4),
        "max_s": round(max(seconds), 4),
        "rows": len(rows),
        "gpu_hours": round(sum(r["gpu_hours"] for r in rows), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument(
        "--unfolded", type=int, default=10_000, help="events left to the read (a minute of a busy cluster)"
    )
    args = parser.parse_args()

    stack.setup_django()
    from django.contrib.auth.models import User
    from django.db import connection
    from rest_framework.test import APIClient

    from jobdash.jobs.models import JobEvent
    from jobdash.usage import services
    from jobdash.usage.models import UsageDay, UsageMark

    names = [f"team-{i:02d}" for i in range(args.namespaces)]
    stack.reset_database(names)
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {UsageDay._meta.db_table}, {UsageMark._meta.db_table}")
    started = time.perf_counter()
    events = generate(args.jobs, args.namespaces, args.users)
    generate_s = time.perf_counter() - started
    stack.log(f"generated {args.jobs} jobs and {events} events in {generate_s:.1f} s")

    # Fold all but the last `--unfolded` events first: the read then adds those itself.
    stop_at = max(0, events - args.unfolded)  # (ids run from 1: the tables were truncated)
    started, cpu = time.perf_counter(), time.process_time()
    folded, mark = 0, 0  # (the ids follow time: generated in time order)
    while mark < stop_at and (got := services.fold(min(10_000, stop_at - mark), settle_s=0)):
        folded += got
        mark = UsageMark.objects.get().event_id
    partial_s = time.perf_counter() - started
    staff, _ = User.objects.get_or_create(username="bench-staff", defaults={"is_staff": True})
    client = APIClient()
    client.force_authenticate(staff)
    params = {"from": MONTH[0], "to": MONTH[1], "group_by": "namespace,user"}
    unfolded_read = timed_reads(client, params)
    unfolded_read["unfolded_events"] = JobEvent.objects.filter(id__gt=mark).count()

    started2 = time.perf_counter()
    folded += services.fold_all(10_000, settle_s=0)
    fold_s = partial_s + time.perf_counter() - started2
    fold_cpu_s = time.process_time() - cpu
    folded_read = timed_reads(client, params)
    assert abs(folded_read["gpu_hours"] - unfolded_read["gpu_hours"]) < 0.2, (folded_read, unfolded_read)

    print(
        json.dumps(
            {
                "bench": "usage",
                "jobs": args.jobs,
                "events": events,
                "generate_s": round(generate_s, 1),
                "folded": folded,
                "fold_s": round(fold_s, 1),
                "fold_cpu_s": round(fold_cpu_s, 1),
                "fold_events_per_s": round(folded / fold_s),
                "usage_rows": UsageDay.objects.count(),
                "read_month_by_namespace_user": folded_read,
                "read_with_events_unfolded": unfolded_read,
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
