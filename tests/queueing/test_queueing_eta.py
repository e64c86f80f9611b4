"""Durations and estimated start times."""

import pytest

from queueing import (
    DURATION_ANNOTATION,
    NamespaceQuota,
    Node,
    PendingJob,
    PodSet,
    Reason,
    RunningJob,
    Snapshot,
    Workload,
    duration_of,
    parse_duration,
    plan,
    shape_key,
)
from queueing.eta import HELD_BY_UNKNOWN, NO_END_KNOWN

GI = 2**30
NOW = 1_000_000.0


def tfjob(workers=1, gpu=1, annotations=None):
    requests = {"cpu": 1000, "memory": GI, "nvidia.com/gpu": gpu}
    return Workload(
        "TFJob",
        "kubeflow.org/v1",
        "j",
        None,
        (PodSet("Worker", workers, requests, requests),),
        annotations=annotations or {},
    )


def gpu_quota(gpus, used=0, namespace="team-a"):
    return {namespace: NamespaceQuota(namespace, {"requests.nvidia.com/gpu": gpus}, {"requests.nvidia.com/gpu": used})}


def big_node():
    return (Node("n", {"cpu": 64_000, "memory": 256 * GI, "nvidia.com/gpu": 64, "pods": 110}),)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5400", 5400.0),
        ("90m", 5400.0),
        ("1h30m", 5400.0),
        ("1h30m0s", 5400.0),
        ("2d", 172_800.0),
        ("1.5h", 5400.0),
        (" 45s ", 45.0),
        ("", None),
        ("soon", None),
        ("1h 30m", None),
        ("-5", None),
        ("0", None),
        ("m5", None),
        ("inf", None),
        ("nan", None),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


def test_duration_prefers_declared_then_annotation_then_history():
    annotated = tfjob(annotations={DURATION_ANNOTATION: "2h"})
    plain = tfjob()
    history = {("team-a", shape_key(plain)): (100.0, 300.0, 200.0, 10_000.0)}
    assert shape_key(plain) == "TFJob/1p/1gpu"
    assert duration_of(annotated, "team-a", 60.0, history) == (60.0, "declared")
    assert duration_of(annotated, "team-a", None, history) == (7200.0, "annotation")
    assert duration_of(plain, "team-a", None, history) == (250.0, "history")  # the median, not the mean
    assert duration_of(plain, "team-b", None, history) == (None, "unknown")
    assert duration_of(tfjob(annotations={DURATION_ANNOTATION: "whenever"}), "team-a") == (None, "unknown")


def test_a_job_waiting_for_quota_starts_when_the_running_job_ends():
    running = RunningJob(9, "team-a", tfjob(gpu=4), NOW - 60, expected_end=NOW + 100)
    pending = (
        PendingJob(1, "team-a", 0, NOW - 10, tfjob(gpu=3), expected_duration=50.0),
        PendingJob(2, "team-a", 0, NOW - 5, tfjob(gpu=4), expected_duration=50.0),
    )
    result = plan(Snapshot(NOW, pending, running=(running,), quotas=gpu_quota(4, used=4), nodes=big_node()))
    assert result.pending[1].reason is Reason.QUOTA_EXCEEDED
    assert result.pending[1].eta == NOW + 100
    assert result.pending[2].eta == NOW + 150  # after job 1, which ends 50 s later, in queue order


def test_a_job_admitted_this_cycle_counts_as_running_for_the_estimate():
    pending = (
        PendingJob(1, "team-a", 0, NOW - 10, tfjob(gpu=2), expected_duration=600.0),
        PendingJob(2, "team-a", 0, NOW - 5, tfjob(gpu=2), expected_duration=600.0),
    )
    result = plan(Snapshot(NOW, pending, quotas=gpu_quota(2), nodes=big_node()))
    assert result.admitted == (1,)
    assert result.pending[2].eta == NOW + 600


def test_the_duration_annotation_is_used_for_jobs_that_declare_nothing():
    running = RunningJob(9, "team-a", tfjob(gpu=2, annotations={DURATION_ANNOTATION: "10m"}), NOW - 60)
    pending = (PendingJob(1, "team-a", 0, NOW - 10, tfjob(gpu=2)),)
    result = plan(Snapshot(NOW, pending, running=(running,), quotas=gpu_quota(2, used=2), nodes=big_node()))
    assert result.pending[1].eta == NOW - 60 + 600


def test_without_any_known_end_there_is_no_estimate_and_the_note_says_why():
    running = RunningJob(9, "team-a", tfjob(gpu=2), NOW - 60)  # no expected end, no annotation
    pending = (PendingJob(1, "team-a", 0, NOW - 10, tfjob(gpu=2)),)
    status = plan(Snapshot(NOW, pending, running=(running,), quotas=gpu_quota(2, used=2), nodes=big_node())).pending[1]
    assert status.eta is None and status.eta_note == NO_END_KNOWN


def test_a_job_needing_what_an_unknown_duration_job_holds_gets_no_estimate_but_does_not_block_others():
    ends = RunningJob(8, "team-a", tfjob(gpu=1), NOW - 60, expected_end=NOW + 300)
    forever = RunningJob(9, "team-a", tfjob(gpu=3), NOW - 60)
    pending = (
        PendingJob(1, "team-a", 5, NOW - 10, tfjob(gpu=2), expected_duration=60.0),
        PendingJob(2, "team-a", 0, NOW - 5, tfjob(gpu=1), expected_duration=60.0),
    )
    result = plan(Snapshot(NOW, pending, running=(ends, forever), quotas=gpu_quota(4, used=4), nodes=big_node()))
    assert result.pending[1].eta is None and result.pending[1].eta_note == HELD_BY_UNKNOWN
    assert result.pending[2].eta == NOW + 300


def test_starts_beyond_the_horizon_are_not_estimated():
    running = RunningJob(9, "team-a", tfjob(gpu=2), NOW - 60, expected_end=NOW + 2 * 86_400)
    pending = (PendingJob(1, "team-a", 0, NOW - 10, tfjob(gpu=2)),)
    snapshot = Snapshot(NOW, pending, running=(running,), quotas=gpu_quota(2, used=2), nodes=big_node())
    status = plan(snapshot).pending[1]
    assert status.eta is None and "24 h" in status.eta_note
    assert plan(snapshot, eta_horizon_s=None).pending[1].eta == NOW + 2 * 86_400


def test_freed_cluster_capacity_goes_to_the_better_ranked_namespace_first():
    node = (Node("n", {"cpu": 64_000, "memory": 256 * GI, "nvidia.com/gpu": 4, "pods": 110}, {"nvidia.com/gpu": 4}),)
    running = (RunningJob(9, "team-c", tfjob(gpu=4), NOW - 60, expected_end=NOW + 100),)
    pending = (
        PendingJob(1, "team-b", 0, NOW - 5, tfjob(gpu=4), expected_duration=1000.0),
        PendingJob(2, "team-a", 1, NOW - 5, tfjob(gpu=4), expected_duration=1000.0),
    )
    result = plan(Snapshot(NOW, pending, running=running, nodes=node))
    assert result.pending[2].eta == NOW + 100  # higher priority
    assert result.pending[1].eta == NOW + 1100


@pytest.mark.parametrize(("first_end", "second_end", "eta"), [(30, 100, 30), (30, 80, 80), (10_000, 10_090, 10_090)])
def test_ends_within_one_step_are_applied_together(first_end, second_end, eta):
    """A step lasts a minute, or 1% of the time from now if longer: a job freed by the first
    of two ends in one step is started at the second."""
    node = (Node("n", {"cpu": 64_000, "memory": 256 * GI, "nvidia.com/gpu": 2, "pods": 110}, {"nvidia.com/gpu": 2}),)
    running = (
        RunningJob(10, "team-z", tfjob(gpu=1), NOW, expected_end=NOW + first_end),
        RunningJob(11, "team-z", tfjob(gpu=1), NOW, expected_end=NOW + second_end),
    )
    pending = (PendingJob(1, "team-a", 0, NOW - 5, tfjob(gpu=1)),)
    assert plan(Snapshot(NOW, pending, running=running, nodes=node)).pending[1].eta == NOW + eta


def test_a_job_waiting_behind_one_that_ends_past_the_horizon_says_so():
    running = RunningJob(9, "team-a", tfjob(gpu=2), NOW - 60, expected_end=NOW + 100)
    pending = (
        PendingJob(1, "team-a", 0, NOW - 10, tfjob(gpu=2), expected_duration=3 * 86_400.0),
        PendingJob(2, "team-a", 0, NOW - 5, tfjob(gpu=2), expected_duration=60.0),
    )
    result = plan(Snapshot(NOW, pending, running=(running,), quotas=gpu_quota(2, used=2), nodes=big_node()))
    assert result.pending[1].eta == NOW + 100
    assert result.pending[2].eta is None and "within 24 h" in result.pending[2].eta_note
