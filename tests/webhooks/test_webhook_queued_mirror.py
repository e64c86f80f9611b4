# ruff: noqa: F811  (the fixtures of test_webhook_e2e, imported for pytest, are the arguments)
"""The queue as cluster objects in both webhook modes: a job queued by the webhook has its
QueuedJob, deleting it cancels the job, and its Queued Event is on its own object where
the cluster holds one (suspend) or on its QueuedJob (deny: the create was refused). With
the QueuedJob DELETE webhook registered, the cancel names who deleted it."""

import json
import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobdash.cluster.kube import KubeGateway, api_client
from jobdash.jobs.models import Job, State
from kubesim.resources import EVENTS, QUEUEDJOBS
from kubesim.testing import running_kubesim
from webhooks import registration

from .conftest import ALICE, JOBDASH, KATIB, trial_tfjob
from .test_webhook_e2e import cluster_config, create, dispatcher, gateway, job, katib, refused, sim, team_a  # noqa: F401

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
    # Events go out within the leader's write budget (a share of its time): on a loaded
    # machine the first cycle may leave them to the next.
    for _ in range(5):
        if [e for e in sim.cluster.store.items(EVENTS, "team-a") if e["metadata"]["name"].startswith("trial-2.")]:
            break
        loop.cycle(1)
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


@pytest.fixture
def sim_with_delete_hook(webhook_listener, webhook_pki, team_a):
    config = cluster_config(webhook_listener, webhook_pki)
    config["objects"] = [
        *config["objects"],
        registration.queued_deletes_configuration(webhook_pki.serving_ca.read_bytes()),
    ]
    with running_kubesim(config, manual_clock=True) as sim:
        yield sim
        assert sim.server.errors == []


def test_with_the_delete_webhook_the_cancel_names_who_left_the_queue(settings, sim_with_delete_hook, katib):
    sim = sim_with_delete_hook
    katib = client.CustomObjectsApi(sim.api_client(KATIB))
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    refused(katib, trial_tfjob("trial-1"))
    refused(katib, trial_tfjob("trial-2"))
    gateway = KubeGateway(api_client("kubeconfig", sim.kubeconfig_path), retries=1, backoff=0.01)
    gateway.start(timeout=10)
    try:
        loop = dispatcher(gateway, "create")
        loop.cycle(1)
        assert queued_names(sim) == {"trial-2"}
        # Alice did not queue it and has no admin role in team-a: refused, saying why.
        alice = client.CustomObjectsApi(sim.api_client(ALICE))
        with pytest.raises(ApiException) as refused_delete:
            alice.delete_namespaced_custom_object("jobdash.io", "v1alpha1", "team-a", "queuedjobs", "trial-2")
        said = json.loads(refused_delete.value.body)["message"]
        assert refused_delete.value.status == 403 and f"(submitted by {KATIB}, not you) needs the admin role" in said
        assert Job.objects.get(name="trial-2").state == State.QUEUED
        # Katib, who queued it, may.
        katib.delete_namespaced_custom_object("jobdash.io", "v1alpha1", "team-a", "queuedjobs", "trial-2")
        cancelled = Job.objects.get(name="trial-2")  # at once, by the webhook
        assert cancelled.state == State.CANCELLED
        assert cancelled.message == f"its QueuedJob team-a/trial-2 was deleted by {KATIB}: it left the queue"
        assert cancelled.events.get(type="Cancelled").actor == KATIB
        wait_for(lambda: "trial-2" not in {o.name for o in gateway.queued_objects() or []})
        result = loop.cycle(1)
        assert "cancelled" not in result.mirrored
        hooks = [c for c in sim.cluster.admission.calls if c["webhook"] == "queuedjobs.jobdash.io"]
        assert [(c["user"], c["operation"], c["allowed"]) for c in hooks] == [
            (ALICE, "DELETE", False),
            (KATIB, "DELETE", True),
        ]
    finally:
        gateway.stop()


def test_jobdash_s_own_deletes_and_dry_runs_cancel_nothing(webhook, settings):
    """Reviews posted as the API server would (Django's test client): jobdash deletes a
    second QueuedJob of a waiting job; a dry run deletes nothing; its submitter's delete
    cancels it."""
    from django.contrib.auth.models import User

    from jobdash.jobs import services
    from jobdash.jobs.models import Namespace
    from tests.jobdash.dispatch_support import manifest

    user = User.objects.create_user("ana")
    Namespace.objects.create(name="team-a").members.add(user)
    waiting = services.job_submit(user=user, manifest=manifest("waits"), source="api")
    queued = {
        "apiVersion": "jobdash.io/v1alpha1",
        "kind": "QueuedJob",
        "metadata": {"name": "waits", "namespace": "team-a", "labels": {"jobdash.io/job-id": str(waiting.pk)}},
    }
    review = {"group": "jobdash.io", "version": "v1alpha1", "kind": "QueuedJob", "resource": "queuedjobs"}
    for user_name, dry_run in ((JOBDASH, False), ("ana", True)):
        reply = webhook(None, old_object=queued, operation="DELETE", user=user_name, dry_run=dry_run, **review)
        assert reply["allowed"] is True
        assert Job.objects.get(pk=waiting.pk).state == State.QUEUED
    # A dry run gets the verdict too: not Alice's job, and no role of hers lets her cancel it.
    reply = webhook(None, old_object=queued, operation="DELETE", user=ALICE, dry_run=True, **review)
    assert reply["allowed"] is False and "needs the admin role in namespace 'team-a'" in reply["status"]["message"]
    assert webhook(None, old_object=queued, operation="DELETE", user="ana", **review)["allowed"] is True
    cancelled = Job.objects.get(pk=waiting.pk)
    assert cancelled.state == State.CANCELLED and cancelled.events.get(type="Cancelled").actor == "ana"
