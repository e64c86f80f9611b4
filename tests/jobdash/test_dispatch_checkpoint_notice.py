"""Issue 48 end to end (PostgreSQL, the real gateway, kubesim over HTTP): a victim that
checkpoints on notice leaves as soon as it has written its checkpoint, not at the end of the
grace period; its preemptor starts then, and it resumes from that checkpoint."""

import pytest

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, LostWork, State

from .dispatch_support import ManualClock, settings
from .test_dispatch_preemption import refreshed, step, tfjob, until, world  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db

GRACE_S = 300.0  # the cluster's grace period: long, so that leaving early shows


def test_a_victim_leaves_within_a_cycle_of_its_checkpoint_and_resumes_from_it(world):  # noqa: F811
    sim, gateway, user = world
    dispatcher = Dispatcher(gateway, settings(preemption_grace_s=GRACE_S), clock=ManualClock())
    text = tfjob("big", "team-a", workers=2, cpu="3", duration=100, checkpoint=20)
    text = text.replace(
        'kubesim.io/checkpoint-seconds: "20"',
        'kubesim.io/checkpoint-seconds: "20"\n    jobdash.io/checkpoint-on-notice: "60s"',
    )
    borrower = services.job_submit(user=user, manifest=text, source="api")
    assert borrower.checkpoint_on_notice_s == 60.0
    until(dispatcher, sim, gateway, borrower, State.RUNNING)
    uid = borrower.object_uid
    for _ in range(5):  # 50 s of work: checkpoints at 20 and 40, reported on its object
        step(dispatcher, sim, gateway, 10.0)
    assert refreshed(borrower).checkpoints >= 2 and borrower.last_checkpoint_at is not None

    owner = services.job_submit(
        user=user, manifest=tfjob("fair", "team-b", workers=1, cpu="4", duration=10), source="api"
    )
    dispatcher.cycle(1)
    borrower.refresh_from_db()
    assert borrower.preempted_for_id == owner.pk
    told = borrower.preempt_at
    # Its own notice, 60 s, not the grace period's 300 s.
    assert 55 <= (told - dispatcher.clock.now()).total_seconds() <= 61
    preempting = borrower.events.get(type="Preempting").message
    assert preempting.endswith("it loses no work (it checkpoints on notice)")

    # Its next checkpoint (60 s of work) comes 10 s later; a cycle after it, it is gone.
    cycles = 0
    while refreshed(borrower).state == State.RUNNING:
        cycles += 1
        assert cycles <= 14, (borrower.reason, borrower.message)
        step(dispatcher, sim, gateway, 1.0)
    assert borrower.state == State.QUEUED and borrower.reason == "Preempted"
    assert borrower.events.filter(type="NoticeEnded").exists()
    (lost,) = LostWork.objects.filter(job_id=borrower.pk)  # it wrote its checkpoint on notice: nothing lost
    assert (lost.cause, lost.seconds, lost.gpu_s) == ("preemption", 0, 0)
    assert "no work lost (it checkpointed on notice)" in borrower.events.get(type="Preempted").message
    assert borrower.events.filter(type="Checkpointed").count() >= 3
    until(dispatcher, sim, gateway, owner, State.RUNNING, steps=5)
    assert refreshed(owner).started_at < told  # it did not wait for the notice to end

    until(dispatcher, sim, gateway, owner, State.SUCCEEDED, seconds=2.0)
    until(dispatcher, sim, gateway, borrower, State.RUNNING)
    assert sim.cluster.tfjob("team-a", "big")["metadata"]["uid"] == uid
    # 40 s of work left (100 - the 60 kept): not done after 30 s, done after 50.
    for _ in range(3):
        step(dispatcher, sim, gateway, 10.0)
    assert refreshed(borrower).state == State.RUNNING
    until(dispatcher, sim, gateway, borrower, State.SUCCEEDED, steps=30, seconds=1.0)
    assert Job.objects.get(pk=borrower.pk).preemptions == 1
