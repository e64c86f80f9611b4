"""bench.kueue_baseline's submitters: every job of a shape's schedule created at its offset
from the start through jobs.services (job_submit, or jobs_submit_many with --bulk) from
processes of their own, as web workers would, and the wait until every job has finished.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections import defaultdict
from pathlib import Path

from bench import stack
from bench.kueue_shape import Shape

ACTIVE = ("Queued", "Released", "Running")


def job_name(cls: str, index: int) -> str:
    return f"{cls}-{index:04d}"


def class_of(name: str) -> str:
    """The class of a job job_name named (class names have dashes: small-required-rack)."""
    return name.rpartition("-")[0]


BULK_WINDOW_S = 0.5


def batches(items, window_s: float) -> list[tuple[float, list]]:
    """--bulk: `items` grouped by the window of `window_s` their due time falls in, each sent
    when its last job is due (never before a job is due), in order."""
    grouped: dict[int, list] = defaultdict(list)
    for item in items:
        grouped[int(item[0] // window_s)].append(item)
    return [(max(item[0] for item in group), group) for _window, group in sorted(grouped.items())]


def _submit(user_id: int, shape: Shape, items, start_at: float, results, bulk: bool) -> None:
    """One submitter process: create `items` at their offsets from `start_at` (epoch); with
    `bulk`, the jobs due in the same BULK_WINDOW_S window in one jobs_submit_many call."""
    import resource

    from django.contrib.auth.models import User
    from django.db import connections

    from jobdash.jobs.services import Submission, job_submit, jobs_submit_many

    lags, error = [], None
    try:
        user = User.objects.get(pk=user_id)
        manifests = {}
        for _at, namespace, cls, i in items:
            job_class = shape.classes[cls]
            manifests[(namespace, cls, i)] = stack.tfjob_yaml(
                job_name(cls, i),
                namespace,
                job_class.pod_cpu,
                job_class.run_s,
                replicas=job_class.pods,
                annotations=job_class.annotations(),
            )
        if bulk:
            for at, group in batches(items, BULK_WINDOW_S):
                delay = start_at + at - time.time()
                if delay > 0:
                    time.sleep(delay)
                # Each job's lag from its own due time, the wait for its window included.
                sent = time.time() - start_at
                lags += [max(0.0, sent - item[0]) for item in group]
                submissions = [
                    Submission(manifests[(namespace, cls, i)], priority=shape.classes[cls].priority)
                    for _at, namespace, cls, i in group
                ]
                jobs_submit_many(user=user, submissions=submissions, source="api")
        else:
            for at, namespace, cls, i in items:
                delay = start_at + at - time.time()
                if delay > 0:
                    time.sleep(delay)
                lags.append(max(0.0, -delay))
                job_submit(
                    user=user,
                    manifest=manifests[(namespace, cls, i)],
                    source="api",
                    priority=shape.classes[cls].priority,
                )
    except BaseException as exc:
        error = repr(exc)
    finally:
        connections.close_all()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        results.put({"lags": lags, "error": error, "cpu_s": usage.ru_utime + usage.ru_stime})


class Submitter:
    """Creates every job at its offset from the start, through the real service, from
    `processes` processes (namespaces dealt round-robin), like web workers would: one
    Python process cannot call job_submit 385 times a second. With `bulk`, each process
    sends the jobs due in the same BULK_WINDOW_S window in one jobs_submit_many call.
    `profile_dir`: py-spy profiles of each submitter process."""

    def __init__(
        self, user, shape: Shape, items, processes: int, *, bulk: bool = False, profile_dir: Path | None = None
    ):
        from django.db import connections

        self.items = items
        self.lags: list[float] = []
        self.cpu_s = 0.0
        self.error: str | None = None
        connections.close_all()  # the children must not share this process's connection
        context = multiprocessing.get_context("fork")
        self.results = context.Queue()
        self.start_at = time.time() + 0.5
        self.started_at = time.monotonic() + 0.5
        index = {name: i for i, name in enumerate(shape.namespace_names())}
        slices = [[item for item in items if index[item[1]] % processes == p] for p in range(processes)]
        self.processes = [
            context.Process(target=_submit, args=(user.pk, shape, part, self.start_at, self.results, bulk), daemon=True)
            for part in slices
            if part
        ]
        self.profilers = []
        for number, process in enumerate(self.processes):
            process.start()
            if profile_dir is not None:
                assert process.pid is not None
                self.profilers.append(stack.Profiler(process.pid, profile_dir / f"submitter-{number}.txt"))
        self._pending = len(self.processes)

    def poll(self) -> bool:
        """True once every submitter process has finished (collects their results)."""
        while self._pending:
            try:
                result = self.results.get(timeout=0.01)
            except queue.Empty:
                return False
            self._pending -= 1
            self.lags += result["lags"]
            self.cpu_s += result["cpu_s"]
            self.error = self.error or result["error"]
        for process in self.processes:
            process.join(5)
        for profiler in self.profilers:
            profiler.stop()
        self.profilers = []
        return True


def wait_until_finished(submitter: Submitter, total: int, timeout_s: float) -> bool:
    from django.db.models import Count

    from jobdash.jobs.models import Job

    deadline = time.monotonic() + timeout_s
    last_report = 0.0
    while True:
        time.sleep(0.5)
        done = submitter.poll()
        if submitter.error is not None:
            raise RuntimeError(f"submission failed: {submitter.error}")
        # This process must not add load the pipeline would be blamed for: counting the
        # active rows (thousands) costs PostgreSQL ~80 ms, so only for the report every 5 s;
        # whether any is left is one index probe.
        active = Job.objects.filter(state__in=ACTIVE)
        now = time.monotonic()
        if now - last_report >= 5.0:
            last_report = now
            counts = dict(active.order_by().values_list("state").annotate(n=Count("id")))
            stack.log(f"t={now - submitter.started_at:5.1f}s {counts}")
        if done and not active.exists() and Job.objects.count() >= total:
            return True
        if now > deadline:
            return False
