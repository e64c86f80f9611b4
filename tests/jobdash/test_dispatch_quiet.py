"""Cycles that cost what changed (quiet.py): over a world where nothing moved a cycle plans
nothing and reads almost nothing; any change of the queue, the namespaces, the cluster or a
moment the clock crosses makes the next cycle a full one again."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from kubernetes import client as k8s

from jobdash.cluster.kube import api_client
from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State
from tests.waiting import wait_until

from .dispatch_support import ManualClock, advance, manifest, settings, state

pytestmark = pytest.mark.django_db(transaction=True)  # (the horizon moves only between transactions)


def submit(user, name, **kwargs) -> Job:
    return services.job_submit(user=user, manifest=manifest(name, **kwargs), source="api")


def settle(dispatcher, sim, gateway, clock, term, cycles: int = 12) -> list[dict]:
    """Cycles a second apart; the phases of each."""
    phases = []
    for _ in range(cycles):
        phases.append(dispatcher.cycle(term).phases)
        advance(sim, gateway, clock, 1.0)
    return phases


@pytest.fixture
def world(user, sim, gateway, term):
    """team-a's quota (6 CPUs) full with a running job of 6, one of 1 waiting behind it."""
    clock = ManualClock()
    dispatcher = Dispatcher(gateway, settings(), clock=clock)
    running = submit(user, "big", cpu="6", duration=3600)
    waiting = submit(user, "small", cpu="1", duration=60)
    phases = settle(dispatcher, sim, gateway, clock, term)
    assert (state(running), state(waiting)) == (State.RUNNING, State.QUEUED)
    assert "quiet" in phases[-1] and "plan" not in phases[-1]
    return dispatcher, clock, running, waiting


def test_a_quiet_cycle_plans_nothing_and_reads_four_statements(world, term):
    dispatcher, *_ = world
    with CaptureQueriesContext(connection) as queries:
        result = dispatcher.cycle(term)
    assert "quiet" in result.phases and "snapshot" not in result.phases
    assert result.pending == 1  # what the last full cycle saw
    # the cluster's revision is memory; the namespaces' versions, the job rows written since
    # the horizon, and the Cycle row: no read of the queue, the active jobs or the pods
    assert len(queries) <= 4, [q["sql"][:80] for q in queries]


def test_a_submission_makes_the_next_cycle_plan(world, user, term):
    dispatcher, *_ = world
    other = submit(user, "elsewhere", cpu="1", namespace="team-b")
    result = dispatcher.cycle(term)
    assert "plan" in result.phases and result.admitted == 1
    assert state(other) == State.RELEASED


def test_a_quota_raised_in_the_cluster_admits_the_waiting_job(world, sim, gateway, term):
    dispatcher, clock, _running, waiting = world
    core = k8s.CoreV1Api(api_client("kubeconfig", sim.kubeconfig_path))
    core.patch_namespaced_resource_quota("quota", "team-a", {"spec": {"hard": {"requests.cpu": "7"}}})
    # (the watch delivers it in its own time: under a loaded machine, later than 3 cycles)
    assert wait_until(lambda: any(q.hard.get("requests.cpu") == 7000 for q in gateway.quotas()), 10)
    settle(dispatcher, sim, gateway, clock, term, cycles=3)
    assert state(waiting) in (State.RELEASED, State.RUNNING)


def test_a_namespace_edited_in_the_database_is_planned_again(world, term):
    dispatcher, *_ = world
    Namespace.objects.filter(name="team-a").update(weight=3)
    assert "plan" in dispatcher.cycle(term).phases
    assert "quiet" in dispatcher.cycle(term).phases  # and quiet again once seen


def test_a_backoff_that_ends_is_a_moment_the_clock_crosses(user, sim, gateway, term):
    clock = ManualClock()
    dispatcher = Dispatcher(gateway, settings(), clock=clock)
    job = submit(user, "later", cpu="1", duration=60)
    Job.objects.filter(pk=job.pk).update(backoff_until=clock.now() + timedelta(seconds=8))
    phases = settle(dispatcher, sim, gateway, clock, term, cycles=4)
    assert state(job) == State.QUEUED and "quiet" in phases[-1]
    settle(dispatcher, sim, gateway, clock, term, cycles=6)  # past the backoff: planned, released
    assert state(job) in (State.RELEASED, State.RUNNING)


def test_a_long_quiet_world_is_planned_again_every_replan_interval(world, sim, gateway, term):
    dispatcher, clock, *_ = world
    clock.advance(121)  # quiet.REPLAN_EVERY_S
    assert "plan" in dispatcher.cycle(term).phases


def test_a_cycle_that_fails_half_way_leaves_the_next_one_to_plan(world, user, sim, term, monkeypatch):
    """A running job is cancelled; the cycle that read it (its horizon moved past the row)
    fails before the tracker deletes the object: the next must not take the world for quiet."""
    dispatcher, _clock, running, _waiting = world
    services.job_cancel(job_id=running.pk, user=user)

    def broken(*_args, **_kwargs):
        raise OSError("the database went away")

    monkeypatch.setattr("jobdash.dispatch.phases.statuses.write_statuses", broken)
    with pytest.raises(OSError):
        dispatcher.cycle(term)
    monkeypatch.undo()
    assert "plan" in dispatcher.cycle(term).phases
    tfjob = sim.cluster.tfjob("team-a", "big")  # the tracker deleted the cancelled job's object
    assert tfjob is None or tfjob["metadata"].get("deletionTimestamp")
