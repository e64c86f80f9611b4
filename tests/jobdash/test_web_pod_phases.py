"""The cycle publishes the pod phases of jobdash's jobs per role (for the job page)."""

import pytest

from jobdash.cluster.gateway import PodInfo
from jobdash.dispatch.active import ActiveJob
from jobdash.dispatch.publish import pod_phases, publish
from jobdash.jobs.models import ClusterState
from queueing import Workload
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


def active(key, job_id, kind="TFJob"):
    workload = Workload(kind=kind, api_version="kubeflow.org/v1", name=key[2], namespace=key[1], pod_sets=())
    return ActiveJob(id=job_id, key=key, kind=kind, state="Running", workload=workload)


def test_counts_per_job_role_and_phase():
    mnist, theirs = (TF, "team-a", "mnist"), (TF, "team-a", "theirs")
    pods_by_job = {
        mnist: [
            pod("w0", "worker"),
            pod("w1", "worker"),
            pod("w2", "worker", "Pending"),
            pod("ps0", "ps", "Succeeded"),
            pod("w3", "worker", deleting=True),
        ],
        theirs: [pod("x", "worker")],  # an object of no active job of jobdash's
        (TF, "team-b", "mnist"): [pod("z", "worker", namespace="team-b")],  # same name elsewhere: not ours
    }
    assert pod_phases([active(mnist, 7)], pods_by_job) == {
        "team-a/mnist": {
            "job": 7,
            "replicas": {"worker": {"Running": 2, "Pending": 1, "Terminating": 1}, "ps": {"Succeeded": 1}},
        },
    }


def test_a_kind_whose_pods_carry_no_role_label_counts_them_together():
    trial = (BATCH, "team-a", "trial-1")
    counts = pod_phases([active(trial, 3, "Job")], {trial: [pod("t-abcde"), pod("t-fghij", phase="Pending")]})
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
