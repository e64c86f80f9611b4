"""Workflows end to end (issue 36) through kubesim and the real dispatcher: a pipeline runs in
order; an afterok on a failed job cancels its dependent saying why; an array of 20 with a
limit of 5 never runs more than 5; a job whose node fails is retried and succeeds, one that
exits with a code it does not retry is not, and both timelines say why; a job past its
maximum run time is stopped, and one still queued at its start-by deadline is cancelled."""

import json
from datetime import timedelta

import pytest

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services, workflows
from jobdash.jobs.models import Job, JobEvent, State
from kubesim.resources import JOBS
from kubesim.testing import batch_job_manifest, running_kubesim

from .dispatch_support import JOBDASH, ManualClock, settings, start_gateway, step
from .dispatch_support import cycle_until as until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sim():
    config = {
        "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "64"}}, {"name": "other"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
    }
    with running_kubesim(config, manual_clock=True) as sim:
        yield sim


@pytest.fixture
def dispatcher(sim):
    gateway = start_gateway(sim)
    yield Dispatcher(gateway, settings(topology_levels=("kubernetes.io/hostname",)), clock=ManualClock())
    gateway.stop()


def batch(name: str, *, runs_s: float = 20, cpu: str = "1", annotations: dict | None = None, **more) -> str:
    manifest = batch_job_manifest(name, "team-a", cpu=cpu, memory="1Gi", duration=runs_s, backoff_limit=0, **more)
    stated = {"jobdash.io/expected-duration": f"{int(runs_s)}s"}
    manifest["metadata"].setdefault("annotations", {}).update({**stated, **(annotations or {})})
    return json.dumps(manifest)


def submit(user, name: str, **kwargs) -> Job:
    options = kwargs.pop("options", {})
    return services.job_submit(user=user, manifest=batch(name, **kwargs), source="api", options=options)


def row(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def timeline(job: Job) -> list[tuple[str, str]]:
    return list(JobEvent.objects.filter(job=job).order_by("id").values_list("type", "message"))


def test_a_pipeline_runs_in_order_and_a_failed_dependency_cancels_its_dependent(user, sim, dispatcher, term):
    prep = submit(user, "preprocess")
    train = submit(user, "train", options={"after": "ok:preprocess"})
    evaluate = submit(user, "evaluate", options={"after": ["ok:train"]})
    dispatcher.cycle(term)
    assert row(prep).state in (State.RELEASED, State.RUNNING)
    waiting = row(train)
    assert (waiting.state, waiting.reason) == (State.QUEUED, "WaitingForDependency")
    assert waiting.message.startswith(f"waits for preprocess (#{prep.pk}) to succeed")
    assert row(evaluate).eta is not None and row(evaluate).eta > row(train).eta  # a chain adds up
    until(dispatcher, sim, term, lambda: row(prep).state == State.SUCCEEDED, seconds=5)
    until(dispatcher, sim, term, lambda: row(train).state != State.QUEUED, seconds=1)
    assert row(evaluate).state == State.QUEUED
    until(dispatcher, sim, term, lambda: row(evaluate).state == State.SUCCEEDED, seconds=5)
    # Each started only after the one before it had succeeded.
    assert row(prep).finished_at <= row(train).released_at and row(train).finished_at <= row(evaluate).released_at

    # afterok on a job that fails: the dependent is cancelled, saying why (Slurm's DependencyNeverSatisfied)
    broken = submit(user, "broken", annotations={"kubesim.io/exit-code": "3"})
    after = submit(user, "after-broken", options={"after": "broken"})
    kept = submit(user, "kept", options={"after": "broken", "keep_if_never_satisfied": True})
    until(dispatcher, sim, term, lambda: row(after).state == State.CANCELLED, seconds=5)
    cancelled = row(after)
    assert cancelled.reason == "DependencyNeverSatisfied"
    assert cancelled.message.startswith(f"broken (#{broken.pk}) failed: it was to succeed")
    assert ("Cancelled", f"DependencyNeverSatisfied: {cancelled.message}") in timeline(after)
    dispatcher.cycle(term)
    assert (row(kept).state, row(kept).reason) == (State.QUEUED, "DependencyNeverSatisfied")


def test_an_array_of_20_never_runs_more_than_5(user, sim, dispatcher, term):
    workflow, jobs = workflows.array_submit(
        user=user, submission=services.Submission(batch("sweep", runs_s=10)), spec="0-19%5", source="api"
    )
    ids = [job.pk for job in jobs]
    most = 0
    for _ in range(120):
        dispatcher.cycle(term)
        admitted = Job.objects.filter(pk__in=ids, state__in=(State.RELEASED, State.RUNNING)).count()
        most = max(most, admitted)
        assert admitted <= 5
        if Job.objects.filter(pk__in=ids, state=State.SUCCEEDED).count() == 20:
            break
        step(dispatcher, sim, 2)
    assert most == 5  # (the nodes hold 16: the limit, not room, held the others)
    assert Job.objects.filter(pk__in=ids, state=State.SUCCEEDED).count() == 20
    assert workflow.concurrency == 5


def test_a_lost_node_costs_no_retry_and_a_bad_exit_code_is_not_retried(user, sim, dispatcher, term):
    lost = submit(user, "lost", runs_s=600)
    bad = submit(user, "bad", annotations={"kubesim.io/exit-code": "3"}, options={"retry": {"limit": 2}})
    until(dispatcher, sim, term, lambda: row(lost).state == State.RUNNING and row(bad).state == State.FAILED)
    failed = row(bad)
    assert failed.failure["cls"] == "ExitCode" and failed.failure["exit_code"] == 3
    assert failed.retries == 0
    assert "not retried: ExitCode is not in its retry-on (Evicted,NodeLost,Preempted)" in failed.message
    node = row(lost).placement[0][2]
    sim.cluster.fail_node(node)
    # Its one pod's template names the node: made again it would go there again, so the job
    # is taken back at once and queued in its old place, spending none of its retries.
    until(dispatcher, sim, term, lambda: row(lost).state != State.RUNNING, seconds=5, steps=10)
    requeued = row(lost)
    assert requeued.retries == 0 and requeued.failure is None
    assert any(node in text and "made for them" in text for _, text in timeline(lost)), timeline(lost)
    until(dispatcher, sim, term, lambda: row(lost).state == State.SUCCEEDED, seconds=60, steps=30)
    assert node not in {n for _, _, n in row(lost).placement}  # it ran again elsewhere
    assert row(lost).submitted_at == lost.submitted_at and row(lost).retries == 0  # in its old place


def test_deadlines_stop_a_long_run_and_cancel_a_late_start(user, sim, dispatcher, term):
    long = submit(user, "long", runs_s=3600, options={"max_run_seconds": 120})
    hog = submit(user, "hog", cpu="8", runs_s=3600)
    hog2 = submit(user, "hog2", cpu="8", runs_s=3600)
    start_by = (dispatcher.clock.now() + timedelta(minutes=1)).isoformat()
    late = submit(user, "late", cpu="8", options={"start_by": start_by})
    until(dispatcher, sim, term, lambda: row(long).state == State.RUNNING)
    until(dispatcher, sim, term, lambda: row(late).state == State.CANCELLED, seconds=10)
    assert row(late).reason == "StartDeadlinePassed"
    until(dispatcher, sim, term, lambda: row(long).state == State.FAILED, seconds=10)
    stopped = row(long)
    assert stopped.failure["cls"] == "DeadlineExceeded" and stopped.reason == "DeadlineExceeded"
    assert stopped.retries == 0
    assert sim.cluster.store.find(JOBS, "team-a", "long") is None or sim.cluster.store.find(JOBS, "team-a", "long")[
        "metadata"
    ].get("deletionTimestamp")
    assert {row(hog).state, row(hog2).state} <= {State.RUNNING, State.QUEUED, State.RELEASED}
