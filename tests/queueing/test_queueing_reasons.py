"""The reason vocabulary: every reason renders a one-line message from its detail."""

import pytest

from queueing import DEFAULT_POLICY, POLICY_NAMES, PendingStatus, Policy, Reason, get_policy

GI = 2**30
DETAILS = {
    Reason.QUOTA_EXCEEDED: {"resource": "requests.memory", "needed": 3 * GI, "free": GI, "hard": 8 * GI},
    Reason.NO_NODE_FITS: {
        "resource": "nvidia.com/gpu",
        "needed": 2,
        "free": 1,
        "scope": "node",
        "role": "Worker",
        "pods": 4,
        "placed": 1,
    },
    Reason.NO_DOMAIN_FITS: {
        "level": "topology.jobdash.io/rack",
        "resource": "nvidia.com/gpu",
        "needed": 8,
        "pods": 4,
        "roomiest": 2,
    },
    Reason.OUTLASTS_LENT_POOL: {
        "pool": "night-a",
        "reclaim_at": 1_000_000.0 + 9 * 3600,
        "bound": 36_000.0,
        "why": "outlasts",
        "notice_s": 1800.0,
        "timezone": "UTC",
        "now": 1_000_000.0,
    },
    Reason.NO_CLUSTER: {"asked": "it requires cluster east", "lost": ["east"]},
    Reason.WAITING_FOR_IN_FLIGHT: {"in_flight": 7},
    Reason.RESERVED_FOR_OLDER_JOB: {"reserved_for": 3, "resource": "nvidia.com/gpu"},
    Reason.BLOCKED_BY_QUEUE_HEAD: {"head": 3},
    Reason.BACKING_OFF: {"until": 1_000_300.0, "attempts": 2},
    Reason.WAITING_FOR_PODS: {"created": 2, "total": 4},
    Reason.NEVER_FITS_QUOTA: {"resource": "requests.cpu", "needed": 12_500, "hard": 8_000},
    Reason.NEVER_FITS_NODES: {"resource": "nvidia.com/gpu", "needed": 16, "free": 8, "role": "Worker"},
    Reason.CANNOT_BORROW: {
        "resource": "requests.nvidia.com/gpu",
        "needed": 8,
        "free": 4,
        "guaranteed": 16,
        "cohort": "research",
        "limit": None,
    },
    Reason.PREEMPTING: {"victims": [4, 9]},
    Reason.PREEMPTED: {
        "preemptor": 12,
        "waits_for": "QuotaExceeded",
        "detail": {"resource": "requests.memory", "needed": 3 * GI, "free": GI, "hard": 8 * GI},
    },
    Reason.WAITING_FOR_DEPENDENCY: {"waits": [[42, "train-1", "ok"], [41, "prep", "any"]]},
    Reason.DEPENDENCY_NEVER_SATISFIED: {"never": [[42, "train-1", "ok", "Cancelled"]]},
    Reason.ARRAY_CONCURRENCY_LIMIT: {"group": 7, "name": "sweep", "limit": 5},
    Reason.OVER_BUDGET: {"used": 1050.0, "budget": 1000.0},
}


def test_the_vocabulary_is_fixed_and_every_reason_has_an_example_here():
    assert set(DETAILS) == set(Reason)
    assert {reason for reason in Reason if reason.never} == {Reason.NEVER_FITS_QUOTA, Reason.NEVER_FITS_NODES}


@pytest.mark.parametrize("reason", list(Reason))
def test_every_reason_renders_one_line_with_its_numbers(reason):
    message = PendingStatus(1, "team-a", 1, reason, DETAILS[reason]).message
    assert message and "\n" not in message
    assert str(reason) == reason.value  # a str enum: stored and serialised as its name


def test_messages_show_amounts_as_kubectl_would():
    quota = PendingStatus(1, "team-a", 1, Reason.QUOTA_EXCEEDED, DETAILS[Reason.QUOTA_EXCEEDED]).message
    assert quota == "quota requests.memory in team-a: needs 3Gi, 1Gi of 8Gi free"
    never = PendingStatus(1, "team-a", 1, Reason.NEVER_FITS_QUOTA, DETAILS[Reason.NEVER_FITS_QUOTA]).message
    assert "12500m requests.cpu" in never and "is 8" in never
    nodes = PendingStatus(1, "team-a", 1, Reason.NO_NODE_FITS, DETAILS[Reason.NO_NODE_FITS]).message
    assert nodes == (
        "no node fits: 1 of 4 pods placed; a Worker pod needs 2 nvidia.com/gpu, the most free on one node is 1"
    )


def test_a_required_topology_names_its_level_and_how_close_the_roomiest_domain_comes():
    rack = PendingStatus(1, "team-a", 1, Reason.NO_DOMAIN_FITS, DETAILS[Reason.NO_DOMAIN_FITS]).message
    assert rack == "no rack has room for all 4 pods (8 nvidia.com/gpu each) at once; the roomiest has room for 2"
    one = {**DETAILS[Reason.NO_DOMAIN_FITS], "pods": 1, "roomiest": 0}
    alone = PendingStatus(1, "team-a", 1, Reason.NO_DOMAIN_FITS, one).message
    assert alone == "no rack has room for its pod (8 nvidia.com/gpu); the roomiest has room for 0"
    unlabelled = {**DETAILS[Reason.NEVER_FITS_NODES], "level": "topology.jobdash.io/rack"}
    never = PendingStatus(1, "team-a", 1, Reason.NEVER_FITS_NODES, unlabelled).message
    assert never == (
        "never fits: it requires one rack (topology.jobdash.io/rack), and no schedulable node carries that label"
    )


def test_a_job_kept_off_a_lent_pool_says_when_the_pool_goes_back():
    detail = DETAILS[Reason.OUTLASTS_LENT_POOL]
    past = PendingStatus(1, "team-a", 1, Reason.OUTLASTS_LENT_POOL, detail).message
    assert past == "would run past 22:46, when node-pool night-a is reclaimed"  # (t=1,032,400 is 22:46 UTC)
    notice = PendingStatus(1, "team-a", 1, Reason.OUTLASTS_LENT_POOL, {**detail, "why": "notice"}).message
    assert notice == "node-pool night-a is reclaimed at 22:46: nothing new starts there in its last 30 min"


def test_elastic_quota_messages_name_the_cohort_the_victims_and_the_preemptor():
    borrow = PendingStatus(1, "team-a", 1, Reason.CANNOT_BORROW, DETAILS[Reason.CANNOT_BORROW]).message
    assert borrow == (
        "beyond the guaranteed 16 requests.nvidia.com/gpu of team-a: needs 8 from cohort research, which lends 4 now"
    )
    limited = {**DETAILS[Reason.CANNOT_BORROW], "limit": 2}
    assert "borrowing limit of 2 is reached" in PendingStatus(1, "team-a", 1, Reason.CANNOT_BORROW, limited).message
    assert "job(s) 4, 9 leave" in PendingStatus(1, "team-a", 1, Reason.PREEMPTING, DETAILS[Reason.PREEMPTING]).message
    preempted = PendingStatus(1, "team-a", 1, Reason.PREEMPTED, DETAILS[Reason.PREEMPTED]).message
    assert preempted == (
        "preempted to make room for job 12; back in its place, quota requests.memory in team-a: needs 3Gi, "
        "1Gi of 8Gi free"
    )


def test_policies_by_name():
    assert DEFAULT_POLICY == "priority"
    for name in POLICY_NAMES:
        policy = get_policy(name)
        assert isinstance(policy, Policy) and policy.name == name
    assert get_policy("fifo").strict and not get_policy("fifo-besteffort").strict
    assert get_policy("fair").fair_share and not get_policy("seed").node_fit
    assert get_policy("priority", aging_per_hour=2.5).aging_per_hour == 2.5
    with pytest.raises(ValueError, match="unknown policy"):
        get_policy("lottery")
    with pytest.raises(TypeError):
        get_policy("seed", aging_per_hour=1)


def test_waits_for_room_are_one_wait_and_every_other_change_is_a_new_one():
    from queueing.reasons import same_wait

    room = [Reason.QUOTA_EXCEEDED, Reason.NO_NODE_FITS, Reason.NO_DOMAIN_FITS, Reason.RESERVED_FOR_OLDER_JOB]
    assert all(reason.for_room for reason in room)
    assert all(same_wait(a, b) for a in room for b in room)
    assert same_wait(Reason.QUOTA_EXCEEDED, "NoNodeFits")  # a row's stored reason is a str
    others = [reason for reason in Reason if reason not in room]
    assert not any(reason.for_room for reason in others)
    assert all(same_wait(reason, reason) for reason in others)
    assert not any(same_wait(a, b) or same_wait(b, a) for a in room for b in others)
    assert not same_wait("", Reason.QUOTA_EXCEEDED)  # a new job's first reason
