"""Deleting a job's object in the cluster is a cancel, by the rule of any cancel (roles.py):
its owner may, anyone else needs the admin role in the namespace (or staff). Reviews posted
as the API server would; kubectl's end to end is test_embedded_rbac.py."""

import copy

import pytest
from django.contrib.auth.models import User

from jobdash.cluster.gateway import JOB_ID_LABEL
from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State
from queueing.kinds.pod import POD
from tests.jobdash.dispatch_support import manifest

from .conftest import ALICE, apply_patch, decoded_patch, of_kind
from .test_webhook_pods import gpu_pod

pytestmark = pytest.mark.django_db


@pytest.fixture
def ana(db):
    user = User.objects.create_user("ana")
    Namespace.objects.create(name="team-a").members.add(user)
    return user


def running(user, name: str) -> tuple[Job, dict]:
    """A job of `user`'s that runs, and its object as jobdash released it (its job-id label)."""
    job = services.job_submit(user=user, manifest=manifest(name), source="api")
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    obj = copy.deepcopy(job.parsed)
    obj["metadata"]["labels"] = {JOB_ID_LABEL: str(job.pk)}
    return job, obj


def test_a_running_jobs_object_is_deleted_by_its_owner_or_staff_and_nobody_else(webhook, ana):
    User.objects.create_user("bob")  # no role in team-a
    User.objects.create_user("root", is_staff=True)
    job, obj = running(ana, "ana-s")
    for dry_run in (True, False):
        reply = webhook(None, old_object=obj, operation="DELETE", user="bob", dry_run=dry_run)
        assert reply["allowed"] is False and reply["status"]["code"] == 403
        assert reply["status"]["message"] == (
            "jobdash refuses to delete TFJob team-a/ana-s: deleting it cancels its job, and deleting TFJob "
            f"team-a/ana-s, jobdash job #{job.pk} (submitted by ana, not you) needs the admin role in namespace "
            "'team-a'; yours is no role"
        )
    assert Job.objects.get(pk=job.pk).state == State.RUNNING
    reply = webhook(None, old_object=obj, operation="DELETE", user="root", dry_run=True)
    assert reply["allowed"] and Job.objects.get(pk=job.pk).state == State.RUNNING  # a dry run cancels nothing
    assert webhook(None, old_object=obj, operation="DELETE", user="root")["allowed"]
    cancelled = Job.objects.get(pk=job.pk)
    assert (cancelled.state, cancelled.message) == (State.CANCELLED, "its TFJob was deleted by root")
    assert cancelled.events.get(type="Cancelled").actor == "root"

    own, obj = running(ana, "ana-s-other")
    assert webhook(None, old_object=obj, operation="DELETE", user="ana")["allowed"]
    assert Job.objects.get(pk=own.pk).events.get(type="Cancelled").actor == "ana"


@pytest.mark.parametrize(
    ("user", "groups"),
    [
        ("system:serviceaccount:kube-system:generic-garbage-collector", ("system:serviceaccounts",)),
        ("system:serviceaccount:kube-system:namespace-controller", ("system:serviceaccounts",)),
        ("cluster-admin-alice", ("system:masters", "system:authenticated")),
    ],
    ids=["garbage-collector", "namespace-controller", "system-masters"],
)
def test_the_cluster_itself_deletes_any_job_and_the_job_is_cancelled_in_its_name(webhook, ana, user, groups):
    """An owner deleted (a Katib Trial), the namespace deleted, or the cluster's superusers:
    no jobdash role is asked (a refusal would leave the object, and a namespace, stuck)."""
    job, obj = running(ana, "ana-s")
    assert webhook(None, old_object=obj, operation="DELETE", user=user, groups=groups)["allowed"]
    assert Job.objects.get(pk=job.pk).events.get(type="Cancelled").actor == user


def test_a_queued_pods_delete_by_someone_else_is_refused_and_by_its_creator_cancels(webhook, ana):
    created = webhook(gpu_pod("solo"), user=ALICE, **of_kind(POD))
    pod = apply_patch(gpu_pod("solo"), decoded_patch(created))
    refused = webhook(None, old_object=pod, operation="DELETE", user="ana", **of_kind(POD))
    assert (
        refused["allowed"] is False
        and f"(submitted by {ALICE}, not you) needs the admin role" in (refused["status"]["message"])
    )
    assert Job.objects.get(name="solo").state == State.QUEUED
    assert webhook(None, old_object=pod, operation="DELETE", user=ALICE, **of_kind(POD))["allowed"]
    assert Job.objects.get(name="solo").events.get(type="Cancelled").actor == ALICE
