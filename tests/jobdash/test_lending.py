"""The lent pools a cycle plans with (dispatch/phases/lending.py) and who is told at a pool's notice
(dispatch/phases/reclaim.py): declared pools by their schedule, annotated nodes by their annotations."""

from datetime import UTC, datetime, time

import pytest

from jobdash.cluster import convert
from jobdash.dispatch.phases.active import ActiveJob
from jobdash.dispatch.phases.lending import lent_pools
from jobdash.dispatch.phases.reclaim import notices
from jobdash.jobs.models import LentPool as Declared
from jobdash.jobs.models import State
from queueing import LentPool, PodSet, Workload

NIGHT = datetime(2026, 11, 27, 23, 0, tzinfo=UTC).timestamp()
DAY = datetime(2026, 11, 27, 12, 0, tzinfo=UTC).timestamp()
RECLAIM = datetime(2026, 11, 28, 8, 0, tzinfo=UTC).timestamp()


def node(name, labels=None, annotations=None):
    return convert.node(
        {
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "status": {"allocatable": {"cpu": "8"}},
        }
    )


def declared(**fields):
    values = dict(name="night-a", node_selector={"pool": "night-a"}, kind="nightly", start=time(22), end=time(8))
    values.update(fields)
    return Declared(timezone="UTC", notice_seconds=1800, **values)


def test_a_declared_pool_is_lent_by_its_schedule_and_barred_between_nights():
    nodes = [node("n1", {"pool": "night-a"}), node("n2", {"pool": "night-a"}), node("d1", {"pool": "day"})]
    [pool] = lent_pools(nodes, [declared()], NIGHT)
    assert pool == LentPool("night-a", frozenset({"n1", "n2"}), RECLAIM, 1800.0, "UTC")
    [between] = lent_pools(nodes, [declared()], DAY)
    # not lent now: a pool whose reclaim is now, with no notice, bars everything on it
    assert (between.reclaim_at, between.notice_s) == (DAY, 0.0)
    assert lent_pools(nodes, [declared(node_selector={"pool": "none"})], NIGHT) == ()


def test_annotated_nodes_are_lent_until_their_annotation_says(settings):
    settings.JOBDASH_LENT_NOTICE_SECONDS = 600
    until = "2026-11-28T06:00:00Z"
    nodes = [
        node("a1", annotations={"jobdash.io/lent-until": until, "jobdash.io/lent-pool": "spare"}),
        node(
            "a2",
            annotations={
                "jobdash.io/lent-until": until,
                "jobdash.io/lent-pool": "spare",
                "jobdash.io/lent-notice-seconds": "60",
            },
        ),
        node("a3", annotations={"jobdash.io/lent-until": "tomorrow"}),  # no time: not lent, logged
    ]
    pools = lent_pools(nodes, [], NIGHT)
    reclaim = datetime(2026, 11, 28, 6, 0, tzinfo=UTC).timestamp()
    # one pool, lent until one time: its longest notice stands (nothing new starts from then on)
    assert [(p.name, p.nodes, p.reclaim_at, p.notice_s) for p in pools] == [
        ("spare", frozenset({"a1", "a2"}), reclaim, 600.0)
    ]
    later = node("a4", annotations={"jobdash.io/lent-until": "2026-11-28T07:00:00Z", "jobdash.io/lent-pool": "spare"})
    assert len({p.name for p in lent_pools([*nodes, later], [], NIGHT)}) == 2  # two times: two pools, named apart


def running(job_id, node, *, started, p90):
    workload = Workload("Job", "batch/v1", f"j{job_id}", "team-a", (PodSet("main", 1, {"cpu": 1000}, {}),))
    return ActiveJob(
        job_id,
        ("jobs.batch", "team-a", f"j{job_id}"),
        "Job",
        State.RUNNING,
        workload,
        (("main", 0, node),),
        started_at=started,
        predicted_p90_s=p90,
    )


@pytest.mark.parametrize("now", [RECLAIM - 1800, RECLAIM - 60])
def test_at_the_notice_the_jobs_that_will_not_finish_are_told_and_those_that_will_are_not(now):
    pool = LentPool("night-a", frozenset({"n1"}), RECLAIM, 1800.0)
    finishing = running(1, "n1", started=now - 600, p90=650)  # done 50 s from now at the latest
    staying = running(2, "n1", started=now - 600, p90=36000)
    unknown = running(3, "n1", started=now - 600, p90=None)
    elsewhere = running(4, "d1", started=now - 600, p90=36000)
    told = {(job.id, leave) for job, _, leave, _, _ in notices([pool], [finishing, staying, unknown, elsewhere], now)}
    assert told == {(2, RECLAIM), (3, RECLAIM)}
    assert notices([pool], [staying], RECLAIM - 1801) == []  # before the notice: nobody


def test_at_the_reclaim_whatever_is_still_there_leaves_at_once():
    pool = LentPool("night-a", frozenset({"n1"}), RECLAIM, 1800.0)
    late = running(1, "n1", started=RECLAIM - 900, p90=600)  # predicted done, still running
    [(job, _, leave, words, _)] = notices([pool], [late], RECLAIM + 5)
    assert (job.id, leave) == (1, RECLAIM + 5) and "was reclaimed at 08:00" in words


def test_an_elastic_job_shrinks_off_a_pool_only_if_its_pods_there_are_its_highest_numbered_extras():
    from dataclasses import replace

    from jobdash.dispatch.phases.reclaim import extras_on

    elastic = PodSet("Worker", 4, {"cpu": 1000}, {}, minimum=1, maximum=4)
    job = running(1, "d1", started=NIGHT, p90=None)
    job = replace(job, workload=replace(job.workload, pod_sets=(elastic,)))
    on = lambda *nodes: replace(job, placement=tuple(("Worker", i, n) for i, n in enumerate(nodes)))  # noqa: E731
    assert extras_on(on("d1", "n1", "n1", "n1"), frozenset({"n1"})) == {"Worker": 1}
    assert extras_on(on("n1", "d1", "d1", "d1"), frozenset({"n1"})) is None  # worker 0 is no extra the operator drops
    assert extras_on(on("n1", "n1", "n1", "n1"), frozenset({"n1"})) is None  # it would run below its minimum
    assert extras_on(on("d1", "d1", "d1", "d1"), frozenset({"n1"})) is None  # nothing there
