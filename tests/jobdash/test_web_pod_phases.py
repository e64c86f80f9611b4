"""The cycle publishes the pod phases of jobdash's jobs per role (for the job page)."""

import pytest

from jobdash.cluster.gateway import PodInfo
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.phases.publish import pod_phases, publish
from jobdash.jobs.models import ClusterState
from jobdash.jobs.presenters import gpu_slots, placement_rows, pod_rows
from queueing import PodSet, Workload
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
    phases = pod_phases([active(mnist, 7)], pods_by_job)
    assert set(phases) == {"team-a/mnist"} and phases["team-a/mnist"]["job"] == 7
    assert phases["team-a/mnist"]["replicas"] == {
        "worker": {"Running": 2, "Pending": 1, "Terminating": 1},
        "ps": {"Succeeded": 1},
    }
    # And one by one, for the job page's placement: where each runs or is sent.
    listed = {p["name"]: (p["role"], p["phase"], p["node"], p["gated"]) for p in phases["team-a/mnist"]["pods"]}
    assert listed["w2"] == ("worker", "Pending", "n1", False) and listed["w3"][1] == "Terminating"


def test_a_kind_whose_pods_carry_no_role_label_counts_them_together():
    trial = (BATCH, "team-a", "trial-1")
    counts = pod_phases([active(trial, 3, "Job")], {trial: [pod("t-abcde"), pod("t-fghij", phase="Pending")]})
    assert counts["team-a/trial-1"]["replicas"] == {"pods": {"Running": 1, "Pending": 1}}
    assert [p["name"] for p in counts["team-a/trial-1"]["pods"]] == ["t-abcde", "t-fghij"]


def test_a_batch_jobs_pods_count_under_its_one_pod_set():
    """Not "main: wanted 1, running 0" beside "pods: wanted 0, running 1": one row."""
    trial = (BATCH, "team-a", "trial-2")
    workload = Workload(
        kind="Job", api_version="batch/v1", name="trial-2", namespace="team-a", pod_sets=(PodSet("main", 1),)
    )
    job = ActiveJob(id=4, key=trial, kind="Job", state="Running", workload=workload)
    counts = pod_phases([job], {trial: [pod("t-abcde")]})["team-a/trial-2"]
    assert counts["replicas"] == {"main": {"Running": 1}}
    rows = pod_rows(counts["replicas"], workload.to_json())
    assert [(r["role"], r["wanted"], r["total"]) for r in rows] == [("main", 1, 1)]


def test_an_indexed_jobs_later_wave_holds_the_slots_of_the_wave_before():
    """completions 4, parallelism 2: the second wave runs where the first ran; the first
    wave's pods finished earlier, neither is "off plan"."""
    placement = [["main", 0, "n1"], ["main", 1, "n1"]]
    pods = [
        {"name": f"idx-{i}", "role": "main", "phase": phase, "node": "n1", "gated": False}
        for i, phase in enumerate(["Succeeded", "Succeeded", "Running", "Pending"])
    ]
    rows = placement_rows(placement, pods)
    shown = [(r["index"], r["pod"]["name"], r["status"]) for r in rows]
    assert shown == [
        (0, "idx-2", "on its node"),
        (1, "idx-3", "waiting for its node"),
        (None, "idx-0", "finished earlier"),
        (None, "idx-1", "finished earlier"),
    ]
    # Between waves (the next not made yet) the finished pods show in their slots.
    between = placement_rows(placement, pods[:2])
    assert [(r["index"], r["pod"]["name"]) for r in between] == [(0, "idx-0"), (1, "idx-1")]


def test_the_placement_table_says_where_each_planned_pod_runs():
    placement = [["Worker", 0, "n1"], ["Worker", 1, "n2"], ["Worker", 2, "n3"]]
    pods = [
        {"name": "w0", "role": "worker", "phase": "Running", "node": "n1", "gated": False},
        {"name": "w1", "role": "worker", "phase": "Pending", "node": "", "gated": True},
        {"name": "w9", "role": "worker", "phase": "Running", "node": "n7", "gated": False},
    ]
    rows = placement_rows(placement, pods)
    shown = [(r["planned"], (r["pod"] or {}).get("name"), r["status"]) for r in rows]
    assert shown == [
        ("n1", "w0", "on its node"),
        ("n2", "w1", "waiting for its node"),  # gated: no node yet
        ("n3", None, "not made yet"),
        ("", "w9", "off plan"),  # runs where no slot is: what should never be
    ]


def test_a_nodes_gpus_are_shown_by_the_job_that_holds_them():
    slots = gpu_slots({"allocatable": 8, "allocated": 5, "free": 3}, {"team-a/b": 2, "team-a/a": 1})
    assert [s["job"] for s in slots] == ["team-a/a", "team-a/b", "team-a/b", "", "", "", "", ""]
    assert [s["state"] for s in slots] == ["used"] * 5 + ["free"] * 3


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
