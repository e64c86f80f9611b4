"""The leader's writes that no job waits for (QueuedJob objects, Events) share a token
bucket: a burst of submissions is mirrored at the budget's pace, admission does not wait."""

from datetime import UTC, datetime, timedelta

import pytest

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.state.write_budget import WriteBudget
from jobdash.jobs import services
from jobdash.jobs.models import QueuedMirror

from .dispatch_support import ManualClock, manifest, settings

T0 = datetime(2026, 11, 27, tzinfo=UTC)


def test_the_bucket_starts_full_refills_at_its_rate_and_never_beyond_its_burst():
    budget = WriteBudget(per_second=10, burst=20)
    assert budget.refill(T0) == 20
    budget.spend(18)
    assert budget.refill(T0) == 2
    assert budget.refill(T0 + timedelta(seconds=0.5)) == 7
    assert budget.refill(T0 + timedelta(seconds=60)) == 20
    assert budget.refill(T0) == 20  # a clock that goes back adds nothing
    budget.spend(50)
    assert budget.refill(T0 + timedelta(seconds=60)) == 0


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_waiting_jobs_is_mirrored_at_the_budgets_pace(user, sim, gateway, term):
    services.job_submit(user=user, manifest=manifest("runs", cpu="4", duration=600), source="api")
    for i in range(30):
        services.job_submit(user=user, manifest=manifest(f"w-{i:02d}", cpu="4"), source="api")
    clock = ManualClock()
    dispatcher = Dispatcher(gateway, settings(publish_qps=5.0, publish_burst=10), clock=clock)
    first = dispatcher.cycle(term)
    assert first.admitted == 1  # admission does not wait for the mirror
    assert first.mirrored == {"created": 10, "deferred": 20} and QueuedMirror.objects.count() == 10
    assert dispatcher.cycle(term).mirrored == {}  # nothing left in the bucket: not even a read
    for _ in range(20):
        clock.advance(1.0)
        dispatcher.cycle(term)
    assert QueuedMirror.objects.count() == 30  # 5 a second caught up within 20 s
