# ruff: noqa: F811  (the fixtures of test_webhook_e2e, imported for pytest, are the arguments)
"""The queue as cluster objects in both webhook modes: a job queued by the webhook has its
QueuedJob, deleting it cancels the job, and its Queued Event is on its own object where
the cluster holds one (suspend) or on its QueuedJob (deny: the create was refused)."""

import time

import pytest
from kubernetes import client

from jobdash.jobs.models import Job, State
from kubesim.resources import EVENTS, QUEUEDJOBS

from .conftest import KATIB, trial_tfjob
from .test_webhook_e2e import create, dispatcher, gateway, job, katib, refused, sim, team_a  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def queued_names(sim) -> set[str]:
    return {obj["metadata"]["name"] for obj in sim.cluster.store.items(QUEUEDJOBS, "team-a")}


def queued_event(sim, name: str) -> dict:
    (event,) = [e for e in sim.cluster.store.items(EVENTS, "team-a") if e["metadata"]["name"].startswith(f"{name}.")]
    return event


def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)


def leave(sim, gateway, loop, name: str) -> Job:
    """The job's QueuedJob deleted by its creator with the official client, then a cycle."""
    api = client.CustomObjectsApi(sim.api_client(KATIB))
    api.delete_namespaced_custom_object("jobdash.io", "v1alpha1", "team-a", "queuedjobs", name)
    wait_for(lambda: name not in {o.name for o in gateway.queued_objects() or []})
    loop.cycle(1)
    return Job.objects.get(name=name)


def test_deny_mode_a_refused_trial_is_a_queued_job_object_and_leaves_with_it(settings, sim, gateway, katib):
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    refused(katib, trial_tfjob("trial-1"))
    refused(katib, trial_tfjob("trial-2"))  # 2 + 2 CPUs of 3: it waits
    loop = dispatcher(gateway, "create")
    loop.cycle(1)
    assert (job("trial-1").state, job("trial-2").state) == (State.RELEASED, State.QUEUED)
    assert queued_names(sim) == {"trial-2"}
    assert sim.cluster.tfjob("team-a", "trial-2") is None  # only its QueuedJob stands for it
    about = queued_event(sim, "trial-2")["involvedObject"]
    assert (about["kind"], about["name"]) == ("QueuedJob", "trial-2")

    cancelled = leave(sim, gateway, loop, "trial-2")
    assert cancelled.state == State.CANCELLED and "deleted from the cluster" in cancelled.message


def test_suspend_mode_a_held_trial_has_its_queued_job_object_too(settings, sim, gateway, katib):
    settings.JOBDASH_WEBHOOK_MODE = "suspend"
    settings.JOBDASH_RELEASE_MODE = "unsuspend"
    for name in ("trial-1", "trial-2"):
        create(katib, trial_tfjob(name))
    wait_for(lambda: len(gateway.job_objects()) == 2)
    loop = dispatcher(gateway, "unsuspend")
    loop.cycle(1)
    assert (job("trial-1").state, job("trial-2").state) == (State.RELEASED, State.QUEUED)
    assert queued_names(sim) == {"trial-2"}
    held = sim.cluster.tfjob("team-a", "trial-2")
    about = queued_event(sim, "trial-2")["involvedObject"]
    assert (about["kind"], about["name"], about["uid"]) == ("TFJob", "trial-2", held["metadata"]["uid"])

    cancelled = leave(sim, gateway, loop, "trial-2")
    assert cancelled.state == State.CANCELLED and "deleted from the cluster" in cancelled.message
