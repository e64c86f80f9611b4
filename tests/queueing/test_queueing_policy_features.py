"""The policy interface (queueing/policy.py): every feature the planner reads, declared once
with its default; each named policy states only where it differs."""

from collections.abc import Sequence
from dataclasses import dataclass, fields

import pytest

from queueing import (
    POLICY_NAMES,
    NamespaceQuota,
    PendingJob,
    PodSet,
    Policy,
    Reason,
    Snapshot,
    Workload,
    get_policy,
    plan,
)
from queueing.duration_policy import ShortestFirstPolicy

NOW = 1_000_000.0
HOUR = 3600.0
GPU = "requests.nvidia.com/gpu"
FEATURES = (
    "node_fit",
    "strict",
    "one_at_a_time",
    "reservation_after_s",
    "max_reservations",
    "fair_share",
    "usage_half_life_days",
    "backfill",
    "hold_after_s",
    "unknown_duration_s",
    "promote_after_s",
    "preempt_lower_priority",
)
# What each named policy means, feature by feature (the order is FEATURES').
EXPECTED = {
    "seed": (False, False, True, None, 0, False, None, False, None, None, None, False),
    "fifo": (True, True, False, None, 0, False, None, False, None, None, None, False),
    "fifo-besteffort": (True, False, False, None, 0, False, None, False, None, None, None, False),
    "priority": (True, False, False, HOUR, 8, False, None, True, 12 * HOUR, None, None, False),
    "fair": (True, False, False, HOUR, 8, True, None, True, 12 * HOUR, None, None, False),
    "shortest": (True, False, False, HOUR, 8, False, None, False, None, HOUR, 6 * HOUR, False),
}


@dataclass(frozen=True, kw_only=True)
class NewestFirst(Policy):
    """A policy written against the interface: its order, nothing else."""

    name: str = "newest-first"

    def order(self, jobs: Sequence[PendingJob], now: float) -> list[PendingJob]:
        return sorted(jobs, key=lambda job: job.submitted_at, reverse=True)


def gpu_job(job_id: int, count: int, waited: float) -> PendingJob:
    pods = (PodSet("Worker", 1, {"cpu": 1000, "nvidia.com/gpu": count}, {"nvidia.com/gpu": count}),)
    return PendingJob(job_id, "team-a", 0, NOW - waited, Workload("TFJob", "kubeflow.org/v1", f"j{job_id}", None, pods))


def test_the_interface_declares_every_feature_and_each_policy_its_values():
    assert {f.name for f in fields(Policy)} == {"name", *FEATURES}
    assert set(EXPECTED) == set(POLICY_NAMES)
    for name, values in EXPECTED.items():
        policy = get_policy(name)
        assert isinstance(policy, Policy) and policy.name == name
        assert tuple(getattr(policy, feature) for feature in FEATURES) == values, name
    assert [name for name in POLICY_NAMES if get_policy(name).uses_duration_estimate] == ["shortest"]


def test_a_new_policy_gets_every_default_and_the_planner_runs_it():
    with pytest.raises(TypeError):
        Policy(name="no-order")  # abstract: a policy is an order
    policy = NewestFirst()
    assert (policy.node_fit, policy.strict, policy.backfill, policy.hold_after_s) == (True, False, False, None)
    jobs = (gpu_job(1, 4, waited=3 * HOUR), gpu_job(2, 4, waited=2 * HOUR), gpu_job(3, 4, waited=HOUR))
    quota = {"team-a": NamespaceQuota("team-a", {GPU: 8})}
    result = plan(Snapshot(NOW, jobs, quotas=quota, node_fit=False), policy)
    assert result.admitted == (3, 2) and result.policy == "newest-first"
    assert result.pending[1].reason is Reason.QUOTA_EXCEEDED


def test_features_are_options_of_every_policy_and_policy_specific_ones_are_not():
    assert get_policy("fifo", reservation_after_s=60.0).reservation_after_s == 60.0
    assert get_policy("shortest", by_service=False).by_service is False
    for name in POLICY_NAMES:
        with pytest.raises(ValueError, match="hold_after_s"):
            get_policy(name, hold_after_s=-1.0)
    with pytest.raises(TypeError):
        get_policy("fifo", aging_per_hour=1.0)
    with pytest.raises(ValueError, match="promote_after_s"):
        ShortestFirstPolicy(promote_after_s=-1.0)
