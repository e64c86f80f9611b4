"""next_trigger: until the moment it names, a plan that did nothing still does nothing.

This is what lets a dispatcher skip planning a world where nothing changed: the property
is checked on the planner itself, for every policy, at moments drawn up to the trigger.
"""

import dataclasses
import math

from hypothesis import assume, given
from hypothesis import strategies as st

from queueing import POLICY_NAMES, LentPool, PendingJob, PodSet, Snapshot, Workload, get_policy, next_trigger, plan

from .test_queueing_planner_properties import NOW, SETTINGS, snapshots

DAY = 86400.0
ONE_POD = Workload("TFJob", "kubeflow.org/v1", "j", None, (PodSet("Worker", 1, {"cpu": 1000}, {}, {}, (), ()),))


def idle(result) -> bool:
    return not (result.admissions or result.preemptions or result.resizes)


@st.composite
def worlds(draw):
    snapshot = draw(snapshots())
    # Worlds where nothing starts now but might later: backoffs that end within two hours,
    # submissions spread over a day (the policies' waits lie at 1, 6 and 12 hours).
    pending = tuple(
        dataclasses.replace(
            job,
            submitted_at=NOW - draw(st.floats(0, DAY)),
            backoff_until=NOW + draw(st.floats(1, 7200)) if draw(st.booleans()) else None,
        )
        for job in snapshot.pending
    )
    snapshot = dataclasses.replace(snapshot, pending=pending)
    if snapshot.nodes and draw(st.booleans()):  # some nodes lent until a reclaim within a day
        lent = frozenset(node.name for node in snapshot.nodes if draw(st.booleans()))
        pool = LentPool("night", lent, NOW + draw(st.floats(0, DAY)), draw(st.floats(0, 3600)))
        pending = tuple(
            dataclasses.replace(job, bound=draw(st.none() | st.floats(60, 2 * DAY))) for job in snapshot.pending
        )
        snapshot = dataclasses.replace(snapshot, lent=(pool,), pending=pending)
    return snapshot, draw(st.sampled_from(POLICY_NAMES))


@SETTINGS
@given(worlds(), st.floats(0, 1, exclude_max=True))
def test_a_plan_that_did_nothing_does_nothing_until_the_trigger(world, fraction):
    snapshot, name = world
    policy = get_policy(name)
    if not idle(plan(snapshot, policy, forecasts=False)):
        return
    trigger = next_trigger(snapshot, policy)
    assert trigger > snapshot.now
    later = snapshot.now + fraction * (min(trigger, snapshot.now + 3 * DAY) - snapshot.now)
    # (a fraction just below 1 of a second past 1e6 rounds to the trigger itself, where the
    # plan may act: the property is for every time strictly before it)
    assume(later < trigger)
    assert idle(plan(dataclasses.replace(snapshot, now=later), policy, forecasts=False))


def job(job_id, submitted, **kwargs):
    return PendingJob(job_id, "team-a", 0, submitted, ONE_POD, **kwargs)


def test_the_trigger_is_the_first_line_the_clock_crosses():
    policy = get_policy("priority")  # reserves after 1 h, holds after 12 h
    snapshot = Snapshot(NOW, (job(1, NOW - 3000), job(2, NOW - 10, backoff_until=NOW + 120)), (), (), {}, ())
    assert next_trigger(snapshot, policy) == NOW + 120  # job 2's backoff ends before job 1 has waited 1 h
    snapshot = dataclasses.replace(snapshot, pending=snapshot.pending[:1])
    assert next_trigger(snapshot, policy) == NOW + 600  # job 1 has waited an hour


def test_a_lent_pool_triggers_at_its_notice_and_where_a_tail_stops_fitting():
    policy = get_policy("fifo")  # no waits that matter
    pool = LentPool("night", frozenset({"n0"}), NOW + 7200, 1800)
    pending = (job(1, NOW - 10, bound=6000.0),)
    snapshot = Snapshot(NOW, pending, (), (), {}, (), lent=(pool,))
    assert next_trigger(snapshot, policy) == NOW + 1200  # 7200 - 6000: its tail no longer fits
    snapshot = dataclasses.replace(snapshot, pending=(job(1, NOW - 10, bound=60.0),))
    assert next_trigger(snapshot, policy) == NOW + 5400  # the notice begins
    assert next_trigger(dataclasses.replace(snapshot, lent=()), policy) == math.inf
