"""The cycle publishes the pod phases of jobdash's jobs per role (for the job page)."""

import pytest

from jobdash.cluster.gateway import JobObject, PodInfo
from jobdash.dispatch.publish import pod_phases, publish
from jobdash.jobs.models import ClusterState
from queueing.snapshot import Snapshot

TF = "tfjobs.kubeflow.org"
BATCH = "jobs.batch"


def pod(
    name, role=None, phase="Running", deleting=False, namespace="team-a", label="training.kubeflow.org/replica-type"
):
    return PodInfo(
        namespace=namespace,
        name=name,
        phase=phase,
        node_name="n1",
        labels={label: role} if role else {},
        requests={},
        deleting=deleting,
    )


def job_object(kind, name, job_id, namespace="team-a"):
    return JobObject(
        kind=kind, namespace=namespace, name=name, uid="u", job_id=job_id, suspended=False, phase="Running", message=""
    )


def test_counts_per_job_role_and_phase():
    mnist, theirs = (TF, "team-a", "mnist"), (TF, "team-a", "theirs")
    objects = {mnist: job_object(TF, "mnist", 7), theirs: job_object(TF, "theirs", None)}
    pods_by_job = {
        mnist: [
            pod("w0", "worker"),
            pod("w1", "worker"),
            pod("w2", "worker", "Pending"),
            pod("ps0", "ps", "Succeeded"),
            pod("w3", "worker", deleting=True),
        ],
        theirs: [pod("x", "worker")],  # an object not released by jobdash
        (TF, "team-b", "mnist"): [pod("z", "worker", namespace="team-b")],  # same name elsewhere: no object of ours
    }
    assert pod_phases(pods_by_job, objects) == {
        "team-a/mnist": {
            "job": 7,
            "replicas": {"worker": {"Running": 2, "Pending": 1, "Terminating": 1}, "ps": {"Succeeded": 1}},
        },
    }


def test_a_kind_whose_pods_carry_no_role_label_counts_them_together():
    trial = (BATCH, "team-a", "trial-1")
    counts = pod_phases(
        {trial: [pod("t-abcde"), pod("t-fghij", phase="Pending")]}, {trial: job_object(BATCH, "trial-1", 3)}
    )
    assert counts == {"team-a/trial-1": {"job": 3, "replicas": {"pods": {"Running": 1, "Pending": 1}}}}


@pytest.mark.django_db
def test_publish_stores_them_with_the_cluster_state():
    publish(
        Snapshot(now=0.0, pending=(), in_flight=(), running=(), quotas={}, nodes=()),
        {"a/b": {"job": 7, "replicas": {}}},
    )
    assert ClusterState.objects.get(id=1).pods == {"a/b": {"job": 7, "replicas": {}}}
    publish(Snapshot(now=0.0, pending=(), in_flight=(), running=(), quotas={}, nodes=()))
    assert ClusterState.objects.get(id=1).pods == {}


@pytest.mark.django_db
def test_publish_is_one_statement_once_the_row_exists():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    empty = Snapshot(now=0.0, pending=(), in_flight=(), running=(), quotas={}, nodes=())
    publish(empty)  # creates the row
    with CaptureQueriesContext(connection) as queries:
        publish(empty, {"a/b": {"job": 7, "replicas": {}}})
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["UPDATE"]
    assert ClusterState.objects.get(id=1).pods == {"a/b": {"job": 7, "replicas": {}}}
