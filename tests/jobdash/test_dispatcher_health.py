"""Issue 45, item 3: a failing dispatcher is visible. What the dispatcher records when a cycle
fails (dispatch/failures.py), what jobs.dispatcher_health decides from it, and the log:
one traceback per distinct error, its repeats counted. The live version (a real loop with a
phase broken, the banner, /readyz, `jobdash status`, /metrics) is tests/client/test_cli_status.py."""

import logging
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import OperationalError
from django.utils import timezone

from jobdash.dispatch import tasks
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.failures import CycleFailed, FailureWatch
from jobdash.dispatch.phases import snapshot_phase
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.dispatcher_health import NOT_CYCLING, dispatcher_health, stall_after_s, waiting_reason
from jobdash.jobs.models import Cycle, CycleFailures

from .dispatch_support import ManualClock, manifest, settings

pytestmark = pytest.mark.django_db


def completed_cycle(at, term=1) -> None:
    """The row a completed cycle leaves (Dispatcher._record)."""
    Cycle.objects.create(
        started_at=at, duration_ms=5.0, term=term, policy="priority", pending=0, admitted=0, released=0
    )


def fail(watch: FailureWatch, error: Exception, term: int = 1) -> None:
    with pytest.raises(CycleFailed):
        with watch.watch(term):
            raise error


def test_failures_in_a_row_make_the_dispatcher_failing_until_a_cycle_completes():
    transitions.take_term(1, "host:1")
    completed_cycle(timezone.now())
    watch = FailureWatch(ManualClock())
    broken = OperationalError('unrecognized token ":"')
    fail(watch, broken)
    fail(watch, broken)
    # Two failures between completed cycles are no outage yet (not stalled either).
    assert dispatcher_health(reveal=True).healthy
    watch.clock.advance(1)
    fail(watch, broken)
    health = dispatcher_health(reveal=True)
    assert (health.healthy, health.cause, health.failures) == (False, "failing", 3)
    assert health.message.startswith("Jobs are not being released: the dispatcher's last 3 cycles failed, since ")
    assert health.message.endswith(" UTC") and health.error == 'OperationalError: unrecognized token ":"'
    assert dispatcher_health(reveal=False).error is None  # the error's text is staff's
    # A waiting job says so, keeping what its last plan said.
    reason, message = waiting_reason("QuotaExceeded", "needs 4 CPUs", health)
    assert reason == NOT_CYCLING and message == f"{health.message}. Last planned: QuotaExceeded (needs 4 CPUs)."
    # A completed cycle ends the run; the next failure starts a new one, the total goes on.
    completed_cycle(watch.clock.now() + timedelta(seconds=1))
    assert dispatcher_health(reveal=True).healthy
    watch.clock.advance(2)
    fail(watch, broken)
    row = CycleFailures.objects.get()
    assert (row.streak, row.since, row.total) == (1, watch.clock.now(), 4)
    assert dispatcher_health(reveal=True).failures == 1


def test_no_leader_and_a_stalled_leader_are_not_releasing_jobs():
    health = dispatcher_health(reveal=False)
    assert (health.healthy, health.cause) == (False, "no_leader")
    assert waiting_reason("", "", health) == (NOT_CYCLING, f"{health.message}.")
    transitions.take_term(1, "host:1")
    assert dispatcher_health(reveal=False).healthy  # just elected: its first cycle is due
    later = timezone.now() + timedelta(seconds=stall_after_s() + 1)
    stalled = dispatcher_health(reveal=False, now=later)
    assert stalled.cause == "stalled" and "has completed no cycle since it took the lead at" in stalled.message
    completed_cycle(timezone.now())
    assert dispatcher_health(reveal=False, now=later - timedelta(seconds=2)).healthy
    stalled = dispatcher_health(reveal=False, now=later + timedelta(seconds=1))
    assert stalled.cause == "stalled" and "has completed no cycle since" in stalled.message
    assert stalled.leader == {
        "backend": django_settings.JOBDASH_LEADER,
        "identity": None,
        "term": 1,
        "since": stalled.leader["since"],
    }
    assert dispatcher_health(reveal=True).leader["identity"] == "host:1"


def test_each_distinct_error_is_traced_once_its_repeats_counted(caplog):
    transitions.take_term(1, "host:1")
    watch = FailureWatch(ManualClock())
    caplog.set_level(logging.INFO, logger="jobdash.dispatch.failures")
    broken, other = OperationalError('unrecognized token ":"'), KeyError("phase")
    for error in (broken, broken, broken, other, broken):
        fail(watch, error)
    lines = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert [traced for _, traced in lines] == [True, False, False, True, False]
    assert lines[0][0].startswith('cycle failed: OperationalError: unrecognized token ":"')
    assert lines[2][0].startswith("cycle failed again (x3 since ") and lines[2][0].endswith(
        'OperationalError: unrecognized token ":"'
    )
    assert lines[3][0].startswith("cycle failed: KeyError: 'phase'")
    assert "(x4 since " in lines[4][0]
    caplog.clear()
    with watch.watch(1):
        pass
    assert [r.getMessage().split(" since ")[0] for r in caplog.records] == ["cycle completed after 5 failed cycles"]
    caplog.clear()
    fail(watch, broken)  # a new run of failures: traced again
    assert [r.exc_info is not None for r in caplog.records] == [True]


def test_a_refused_term_is_a_step_down_not_a_failure():
    watch = FailureWatch(ManualClock())
    with pytest.raises(transitions.StaleTerm):
        with watch.watch(1):
            raise transitions.StaleTerm("term 1 is older than the recorded term 2")
    assert not CycleFailures.objects.exists()


def test_the_celery_task_records_a_failed_cycle_and_answers_instead_of_raising(user, gateway, term, monkeypatch):
    """Celery logged a raising task's traceback every tick: the task answers with the error."""

    def broken(*args, **kwargs):
        raise OperationalError('unrecognized token ":"')

    monkeypatch.setattr(tasks, "_dispatcher", Dispatcher(gateway, settings()))  # the worker's, made once
    mended = snapshot_phase.build
    monkeypatch.setattr(snapshot_phase, "build", broken)  # the phase a cycle plans from, broken on purpose
    services.job_submit(user=user, manifest=manifest("waiting"), source="api")
    assert tasks.admission_cycle.run(term) == {"failed": 'OperationalError: unrecognized token ":"'}
    assert tasks.admission_cycle.run(term) == {"failed": 'OperationalError: unrecognized token ":"'}
    assert (CycleFailures.objects.get().streak, CycleFailures.objects.get().term) == (2, term)
    monkeypatch.setattr(snapshot_phase, "build", mended)
    assert "failed" not in tasks.admission_cycle.run(term)
    assert dispatcher_health(reveal=True).healthy
