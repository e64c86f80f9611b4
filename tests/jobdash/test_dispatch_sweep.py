"""The tracker's sweep for objects of cancelled jobs looks at what changed since its last
pass (tracker.Sweep), not at every object the cluster keeps, and still misses none."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobdash.cluster import informer
from jobdash.cluster.gateway import JOB_ID_LABEL
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.phases import tracker
from jobdash.jobs import services
from jobdash.jobs.models import State

from .dispatch_support import eventually, manifest, run_until, settings, tf

pytestmark = pytest.mark.django_db

SETTINGS = tracker.TrackerSettings(release_mode="create", start_timeout_s=600, max_attempts=3, backoff_s=1)


def submit(user, name):
    return services.job_submit(user=user, manifest=manifest(name), source="api")


def labelled_object(sim, gateway, name: str, job_id: int) -> None:
    """A TFJob carrying a job's id, as a release makes it."""
    sim.cluster.create_tfjob(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": name, "namespace": "team-a", "labels": {JOB_ID_LABEL: str(job_id)}},
            "spec": {
                "runPolicy": {"suspend": True},
                "tfReplicaSpecs": {
                    "Worker": {
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}},
                    }
                },
            },
        }
    )
    eventually(lambda: gateway.job_object(tf("team-a", name)) is not None, message="the watch cache never saw it")


@pytest.mark.parametrize("journal_limit", [informer.JOURNAL_LIMIT, 0], ids=["journal", "journal-overflowed"])
def test_an_object_that_appears_after_its_job_was_cancelled_is_deleted(
    user, sim, gateway, term, monkeypatch, journal_limit
):
    """Seen through the watch cache's journal; or, when the journal overflowed (a standby
    that nobody drained), by a pass over every live object."""
    monkeypatch.setattr(informer, "JOURNAL_LIMIT", journal_limit)
    job = submit(user, "late")
    sweep = tracker.Sweep()
    tracker.track(gateway, SETTINGS, sweep, term=term)  # the first pass looks at every object
    services.job_cancel(job_id=job.pk, user=user)
    labelled_object(sim, gateway, "late", job.pk)  # a release that was under way
    assert tracker.track(gateway, SETTINGS, sweep, term=term)["cleaned"] == 1
    eventually(lambda: sim.cluster.tfjob("team-a", "late") is None, message="the object of a cancelled job kept")


def test_an_unchanged_object_is_deleted_when_its_queued_job_is_cancelled(user, sim, gateway, term):
    """A requeued job keeps its suspended object in unsuspend mode: cancelling the job
    changes the database only, and the sweep still sees it."""
    job = submit(user, "parked")
    labelled_object(sim, gateway, "parked", job.pk)
    sweep = tracker.Sweep()
    tracker.track(gateway, SETTINGS, sweep, term=term)
    assert sweep.watch == {job.pk}
    assert tracker.track(gateway, SETTINGS, sweep, term=term)["cleaned"] == 0
    services.job_cancel(job_id=job.pk, user=user)
    assert tracker.track(gateway, SETTINGS, sweep, term=term)["cleaned"] == 1
    eventually(lambda: sim.cluster.tfjob("team-a", "parked") is None, message="the object of a cancelled job kept")


def test_the_objects_of_finished_jobs_are_not_asked_about_again(user, sim, gateway, term):
    job = submit(user, "done")
    dispatcher = Dispatcher(gateway, settings())
    run_until(dispatcher, sim, gateway, job, State.SUCCEEDED)
    dispatcher.track(term)  # the job has left the active ones: its object is looked at once more
    assert job.pk in dispatcher.sweep.settled and not dispatcher.sweep.watch
    dispatcher.sweep.full_at = float("-inf")  # even a pass over every live object
    with CaptureQueriesContext(connection) as queries:
        dispatcher.track(term)
    assert not [q["sql"] for q in queries if "Cancelled" in q["sql"]]
    assert job.pk in dispatcher.sweep.settled  # its object is still there
