"""A running job's checkpoints read from its own object (issue 48), through kubesim over HTTP
and the real gateway: kubesim's training operator writes jobdash.io/checkpointed-at at each
checkpoint, the tracker records it once (again and again read, or read by a new leader), and
a bad or future time is ignored with a warning, never a failed pass."""

import logging
import time
from datetime import UTC, datetime

import pytest
from kubernetes import client

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.phases import checkpoint_reports
from jobdash.jobs import services
from jobdash.jobs.models import Job, JobEvent, State
from kubesim.clock import rfc3339
from kubesim.testing import running_kubesim

from .dispatch_support import JOBDASH, advance, cluster_config, manifest, run_until, settings, tf
from .dispatch_support import eventually as wait_for

pytestmark = pytest.mark.django_db
KEY = tf("team-a", "ckpt")


@pytest.fixture
def sim():
    """The cluster's clock starts at the dispatcher's (the wall clock's) time: a checkpoint
    time kubesim writes falls within the run the dispatcher saw start, as in a real cluster."""
    with running_kubesim(cluster_config(start_time=time.time()), manual_clock=True) as sim:
        yield sim


def annotation(gateway) -> str:
    found = gateway.job_object(KEY)
    return "" if found is None else found.checkpointed_at


def recorded(job: Job) -> tuple[int, datetime | None]:
    row = Job.objects.get(pk=job.pk)
    return row.checkpoints, row.last_checkpoint_at


def annotate(sim, value: str) -> None:
    """What a job's own code would do: annotate its TFJob."""
    api_client = sim.api_client(JOBDASH)
    try:
        body = {"metadata": {"annotations": {"jobdash.io/checkpointed-at": value}}}
        client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
            "kubeflow.org", "v1", "team-a", "tfjobs", "ckpt", body
        )
    finally:
        api_client.close()


def test_kubesim_s_checkpoints_are_recorded_once_each(user, sim, gateway, term, caplog):
    job = services.job_submit(user=user, manifest=manifest("ckpt", duration=600, checkpoint=60), source="api")
    dispatcher = Dispatcher(gateway, settings())
    run_until(dispatcher, sim, gateway, job, State.RUNNING)
    started = sim.cluster.work.progress(("tfjobs", "team-a", "ckpt"))[1]
    assert started is not None and recorded(job) == (0, None)
    advance(sim, gateway, None, started + 60 - sim.clock.now())
    wait_for(lambda: annotation(gateway) == rfc3339(started + 60), timeout=5, message="the watch never saw it")
    dispatcher.cycle(term)
    first = datetime.fromtimestamp(int(started + 60), UTC)
    assert recorded(job) == (1, first)
    dispatcher.track(term)  # read again: nothing new
    checkpoint_reports.forget(())  # a new leader remembers nothing: the database says it is not newer
    dispatcher.track(term)
    assert recorded(job) == (1, first)
    events = JobEvent.objects.filter(job=job, type="Checkpointed")
    assert [(e.actor, e.message) for e in events] == [
        ("cluster", f"checkpoint at {rfc3339(started + 60)}, from its TFJob's jobdash.io/checkpointed-at annotation")
    ]

    # Not a time, or one in the future: ignored with a warning (once), nothing recorded.
    for bad in ("soon", "2999-01-01T00:00:00Z"):
        annotate(sim, bad)
        wait_for(lambda bad=bad: annotation(gateway) == bad, timeout=5, message="the watch never saw it")
        with caplog.at_level(logging.WARNING, logger="jobdash.dispatch.phases.checkpoint_reports"):
            caplog.clear()
            dispatcher.track(term)
            dispatcher.track(term)
        warnings = [r.getMessage() for r in caplog.records if "jobdash.io/checkpointed-at" in r.getMessage()]
        assert len(warnings) == 1 and "is ignored" in warnings[0], warnings
        assert recorded(job) == (1, first)

    # The next checkpoint kubesim writes counts again.
    advance(sim, gateway, None, started + 120 - sim.clock.now())
    wait_for(lambda: annotation(gateway) == rfc3339(started + 120), timeout=5, message="the watch never saw it")
    dispatcher.track(term)
    assert recorded(job) == (2, datetime.fromtimestamp(int(started + 120), UTC))
    assert Job.objects.get(pk=job.pk).state == State.RUNNING
