"""Job histories written straight into the database for the usage tests: jobs and their
timelines at chosen times, and the runs they really had, for a direct computation.

Several clusters (issue 49): before some runs a Released event names the cluster the job went
to (east, west, "the cluster": one, or nothing: an adoption's note), and each job has a
cluster now (Job.cluster). A run ran in the cluster the last Released event before it names,
else in the job's cluster now."""

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
    where = random.Random(seed + 10_000)  # the clusters, apart: the rest is as it was for each seed
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
            cluster=(now_in := where.choice(["", "east", "west"])),
        )
        jobs_of[job.id] = (gpus, cpu_m, memory_b, namespace, user, kind, pc, borrowing)
        t = T0 + rng.uniform(0, 86_400)
        events.append((job.id, "Submitted", t, ""))
        ran_in = now_in  # no Released event names a cluster yet: the job's cluster now
        for _ in range(rng.randint(0, 3)):
            t = stored(t + rng.uniform(1, 20_000))
            ran_in = release(where, events, job.id, t, ran_in, now_in)
            events.append((job.id, "Running", t, ""))
            length = rng.uniform(0, 2 * 86_400)
            end = stored(t + length)
            events.append((job.id, rng.choice(sorted(ENDS)), end, ""))
            spans.append((job.id, t, end, ran_in))
            t = end
        if rng.random() < 0.2:
            t = stored(t + 30)
            ran_in = release(where, events, job.id, t, ran_in, now_in)
            events.append((job.id, "Running", t, ""))
            spans.append((job.id, t, None, ran_in))
    events.sort(key=lambda e: e[2])
    insert_events(events)
    runs = [run_of(jobs_of, job_id, start, end, cluster) for job_id, start, end, cluster in spans]
    return runs, jobs_of


# Released events that name no cluster: one cluster's, and an adoption's.
RELEASED = {
    "one": "released to the cluster (leader term 1)",
    "adopted": "found its object in the cluster, its job still Queued",
}


def stored(at: float) -> float:
    """A time as the database keeps it (to the microsecond): a run of a few seconds alone in its
    group (one cluster's) is then exactly what the fold reads back, not 1e-7 of it off."""
    return datetime.fromtimestamp(at, UTC).timestamp()


def release(where: random.Random, events: list, job_id: int, at: float, ran_in: str, now_in: str) -> str:
    """Maybe a Released event just before a run that starts `at`; the cluster the run ran in
    (`ran_in`: where the last release went; `now_in`: the job's cluster now)."""
    choice = where.choice(["east", "west", "one", "adopted", None])
    if choice is None:
        return ran_in  # no new release: where the last one went
    message = RELEASED.get(choice) or f"released to cluster {choice} (leader term 1)"
    named = "" if choice in RELEASED else choice
    events.append((job_id, "Released", at - 0.5, message, named))
    return named  # (naming none: billed to no cluster, not to the job's cluster now)


def run_of(jobs_of, job_id, start, end, cluster="") -> Run:
    gpus, cpu_m, memory_b, namespace, user, kind, pc, borrowing = jobs_of[job_id]
    return Run(job_id, start, end, gpus, cpu_m, memory_b, namespace, user, kind, pc, borrowing, cluster)


def insert_events(events) -> None:
    """(job id, type, epoch[, message[, cluster]]) in id order at those times (the model would stamp them now)."""
    table = connection.ops.quote_name(JobEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (job_id, type, message, actor, cluster, created_at) "
            "VALUES (%s, %s, %s, 'test', %s, %s)",
            [
                (e[0], e[1], e[3] if len(e) > 3 else "", e[4] if len(e) > 4 else "", datetime.fromtimestamp(e[2], UTC))
                for e in events
            ],
        )
