"""Retention at scale (issue 37): a million finished jobs with their events, generated straight
into PostgreSQL, removed by the sweep (jobdash.usage.retention) while a second session keeps
asking for the rows the sweep is about to take and a third writes an active job: the longest
either waited is the longest lock the sweep held on them. And the namespace page's selector
and the cycle's pending read, timed with thousands of job rows and with a million (their
plans named), cost the same.

    .venv/bin/python tests/harness.py -- .venv/bin/python -m bench.retention [--jobs 1000000]

One JSON line on stdout; bench/results/retention.md is the report.
"""

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from bench.stack import log, setup_django

NAMESPACES = 10
ACTIVE_PER_NAMESPACE = 100  # queued and running: what the pages and the cycle read
RECENT_FINISHED = 5000  # the "thousands" the tables held before
EVENTS_PER_JOB = 3
PROBE_EVERY_S = 0.05


def _insert_jobs(
    cursor, namespace_ids: list[int], count: int, state: str, finished_days_ago: float | None, prefix: str
):
    """`count` job rows by one INSERT ... SELECT generate_series, every other column as a new
    Job's default is (the model's own values, so the rows are what the ORM would write)."""
    from django.db import connection

    from jobdash.jobs.models import Job

    template = Job(
        namespace_id=namespace_ids[0],
        name="x",
        kind="TFJob",
        api_version="kubeflow.org/v1",
        kind_key="tfjobs.kubeflow.org",
        manifest="apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata:\n  name: train\nspec: {}\n",
        parsed={"kind": "TFJob", "metadata": {"name": "train"}},
        workload={"requests": {"nvidia.com/gpu": 4, "cpu": 8000, "memory": 34359738368}},
        source="api",
        submitted_by_name="bench",
    )
    generated = {
        "namespace_id": "(%(namespaces)s::int[])[1 + g %% %(n_ns)s]",
        "name": "%(prefix)s || g",
        "state": "%(state)s",
        "submitted_at": "now() - make_interval(secs => %(age)s + 7200 + g %% 3600)",
        "started_at": "now() - make_interval(secs => %(age)s + 3600 + g %% 3600)",
        "finished_at": "CASE WHEN %(finished)s THEN now() - make_interval(secs => %(age)s + g %% 86400) END",
        # Every job that waited was given a start range (the track record reads them).
        "eta_first_at": "now() - make_interval(secs => %(age)s + 7200 + g %% 3600)",
        "eta_first": "now() - make_interval(secs => %(age)s + 3500 + g %% 3600)",
        "eta_first_late": "now() - make_interval(secs => %(age)s + 3000 + g %% 3600)",
    }
    columns, values, params = [], [], {}
    for field in Job._meta.concrete_fields:
        if field.primary_key or field.attname == "changed_xid":
            continue
        columns.append(f'"{field.column}"')
        if field.attname in generated:
            values.append(generated[field.attname])
        else:
            params[field.attname] = field.get_db_prep_save(getattr(template, field.attname), connection)
            values.append(f"%({field.attname})s")
    age = (finished_days_ago or 0) * 86400
    params.update(
        namespaces=namespace_ids,
        n_ns=len(namespace_ids),
        prefix=prefix,
        state=state,
        age=age,
        finished=finished_days_ago is not None,
        count=count,
    )
    cursor.execute(
        f"INSERT INTO {Job._meta.db_table} ({', '.join(columns)}) "
        f"SELECT {', '.join(values)} FROM generate_series(1, %(count)s) g",
        params,
    )


def _insert_events(cursor, name_prefix: str):
    """EVENTS_PER_JOB events of each job whose name starts so, at its submission, start, end."""
    from jobdash.jobs.models import Job, JobEvent

    cursor.execute(
        f"INSERT INTO {JobEvent._meta.db_table} (job_id, type, message, actor, created_at) "
        f"SELECT j.id, e.type, '', 'dispatcher', CASE e.n WHEN 1 THEN j.submitted_at WHEN 2 THEN j.started_at "
        f"ELSE coalesce(j.finished_at, j.started_at) END "
        f"FROM {Job._meta.db_table} j, (VALUES (1, 'Submitted'), (2, 'Running'), (3, 'Succeeded')) e(n, type) "
        f"WHERE j.name LIKE %s ORDER BY j.id, e.n",
        [name_prefix + "%"],
    )


def _timed(fn, repeat: int = 7) -> float:
    """The median of `repeat` runs (ms), after one warm-up run."""
    fn()
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(runs), 2)


def _reads(namespace) -> dict:
    from django.utils import timezone

    from jobdash.dispatch.state.cycle_cache import CycleCache, queued_rows
    from jobdash.jobs import dashboard

    def page():
        dashboard.namespace_page(
            namespace, dashboard.Filters.parse({}), page=None, running_page_number=None, live=False, now=timezone.now()
        )

    def pending():
        rows, _ = queued_rows(CycleCache())  # a new cache: the full read, the heaviest one
        assert len(rows) == NAMESPACES * ACTIVE_PER_NAMESPACE // 2

    return {"namespace_page_ms": _timed(page), "pending_read_ms": _timed(pending)}


def _plans(namespace) -> dict:
    """Every query the page and the pending read send, EXPLAINed: the scans on the job table
    each uses (a "Seq Scan on jobs_job" would read every row)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from jobdash.dispatch.state.cycle_cache import CycleCache, queued_rows
    from jobdash.jobs import dashboard

    reads = {
        "namespace_page": lambda: dashboard.namespace_page(
            namespace, dashboard.Filters.parse({}), page=None, running_page_number=None, live=False, now=timezone.now()
        ),
        "pending_read": lambda: queued_rows(CycleCache()),
    }
    plans = {}
    for name, read in reads.items():
        read()
        with CaptureQueriesContext(connection) as captured:
            read()
        slowest = sorted(captured.captured_queries, key=lambda q: -float(q["time"]))[:3]
        plans[f"{name}_slowest_queries"] = [f"{float(q['time']) * 1000:.1f} ms: {q['sql'][:90]}" for q in slowest]
        scans = []
        with connection.cursor() as cursor:
            for query in captured.captured_queries:
                if "jobs_job" not in query["sql"] or not query["sql"].lstrip().upper().startswith("SELECT"):
                    continue
                cursor.execute(f"EXPLAIN {query['sql']}")
                scans += [row[0].strip().lstrip("-> ") for row in cursor.fetchall() if "Scan" in row[0]]
        plans[name] = scans
    return plans


class Probe(threading.Thread):
    """Every PROBE_EVERY_S, on its own connection: lock the row the sweep takes next (the
    same eligible-rows query, without SKIP LOCKED: it waits while the sweep's batch holds
    it), and write an active job; the longest wait of each."""

    def __init__(self, dsn: str, cutoff, active_id: int):
        super().__init__(daemon=True)
        self.dsn, self.cutoff, self.active_id = dsn, cutoff, active_id
        self.stop = threading.Event()
        self.swept_waits: list[float] = []
        self.write_waits: list[float] = []
        self.errors: list[str] = []

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '5s'")
            while not self.stop.is_set():
                try:
                    started = time.perf_counter()
                    with conn.transaction():
                        conn.execute(
                            "SELECT id FROM jobs_job WHERE state = ANY(%s) AND finished_at < %s LIMIT 1 FOR UPDATE",
                            [["Succeeded", "Failed", "Cancelled"], self.cutoff],
                        ).fetchall()
                    self.swept_waits.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    conn.execute("UPDATE jobs_job SET message = %s WHERE id = %s", [str(started), self.active_id])
                    self.write_waits.append(time.perf_counter() - started)
                except psycopg.Error as error:
                    self.errors.append(str(error).splitlines()[0])
                self.stop.wait(PROBE_EVERY_S)


def _longest_transaction(dsn: str, stop: threading.Event, out: list[float]) -> None:
    """pg_stat_activity sampled: the longest a transaction of the sweep's session had run."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            row = conn.execute(
                "SELECT max(extract(epoch FROM clock_timestamp() - xact_start)) FROM pg_stat_activity "
                "WHERE application_name = 'retention-sweep' AND state <> 'idle'"
            ).fetchone()
            if row and row[0] is not None:
                out.append(float(row[0]))
            stop.wait(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1_000_000)
    args = parser.parse_args()
    setup_django()
    from django.db import connection
    from django.utils import timezone

    from jobdash.jobs.models import Job, JobEvent, Namespace
    from jobdash.usage import retention
    from jobdash.usage.models import UsageMark

    namespaces = [Namespace.objects.get_or_create(name=f"team-{i}")[0] for i in range(NAMESPACES)]
    ids = [ns.id for ns in namespaces]
    with connection.cursor() as cursor:
        # The outbox is drained each cycle in a running system: not filled by history here.
        cursor.execute("ALTER TABLE jobs_jobevent DISABLE TRIGGER jobs_jobevent_to_outbox")
        half = NAMESPACES * ACTIVE_PER_NAMESPACE // 2
        _insert_jobs(cursor, ids, half, "Queued", None, "queued-")
        _insert_jobs(cursor, ids, half, "Running", None, "running-")
        _insert_jobs(cursor, ids, RECENT_FINISHED, "Succeeded", 1, "recent-")
        _insert_events(cursor, "recent-")
        cursor.execute("ANALYZE")
    before = _reads(namespaces[0])
    log(f"thousands of rows: {before}")

    started = time.monotonic()
    with connection.cursor() as cursor:
        _insert_jobs(cursor, ids, args.jobs, "Succeeded", 400, "old-")
        _insert_events(cursor, "old-")
        cursor.execute("ALTER TABLE jobs_jobevent ENABLE TRIGGER jobs_jobevent_to_outbox")
        cursor.execute("ANALYZE")
        cursor.execute("SELECT pg_total_relation_size('jobs_job'), pg_total_relation_size('jobs_jobevent')")
        job_bytes, event_bytes = cursor.fetchone()
    generated_s = time.monotonic() - started
    UsageMark.objects.update_or_create(
        id=1, defaults={"event_id": JobEvent.objects.order_by("-id").values("id")[0]["id"]}
    )
    log(f"{args.jobs} jobs generated in {generated_s:.0f} s")
    with_million = _reads(namespaces[0])
    plans = _plans(namespaces[0])
    log(f"with {Job.objects.count()} rows: {with_million}")

    s = connection.settings_dict
    dsn = f"host={s['HOST']} port={s['PORT']} user={s['USER']} dbname={s['NAME']}"
    cutoff = timezone.now() - timedelta(days=180)
    probe = Probe(dsn, cutoff, Job.objects.filter(state="Running").values_list("id", flat=True)[0])
    stop_sampling, transactions = threading.Event(), []
    sampler = threading.Thread(target=_longest_transaction, args=(dsn, stop_sampling, transactions), daemon=True)
    with connection.cursor() as cursor:
        cursor.execute("SET application_name = 'retention-sweep'")
    probe.start()
    sampler.start()
    with tempfile.TemporaryDirectory() as directory:
        started = time.monotonic()
        done = retention.sweep(180, directory=Path(directory))
        sweep_s = time.monotonic() - started
        archive_bytes = sum(f.stat().st_size for f in Path(directory).iterdir())
    probe.stop.set()
    stop_sampling.set()
    probe.join()
    sampler.join()
    with connection.cursor() as cursor:
        cursor.execute("SET application_name = ''")
        cursor.execute("VACUUM ANALYZE jobs_job")
        cursor.execute("VACUUM ANALYZE jobs_jobevent")
    after = _reads(namespaces[0])
    log(f"after the sweep: {after}")

    print(
        json.dumps(
            {
                "bench": "retention",
                "jobs_generated": args.jobs,
                "events_generated": args.jobs * EVENTS_PER_JOB,
                "generate_s": round(generated_s, 1),
                "table_mb": {"jobs": job_bytes // 2**20, "events": event_bytes // 2**20},
                "swept_jobs": done.jobs,
                "swept_events": done.events,
                "batches": done.batches,
                "sweep_s": round(sweep_s, 1),
                "jobs_per_s": round(done.jobs / sweep_s),
                "rows_per_s": round((done.jobs + done.events) / sweep_s),
                "archive_mb": round(archive_bytes / 2**20, 1),
                "longest_transaction_s": round(done.longest_transaction_s, 3),
                "longest_transaction_sampled_s": round(max(transactions, default=0.0), 3),
                "probe_lock_swept_rows_max_s": round(max(probe.swept_waits, default=0.0), 3),
                "probe_lock_swept_rows_p50_s": round(statistics.median(probe.swept_waits or [0.0]), 4),
                "probe_write_active_job_max_s": round(max(probe.write_waits, default=0.0), 3),
                "probes": len(probe.swept_waits),
                "probe_errors": probe.errors[:3],
                "reads_with_thousands": before,
                "reads_with_million": with_million,
                "reads_after_sweep": after,
                "plans_with_million": plans,
                "kept_jobs": Job.objects.count(),
                "loadavg_end": round(os.getloadavg()[0], 2),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
