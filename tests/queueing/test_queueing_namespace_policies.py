"""Per-namespace policy overrides (Snapshot.policies).

Meaning under test: an override orders its namespace's own queue and sets that queue's
head-of-line rules (strict, one at a time, quota reservation); the global policy keeps
deciding the order across namespaces, node fit, node reservations and fair share.
"""

from collections import defaultdict
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from queueing import POLICY_NAMES, NamespaceQuota, Node, PendingJob, PodSet, Reason, Workload, get_policy, plan

from .test_queueing_planner_properties import NAMESPACES, NOW, SETTINGS, assert_within_quota, snapshots

overrides = st.dictionaries(st.sampled_from(NAMESPACES), st.sampled_from(POLICY_NAMES), max_size=len(NAMESPACES))


def with_policies(snapshot, policies):
    return replace(snapshot, policies=policies)


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES), st.lists(st.sampled_from(NAMESPACES), unique=True))
def test_an_override_naming_the_global_policy_changes_nothing(snapshot, policy, namespaces):
    same = with_policies(snapshot, {namespace: policy for namespace in namespaces})
    assert plan(same, policy) == plan(snapshot, policy)


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES), overrides)
def test_each_namespace_queue_is_in_its_own_policy_order(snapshot, policy, policies):
    result = plan(with_policies(snapshot, policies), policy)
    waiting = defaultdict(list)
    for status in sorted(result.pending.values(), key=lambda s: s.position):
        waiting[status.namespace].append(status.job_id)
    for namespace, job_ids in waiting.items():
        own = get_policy(policies.get(namespace, policy))
        expected = [job.id for job in own.order([j for j in snapshot.pending if j.namespace == namespace], NOW)]
        # The waiting jobs, by position, are that order with the admitted jobs left out.
        assert job_ids == [job_id for job_id in expected if job_id in result.pending], namespace


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES), overrides)
def test_overrides_never_break_quota_and_every_waiting_job_has_a_position(snapshot, policy, policies):
    snapshot = with_policies(snapshot, policies)
    result = plan(snapshot, policy)
    assert_within_quota(snapshot, result)
    jobs = {job.id: job for job in snapshot.pending}
    assert set(result.pending) | set(result.admitted) == set(jobs)
    positions = defaultdict(list)
    for status in result.pending.values():
        positions[status.namespace].append(status.position)
    for namespace, found in positions.items():
        assert sorted(found) == list(range(1, len(found) + 1)), namespace
    # Node fit is the global policy's: an override never turns placements on or off.
    expect_placements = snapshot.node_fit and get_policy(policy).node_fit
    assert all((admission.placement is not None) == expect_placements for admission in result.admissions)


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES), st.sampled_from(NAMESPACES), st.sampled_from(POLICY_NAMES))
def test_an_override_does_not_touch_other_namespaces_that_share_no_capacity(snapshot, policy, namespace, override):
    """Quota only (no shared nodes): a namespace's override changes nothing for the others
    but their start estimates, which play the shared cluster forward."""
    snapshot = replace(snapshot, node_fit=False)
    before = plan(snapshot, policy)
    after = plan(with_policies(snapshot, {namespace: override}), policy)

    def others(result):
        admitted = {a for a in result.admissions if a.namespace != namespace}
        waiting = {
            (s.job_id, s.position, s.reason, tuple(sorted(map(str, s.detail.items()))))
            for s in result.pending.values()
            if s.namespace != namespace
        }
        return admitted, waiting

    assert others(after) == others(before)


@SETTINGS
@given(snapshots(), st.sampled_from(POLICY_NAMES), overrides, st.randoms(use_true_random=False))
def test_same_plan_whatever_the_order_of_pending_jobs(snapshot, policy, policies, rng):
    snapshot = with_policies(snapshot, policies)
    shuffled = list(snapshot.pending)
    rng.shuffle(shuffled)
    assert plan(replace(snapshot, pending=tuple(shuffled)), policy) == plan(snapshot, policy)


# -- scenarios --------------------------------------------------------------------------


def job(job_id, namespace, cpu, submitted, priority=0):
    workload = Workload(
        "TFJob", "kubeflow.org/v1", f"j{job_id}", namespace, (PodSet("Worker", 1, {"cpu": cpu * 1000}, {}),)
    )
    return PendingJob(job_id, namespace, priority, NOW - submitted, workload)


def test_a_strict_fifo_namespace_blocks_behind_its_head_while_the_others_skip_ahead():
    quotas = {ns: NamespaceQuota(ns, {"requests.cpu": 10000}, {"requests.cpu": 4000}) for ns in ("team-a", "team-b")}
    pending = (job(1, "team-a", 8, 300), job(2, "team-a", 1, 200), job(3, "team-b", 8, 300), job(4, "team-b", 1, 200))
    nodes = (Node("n", {"cpu": 64000, "pods": 100}),)
    result = plan(replace(_snapshot(pending, quotas, nodes), policies={"team-a": "fifo"}), "priority")
    assert result.admitted == (4,)  # team-b (priority, best effort) skips its oversized head
    assert result.pending[2].reason is Reason.BLOCKED_BY_QUEUE_HEAD  # team-a (fifo) does not


def test_a_seed_namespace_releases_one_at_a_time_largest_cpu_first():
    pending = (job(1, "team-a", 1, 300), job(2, "team-a", 2, 200), job(3, "team-b", 1, 300), job(4, "team-b", 2, 200))
    nodes = (Node("n", {"cpu": 64000, "pods": 100}),)
    result = plan(replace(_snapshot(pending, {}, nodes), policies={"team-a": "seed"}), "priority")
    assert set(result.admitted) == {2, 3, 4}
    assert result.pending[1].reason is Reason.WAITING_FOR_IN_FLIGHT
    assert all(admission.placement is not None for admission in result.admissions)  # nodes still checked


def test_an_unknown_override_is_refused():
    import pytest

    with pytest.raises(ValueError, match="unknown policy"):
        plan(replace(_snapshot((job(1, "team-a", 1, 0),), {}, ()), policies={"team-a": "lottery"}))


def _snapshot(pending, quotas, nodes):
    from queueing import Snapshot

    return Snapshot(NOW, pending, quotas=quotas, nodes=nodes)
