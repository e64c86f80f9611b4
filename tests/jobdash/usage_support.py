"""Job histories written straight into the database for the usage tests: jobs and their
timelines at chosen times, and the runs they really had, for a direct computation."""

import random
from datetime import UTC, datetime

from django.db import connection

from jobdash.jobs.models import Job, JobEvent, Namespace, State
from queueing.usage import ENDS, Run

T0 = datetime(2026, 1, 30, 20, 0, tzinfo=UTC).timestamp()  # runs cross the month's end


def write_histories(jobs: int, seed: int) -> tuple[list[Run], dict[int, tuple]]:
    """`jobs` jobs with random runs (ends of every kind, some still running); returns the
    runs (open ones end at None) and each job's (gpus, cpu_m, memory_b, labels)."""
    rng = random.Random(seed)
    namespaces = {n: Namespace.objects.get_or_create(name=n)[0] for n in ("team-a", "team-b")}
    events, spans, jobs_of = [], [], {}
    for i in range(jobs):
        gpus, cpu_m, memory_b = rng.choice([0, 1, 2, 8]), rng.choice([500, 4000]), rng.choice([2**30, 3 * 2**30])
        namespace = rng.choice(sorted(namespaces))
        user, kind, pc, borrowing = (
            rng.choice(["ann", "bob"]),
            rng.choice(["K1", "K2"]),
            rng.choice(["", "hi"]),
            (rng.random() < 0.3),
        )
        job = Job.objects.create(
            namespace=namespaces[namespace],
            name=f"job-{seed}-{i}",
            kind=kind,
            api_version="example.org/v1",
            kind_key="ks.example.org",
            manifest="",
            parsed={},
            workload={"requests": {"cpu": cpu_m, "memory": memory_b, "nvidia.com/gpu": gpus}},
            source="api",
            state=State.SUCCEEDED,
            submitted_by_name=user,
            priority_class=pc,
            borrowing=borrowing,
        )
        jobs_of[job.id] = (gpus, cpu_m, memory_b, namespace, user, kind, pc, borrowing)
        t = T0 + rng.uniform(0, 86_400)
        events.append((job.id, "Submitted", t))
        for _ in range(rng.randint(0, 3)):
            t += rng.uniform(1, 20_000)
            events.append((job.id, "Running", t))
            length = rng.uniform(0, 2 * 86_400)
            events.append((job.id, rng.choice(sorted(ENDS)), t + length))
            spans.append((job.id, t, t + length))
            t += length
        if rng.random() < 0.2:
            t += 30
            events.append((job.id, "Running", t))
            spans.append((job.id, t, None))
    events.sort(key=lambda e: e[2])
    insert_events(events)
    runs = [run_of(jobs_of, job_id, start, end) for job_id, start, end in spans]
    return runs, jobs_of


def run_of(jobs_of, job_id, start, end) -> Run:
    gpus, cpu_m, memory_b, namespace, user, kind, pc, borrowing = jobs_of[job_id]
    return Run(job_id, start, end, gpus, cpu_m, memory_b, namespace, user, kind, pc, borrowing)


def insert_events(events) -> None:
    """(job id, type, epoch) in id order at those times (the model would stamp them now)."""
    table = connection.ops.quote_name(JobEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (job_id, type, message, actor, created_at) VALUES (%s, %s, '', 'test', %s)",
            [(job_id, kind, datetime.fromtimestamp(at, UTC)) for job_id, kind, at in events],
        )
