"""Backfill behind a head's shadow reservation (queueing/backfill.py and the default policy).

The properties check the planner against arithmetic written out here: when the head
could start given what runs and what was admitted, with every job ending exactly when
its estimate says.
"""

import os
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing import NamespaceQuota, PendingJob, PodSet, Reason, RunningJob, Snapshot, Workload, get_policy, plan
from queueing.backfill import INF, shadow
from tests.examples import examples

NOW = 1_000_000.0
GPU = "requests.nvidia.com/gpu"
SETTINGS = settings(
    max_examples=examples(int(os.environ.get("QUEUEING_EXAMPLES", 150))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def gpus(count: int) -> Workload:
    return Workload(
        "TFJob",
        "kubeflow.org/v1",
        "job",
        None,
        (PodSet("Worker", 1, {"cpu": 1000, "nvidia.com/gpu": count}, {"nvidia.com/gpu": count}),),
    )


def pending(job_id, count, duration, waited=60.0, namespace="team-a"):
    return PendingJob(job_id, namespace, 0, NOW - waited + job_id * 1e-3, gpus(count), expected_duration=duration)


def running(job_id, count, end, namespace="team-a"):
    return RunningJob(job_id, namespace, gpus(count), NOW - 100, expected_end=end)


def snapshot(jobs, runs, hard=8):
    used = sum(run.demand[GPU] for run in runs)
    return Snapshot(
        NOW,
        tuple(jobs),
        running=tuple(runs),
        node_fit=False,
        quotas={"team-a": NamespaceQuota("team-a", {GPU: hard}, {GPU: used})},
    )


# -- the shadow, by hand -----------------------------------------------------------------------


def test_shadow_is_the_first_end_that_makes_room_and_extra_is_what_is_left_then():
    # 2 free; the head needs 6: +3 at t+100 (5), +3 at t+300 (8) -> starts at t+300, 2 left over.
    found = shadow(1, NOW, {GPU: 2}, {GPU: 6}, [(NOW + 300, {GPU: 3}), (NOW + 100, {GPU: 3})])
    assert found.start == NOW + 300 and found.extra == {GPU: 2}
    assert found.allows(NOW, 299, {GPU: 2}) == "ends-first"
    assert found.allows(NOW, 301, {GPU: 2}) == "extra"
    assert found.allows(NOW, 301, {GPU: 3}) is None
    found.take("extra", {GPU: 2})
    assert found.extra == {GPU: 0} and found.allows(NOW, 301, {GPU: 1}) is None


def test_ends_in_the_past_count_as_now_and_ties_at_the_shadow_time_all_count():
    found = shadow(1, NOW, {GPU: 0}, {GPU: 4}, [(NOW - 50, {GPU: 4}), (NOW + 10, {GPU: 1})])
    assert found.start == NOW and found.extra == {GPU: 0}  # an overrunning job: the head is about to fit
    tie = shadow(1, NOW, {GPU: 0}, {GPU: 4}, [(NOW + 10, {GPU: 4}), (NOW + 10, {GPU: 3})])
    assert tie.start == NOW + 10 and tie.extra == {GPU: 3}


def test_no_end_that_makes_room_means_no_start_and_no_backfill_by_duration():
    found = shadow(1, NOW, {GPU: 1}, {GPU: 4}, [(NOW + 10, {GPU: 1})])
    assert found.start == INF and found.allows(NOW, 1.0, {GPU: 1}) is None


# -- the default policy --------------------------------------------------------------------------


def test_short_jobs_backfill_behind_a_large_head_and_long_ones_wait_for_it():
    """Quota 8, 6 held until t+1000: the 8-GPU head starts at t+1000 at the earliest.
    A 2-GPU job of 500 s ends before then (backfilled); one of 5000 s would delay the head."""
    result = plan(snapshot([pending(1, 8, 3600), pending(2, 2, 5000), pending(3, 2, 500)], [running(9, 6, NOW + 1000)]))
    assert result.admitted == (3,)
    status = result.pending[2]
    assert status.reason is Reason.RESERVED_FOR_OLDER_JOB and status.detail["reserved_for"] == 1
    assert status.detail["shadow_start"] == NOW + 1000
    assert status.message == (
        "would fit, but would still hold requests.nvidia.com/gpu when job 1, ahead in "
        "team-a's queue, is expected to start (t=1001000)"
    )
    assert result.pending[1].reason is Reason.QUOTA_EXCEEDED and result.stats["backfilled"] == 1


def test_without_backfill_the_old_rule_lets_the_long_job_pass_the_fresh_head():
    result = plan(
        snapshot([pending(1, 8, 3600), pending(2, 2, 5000), pending(3, 2, 500)], [running(9, 6, NOW + 1000)]),
        get_policy("priority", backfill=False),
    )
    assert result.admitted == (2,)  # the first that fits; job 3 then finds the quota full


def test_a_job_with_no_estimate_may_use_only_quota_the_head_will_not_need():
    # The head needs 4 of 8; 2 free now, 6 back at t+100: extra = 4 at the shadow time.
    head, unknown = pending(1, 4, 3600), pending(2, 2, None)
    result = plan(snapshot([head, unknown], [running(9, 6, NOW + 100)]))
    assert result.admitted == (2,)
    # A head of 7 leaves 1 over at t+100: the 2-GPU job would have to end first, and nobody knows when.
    bigger = plan(snapshot([pending(1, 7, 3600), unknown], [running(9, 6, NOW + 100)]))
    assert bigger.admitted == () and bigger.pending[2].reason is Reason.RESERVED_FOR_OLDER_JOB


def test_after_the_hold_age_the_head_holds_its_quota_outright():
    jobs = [pending(1, 8, 3600, waited=13 * 3600), pending(2, 2, 500)]
    result = plan(snapshot(jobs, [running(9, 6, NOW + 1000)]))
    assert result.admitted == ()  # job 2 would end in time, but estimates no longer count
    assert result.pending[2].reason is Reason.RESERVED_FOR_OLDER_JOB
    younger = plan(snapshot([pending(1, 8, 3600, waited=7200), pending(2, 2, 500)], [running(9, 6, NOW + 1000)]))
    assert younger.admitted == (2,)  # two hours: still the shadow, which job 2 does not delay


def test_a_head_no_expected_end_makes_room_for_is_held_after_the_reservation_age():
    """Quota used by jobs the snapshot does not show: no shadow, the hour's rule as before."""
    head, small = pending(1, 8, 3600, waited=7200), pending(2, 2, 500)
    world = Snapshot(
        NOW, (head, small), node_fit=False, quotas={"team-a": NamespaceQuota("team-a", {GPU: 8}, {GPU: 6})}
    )
    assert plan(world).admitted == ()
    fresh = Snapshot(
        NOW,
        (pending(1, 8, 3600, waited=600), small),
        node_fit=False,
        quotas={"team-a": NamespaceQuota("team-a", {GPU: 8}, {GPU: 6})},
    )
    assert plan(fresh).admitted == (2,)


# -- properties --------------------------------------------------------------------------------


def earliest_fit(hard, need, holders):
    """The first time ``need`` fits under ``hard`` while each (end, amount) holds until max(end, NOW)."""
    for t in sorted({NOW, *(max(end, NOW) for end, _ in holders)}):
        if hard - sum(amount for end, amount in holders if max(end, NOW) > t) >= need:
            return t
    return INF


worlds = st.tuples(
    st.integers(4, 16),  # quota
    st.lists(st.tuples(st.integers(1, 4), st.floats(-3000, 5000)), max_size=5),  # running: GPUs, end - now
    st.lists(st.tuples(st.integers(1, 12), st.one_of(st.none(), st.floats(1, 8000))), min_size=1, max_size=8),
)


@SETTINGS
@given(worlds)
def test_backfill_never_delays_the_heads_start_under_the_estimates(world):
    hard, runs, jobs = world
    runs = [(count, end) for count, end in runs]
    while sum(count for count, _ in runs) > hard:
        runs.pop()
    run_jobs = [running(100 + i, count, NOW + end) for i, (count, end) in enumerate(runs)]
    waiting = [pending(i + 1, count, duration) for i, (count, duration) in enumerate(jobs)]
    result = plan(snapshot(waiting, run_jobs, hard))
    admitted = set(result.admitted)
    used = sum(count for count, _ in runs)
    assert used + sum(job.demand[GPU] for job in waiting if job.id in admitted) <= hard
    # The head: the first job in queue order (ids follow submission) that waits for quota.
    head = next(
        (job for job in waiting if job.id not in admitted and result.pending[job.id].reason is Reason.QUOTA_EXCEEDED),
        None,
    )
    if head is None:
        return
    holders = [(NOW + end, count) for count, end in runs]
    duration = {job.id: job.expected_duration for job in waiting}
    before = [
        (NOW + duration[job.id] if duration[job.id] else INF, job.demand[GPU])
        for job in waiting
        if job.id in admitted and job.id < head.id
    ]
    after = [
        (NOW + duration[job.id] if duration[job.id] else INF, job.demand[GPU])
        for job in waiting
        if job.id in admitted and job.id > head.id
    ]
    alone = earliest_fit(hard, head.demand[GPU], holders + before)
    if alone == INF:
        return  # no known end makes room: the head has no shadow to protect (until its hold)
    assert earliest_fit(hard, head.demand[GPU], holders + before + after) == alone


def stream(policy, seed, error, until):
    """One namespace of 8 GPUs kept busy by a stream of 1- and 2-GPU jobs whose estimates
    are off by ``error`` either way; an 8-GPU job waits from NOW.  Returns how long it
    waited, or None if it had not started by ``until`` seconds."""
    rng = random.Random(seed)
    step = 60.0
    head = PendingJob(0, "team-a", 0, NOW, gpus(8), expected_duration=3600.0)
    # The quota starts full: eight 1-GPU jobs ending over the first half hour.
    runs = [(-i, 1, NOW + 225.0 * i, NOW + 225.0 * i) for i in range(1, 9)]  # (id, GPUs, true end, expected end)
    queue, next_id = [], 1
    t = NOW
    while t <= NOW + until:
        runs = [entry for entry in runs if entry[2] > t]
        for _ in range(rng.randrange(0, 4)):
            true = rng.uniform(60, LONGEST)
            queue.append(
                (
                    PendingJob(
                        next_id,
                        "team-a",
                        0,
                        t,
                        gpus(rng.choice([1, 2])),
                        expected_duration=true * rng.choice([error, 1 / error]),
                    ),
                    true,
                )
            )
            next_id += 1
        run_jobs = [
            RunningJob(job_id, "team-a", gpus(count), t - 1, expected_end=end_estimate)
            for job_id, count, _, end_estimate in runs
        ]
        used = sum(count for _, count, _, _ in runs)
        world = Snapshot(
            t,
            (head, *(job for job, _ in queue)),
            running=tuple(run_jobs),
            node_fit=False,
            quotas={"team-a": NamespaceQuota("team-a", {GPU: 8}, {GPU: used})},
        )
        admitted = set(plan(world, policy).admitted)
        if 0 in admitted:
            return t - NOW
        for job, true in queue:
            if job.id in admitted:
                runs.append((job.id, job.demand[GPU], t + true, t + job.expected_duration))
        queue = [(job, true) for job, true in queue if job.id not in admitted]
        t += step
    return None


LONGEST = 1800.0  # the longest true duration in the stream


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.1, 0.5, 2.0, 10.0]))
def test_a_large_head_never_starves_behind_small_jobs_whatever_the_estimates(seed, error):
    """The head holds its quota outright from the hold age (an hour here, to keep the
    test short), so it starts at the latest once the jobs running then have ended: hold
    age + the longest true duration (+ one cycle), however wrong the estimates that let
    jobs backfill."""
    policy = get_policy("priority", hold_after_s=3600.0)
    bound = policy.hold_after_s + LONGEST + 60
    waited = stream(policy, seed, error, bound + 600)
    assert waited is not None and waited <= bound


def test_the_same_stream_without_a_reservation_starves_the_head_and_the_shadow_starts_it_sooner():
    """The bound above is the reservation's doing: with neither shadow nor hold the head
    never starts; with only the hold (the old default) it starts once the stream has
    drained from its quota after the hour; the shadow stops jobs that would delay it at once."""
    assert stream(get_policy("priority", backfill=False, reservation_after_s=None), 7, 2.0, 4 * 3600) is None
    held_only = stream(get_policy("priority", backfill=False), 7, 2.0, 4 * 3600)
    shadowed = stream(get_policy("priority", hold_after_s=3600.0), 7, 2.0, 4 * 3600)
    assert held_only >= 3600 and shadowed < 3600
