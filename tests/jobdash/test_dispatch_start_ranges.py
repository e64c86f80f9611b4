"""Start ranges end to end: run-time predictions learned from finished jobs, the range a
waiting job is shown, and whether its actual start falls in it. PostgreSQL, the real
gateway, kubesim over HTTP on a manual clock, and the dispatcher on its own manual clock
moved with kubesim's: the minutes a late bound takes to pass pass without sleeping."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.state.predictions import Learning, _Since
from jobdash.jobs import services
from jobdash.jobs.models import Job, State
from queueing import Workload

from .dispatch_support import ManualClock, advance, manifest, settings

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def dispatcher(gateway, clock):
    return Dispatcher(gateway, settings(backoff_s=0.0), clock=clock)


def submit(user, name, cpu: str, duration: int) -> Job:
    return services.job_submit(user=user, manifest=manifest(name, cpu=cpu, duration=duration), source="api")


def cycle_until(dispatcher, sim, term, done, steps=200, every=1.0) -> None:
    """Cycles, `every` seconds of both clocks apart, until `done()`."""
    for _ in range(steps):
        dispatcher.cycle(term)
        if done():
            return
        advance(sim, dispatcher.gateway, dispatcher.clock, every)
    raise AssertionError("never done")


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def learn_three_bert_runs(user, dispatcher, sim, term, seconds: int) -> None:
    runs = [submit(user, f"bert-large-run{i}", cpu="2", duration=seconds) for i in range(3)]
    cycle_until(dispatcher, sim, term, lambda: all(fresh(j).state == State.SUCCEEDED for j in runs))
    dispatcher.cycle(term)  # learns from them


def test_a_waiting_job_is_shown_a_range_that_contains_its_actual_start(user, sim, gateway, dispatcher, term):
    learn_three_bert_runs(user, dispatcher, sim, term, seconds=4)
    first = submit(user, "bert-large-run3", cpu="4", duration=4)
    waiting = submit(user, "bert-large-run4", cpu="4", duration=4)  # 4 + 4 > the quota's 6 CPU
    dispatcher.cycle(term)
    assert fresh(first).state == State.RELEASED
    shown = fresh(waiting)
    assert shown.state == State.QUEUED and shown.reason == "QuotaExceeded"
    # Its run time comes from this user's runs of this name, about their 4 s.
    assert shown.prediction_source == "user+name" and 3.0 <= shown.predicted_duration_s <= 6.0
    assert shown.predicted_p90_s >= shown.predicted_duration_s
    # Likely when the job ahead ends (it is predicted to run as long), and a later late bound.
    assert shown.eta is not None and shown.eta_late is not None and shown.eta_first_at is not None
    assert shown.eta_first_at <= shown.eta <= shown.eta_late
    assert 2.0 <= (shown.eta - shown.eta_first_at).total_seconds() <= 8.0
    assert (shown.eta_first, shown.eta_first_late) == (shown.eta, shown.eta_late)
    assert shown.eta_first_forecast is not None

    cycle_until(dispatcher, sim, term, lambda: fresh(waiting).state in (State.RUNNING, State.SUCCEEDED))
    started = fresh(waiting)
    assert started.eta_first_at <= started.started_at <= started.eta_first_late
    assert abs((started.started_at - started.eta_first).total_seconds()) <= 8.0
    assert started.eta_first == shown.eta_first  # the first range is kept after the start
    dispatcher.cycle(term)
    assert dispatcher.cache.learning.calibrator.observed == 1  # and its start was learned from
    # The range it was shown, resolved at its start (for the calibrator's next update): in its
    # namespace, started by its late bound.
    outcomes = list(dispatcher.cache.learning.forecasts.outcomes)
    assert [(namespace, late) for namespace, _, _, late in outcomes] == [(started.namespace.name, 0)]
    assert dispatcher.cache.learning.forecasts.jobs == {}  # (the forecast sampled while it waited)
    successor = Dispatcher(gateway, settings(backoff_s=0.0), clock=dispatcher.clock)
    successor.cycle(term)  # a new leader learns the same start from the first forecast on its row
    assert successor.cache.learning.calibrator.observed == 1


def test_a_job_past_its_late_bound_says_so_and_names_the_job_that_overran(user, sim, dispatcher, clock, term):
    learn_three_bert_runs(user, dispatcher, sim, term, seconds=2)
    overrun = submit(user, "bert-large-run3", cpu="4", duration=120)  # predicted about 2 s
    waiting = submit(user, "bert-large-run4", cpu="4", duration=2)
    dispatcher.cycle(term)
    late = fresh(waiting).eta_first_late
    assert late is not None
    # With no record of starts yet the late bound is the forecast wait x 4, at least a minute.
    cycle_until(dispatcher, sim, term, lambda: "Past its late bound" in fresh(waiting).message, every=5.0)
    message = fresh(waiting).message
    assert fresh(waiting).state == State.QUEUED and clock.now() > late
    assert f"job {overrun.pk} (bert-large-run3) has run" in message and "at most was expected" in message


def test_rows_sharing_a_timestamp_are_each_read_once():
    moment = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    later = datetime(2026, 11, 24, 12, 0, 1, tzinfo=UTC)
    since = _Since()
    assert since.new([(1, moment), (2, moment)]) == [1, 2]
    # The next read starts at the mark: the rows at it again, plus one more at it and a later one.
    assert since.new([(1, moment), (2, moment), (3, moment), (4, later)]) == [3, 4]
    assert since.new([(4, later)]) == []


def test_the_leader_learns_each_finished_and_started_job_once_with_one_read_of_each(user):
    learning = Learning()
    learning.refresh({})  # a new leader: nothing to learn from yet
    jobs = [submit(user, f"run{i}", cpu="1", duration=5) for i in range(2)]
    started = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    finished = datetime(2026, 11, 24, 12, 5, tzinfo=UTC)
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(
        state=State.SUCCEEDED, started_at=started, finished_at=finished
    )
    workloads = {j.pk: Workload.from_json(j.workload) for j in jobs}  # the active jobs' parsed workloads
    observed = []
    learn = learning.predictor.observe
    learning.predictor.observe = lambda features, seconds, said=None: (
        observed.append(seconds),
        learn(features, seconds, said),
    )
    with CaptureQueriesContext(connection) as queries:
        learning.refresh(workloads)
    assert observed == [300.0, 300.0]
    assert len([q for q in queries if q["sql"].startswith("SELECT")]) == 2  # finished, started: rows and all
    learning.refresh(workloads)  # the rows at the mark are read again, not learned again
    assert observed == [300.0, 300.0]
