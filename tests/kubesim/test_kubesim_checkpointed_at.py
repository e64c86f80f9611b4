"""A job that sets ``kubesim.io/checkpoint-seconds`` says, as a real training job would, when
it passes each checkpoint of a run: its own object's annotation ``jobdash.io/checkpointed-at``
is the checkpoint's simulated time (read here through the official client)."""

import pytest

from kubesim.clock import rfc3339
from tests.kubesim.test_kubesim_suspend_resume import KINDS, NS, TFJOB, Driver

CHECKPOINTED_AT = "jobdash.io/checkpointed-at"


def checkpointed_at(custom, job: Driver) -> str | None:
    kind = job.kind
    obj = custom.get_namespaced_custom_object(kind.group, kind.version, NS, kind.plural, job.name)
    return (obj["metadata"].get("annotations") or {}).get(CHECKPOINTED_AT)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_each_checkpoint_passed_is_written_on_the_job_s_own_object(sim, custom, kind):
    job = Driver(sim, custom, kind)
    job.create(duration=3600, checkpoint=600)
    started = job.wait_running()
    job.advance_to(started + 599)
    assert checkpointed_at(custom, job) is None  # no checkpoint yet
    sim.advance(1)
    assert checkpointed_at(custom, job) == rfc3339(started + 600)
    job.advance_to(started + 1850)  # past two more: the last one is what the object says
    assert checkpointed_at(custom, job) == rfc3339(started + 1800)
    assert not job.done()


def test_a_resumed_run_counts_its_checkpoints_from_its_own_start(sim, custom):
    job = Driver(sim, custom, TFJOB)
    job.create(duration=3600, checkpoint=600)
    started = job.wait_running()
    job.advance_to(started + 1000)
    job.set_suspend(True)
    assert checkpointed_at(custom, job) == rfc3339(started + 600)
    sim.advance(900)  # suspended: no run, no checkpoint
    assert checkpointed_at(custom, job) == rfc3339(started + 600)
    job.set_suspend(False)
    restarted = job.wait_running()
    job.advance_to(restarted + 599)
    assert checkpointed_at(custom, job) == rfc3339(started + 600)
    sim.advance(1)
    assert checkpointed_at(custom, job) == rfc3339(restarted + 600)


def test_the_end_of_the_work_is_no_checkpoint(sim, custom):
    job = Driver(sim, custom, TFJOB)
    job.create(duration=1200, checkpoint=600)
    started = job.wait_running()
    job.advance_to(started + 1200)
    assert job.done()
    assert checkpointed_at(custom, job) == rfc3339(started + 600)


def test_a_job_that_does_not_say_it_checkpoints_writes_nothing(sim, custom):
    job = Driver(sim, custom, TFJOB)
    job.create(duration=5000)  # kubesim keeps its work every 1800 s all the same
    started = job.wait_running()
    job.advance_to(started + 4000)
    assert checkpointed_at(custom, job) is None
    job.set_suspend(True)
    assert job.progress() == (3600.0, None)
