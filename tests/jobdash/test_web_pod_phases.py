"""The cycle publishes the pod phases of jobdash's TFJobs per replica type (for the job page)."""

import pytest

from jobdash.cluster.gateway import PodInfo, TFJobInfo
from jobdash.dispatch.publish import pod_phases, publish
from jobdash.jobs.models import ClusterState
from queueing.snapshot import Snapshot


def pod(name, job, role, phase="Running", deleting=False, namespace="team-a"):
    return PodInfo(
        namespace=namespace,
        name=name,
        phase=phase,
        node_name="n1",
        job_name=job,
        replica_type=role,
        replica_index=0,
        requests={},
        deleting=deleting,
    )


def tfjob(name, job_id, namespace="team-a"):
    return TFJobInfo(
        namespace=namespace, name=name, uid="u", job_id=job_id, suspended=False, condition="Running", message=""
    )


def test_counts_per_job_replica_and_phase():
    tfjobs = {("team-a", "mnist"): tfjob("mnist", 7), ("team-a", "theirs"): tfjob("theirs", None)}
    pods = [
        pod("w0", "mnist", "worker"),
        pod("w1", "mnist", "worker"),
        pod("w2", "mnist", "worker", "Pending"),
        pod("ps0", "mnist", "ps", "Succeeded"),
        pod("w3", "mnist", "worker", deleting=True),
        pod("x", "theirs", "worker"),  # a TFJob not released by jobdash
        pod("y", None, None),  # not a TFJob's pod
        pod("z", "mnist", "worker", namespace="team-b"),  # same name, other namespace: another TFJob
    ]
    assert pod_phases(pods, tfjobs) == {
        "team-a/mnist": {
            "job": 7,
            "replicas": {"worker": {"Running": 2, "Pending": 1, "Terminating": 1}, "ps": {"Succeeded": 1}},
        },
    }


@pytest.mark.django_db
def test_publish_stores_them_with_the_cluster_state():
    publish(
        Snapshot(now=0.0, pending=(), in_flight=(), running=(), quotas={}, nodes=()),
        {"a/b": {"job": 7, "replicas": {}}},
    )
    assert ClusterState.objects.get(id=1).pods == {"a/b": {"job": 7, "replicas": {}}}
    publish(Snapshot(now=0.0, pending=(), in_flight=(), running=(), quotas={}, nodes=()))
    assert ClusterState.objects.get(id=1).pods == {}
