"""Usage from timelines (issue 37): runs, days, sums and decay; folding a timeline in any
batches, stopped and resumed anywhere (a failover), sums to what the runs give directly."""

import json
from datetime import UTC, date, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueing.cluster_request import released_words
from queueing.usage import (
    ENDS,
    Amounts,
    Run,
    UsageKey,
    cluster_at,
    decayed,
    resources,
    runs_from_events,
    scaled_requests,
    split_by_day,
    summarize,
)
from tests.examples import examples

# Two hours before the end of January: runs cross midnights and the month's end.
T0 = datetime(2026, 1, 31, 22, 0, tzinfo=UTC).timestamp()


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_split_by_day_cuts_at_utc_midnights_and_the_month_end():
    parts = split_by_day(at("2026-01-31T23:00:00"), at("2026-02-02T01:30:00"))
    assert parts == [(date(2026, 1, 31), 3600.0), (date(2026, 2, 1), 86400.0), (date(2026, 2, 2), 5400.0)]
    assert split_by_day(10.0, 10.0) == []
    assert split_by_day(at("2026-03-01T00:00:00"), at("2026-03-01T00:00:01")) == [(date(2026, 3, 1), 1.0)]


def test_a_run_ends_at_the_next_end_event_and_an_unended_one_stays_open():
    events = [
        (1, "Submitted", 0.0, None),
        (1, "Running", 10.0, None),
        (2, "Running", 15.0, None),
        (1, "Preempting", 20.0, None),  # still running through its grace period
        (1, "Preempted", 30.0, None),
        (1, "Cancelled", 35.0, None),  # not running: no run ends
        (3, "Running", 40.0, None),
        (3, "Succeeded", 100.0, None),
    ]
    closed, still_open = runs_from_events(events)
    assert closed == [(1, 10.0, 30.0, None), (3, 40.0, 100.0, None)]
    assert still_open == {2: (15.0, None)}
    closed, still_open = runs_from_events([(2, "Retrying", 50.0, None)], still_open)
    assert closed == [(2, 15.0, 50.0, None)] and still_open == {}


def test_an_elastic_run_is_cut_at_each_resize_and_billed_for_the_pods_it_ran():
    """Admitted with 3 of its 6 Workers (2 GPUs each), grown to 6, shrunk to 4: each stretch
    at its own size, not the 12 GPUs written."""
    events = [
        (1, "Running", 0.0, {"Worker": 3}),
        (1, "Resized", 100.0, {"Worker": 6}),
        (1, "Shrinking", 150.0, None),  # told, still at 6
        (1, "Shrunk", 160.0, {"Worker": 4}),
        (1, "Succeeded", 200.0, None),
    ]
    closed, still_open = runs_from_events(events)
    assert still_open == {}
    assert closed == [
        (1, 0.0, 100.0, {"Worker": 3}),
        (1, 100.0, 160.0, {"Worker": 6}),
        (1, 160.0, 200.0, {"Worker": 4}),
    ]
    workload = {
        "requests": {"nvidia.com/gpu": 12, "cpu": 6_000},
        "pod_sets": [{"role": "Worker", "count": 6, "requests": {"nvidia.com/gpu": 2, "cpu": 1_000}}],
    }
    gpus = [resources(scaled_requests(workload, scale))[0] * (end - start) for _, start, end, scale in closed]
    assert gpus == [6 * 100.0, 12 * 60.0, 8 * 40.0]
    assert scaled_requests(workload, None) == {"nvidia.com/gpu": 12.0, "cpu": 6_000.0}
    assert scaled_requests(workload, {"Launcher": 1}) == {"nvidia.com/gpu": 12.0, "cpu": 6_000.0}  # no such role


def test_summarize_counts_gpus_cores_and_gib_per_day_and_label():
    run = Run(7, at("2026-01-31T23:00:00"), at("2026-02-01T01:00:00"), 2, 4000, 2**31, "a", "ann", "K", "hi", True)
    totals = summarize([run])
    assert totals == {
        UsageKey(date(2026, 1, 31), "a", "ann", "K", "hi", True): Amounts(7200.0, 14400.0, 7200.0),
        UsageKey(date(2026, 2, 1), "a", "ann", "K", "hi", True): Amounts(7200.0, 14400.0, 7200.0),
    }


def test_a_run_is_billed_to_the_cluster_it_ran_in():
    run = Run(7, at("2026-01-31T23:00:00"), at("2026-01-31T23:30:00"), 1, 0, 0, "a", "ann", "K", "", False, "west")
    assert list(summarize([run])) == [UsageKey(date(2026, 1, 31), "a", "ann", "K", "", False, "west")]
    # the cluster the last release at or before its start names; none named: the job's cluster now
    releases = [(10.0, "east"), (20.0, None), (30.0, "west"), (40.0, "")]
    assert [cluster_at(releases, start, "now") for start in (5.0, 10.0, 15.0, 25.0, 35.0, 45.0)] == [
        "now",
        "east",
        "east",
        "now",
        "west",
        "",
    ]


def test_a_run_ends_when_its_cluster_is_lost_and_the_next_is_another_run():
    events = [(1, "Running", 10.0, None), (1, "ClusterLost", 50.0, None), (1, "Running", 80.0, None)]
    closed, still_open = runs_from_events(events)
    assert closed == [(1, 10.0, 50.0, None)] and still_open == {1: (80.0, None)}


def test_a_released_events_words_name_its_cluster():
    assert released_words("west") == "cluster west" and released_words("") == "the cluster"


def test_resources_sum_every_gpu_resource():
    assert resources({"cpu": 1500, "memory": 2**30, "nvidia.com/gpu": 2, "amd.com/gpu": 1, "pods": 3}) == (
        3.0,
        1500.0,
        float(2**30),
    )


def test_decay_halves_each_half_life():
    today = date(2026, 2, 15)
    assert decayed({today: 100.0}, today, 7) == 100.0
    assert decayed({date(2026, 2, 8): 100.0}, today, 7) == pytest.approx(50.0)
    assert decayed({date(2026, 2, 1): 100.0, date(2026, 2, 8): 100.0}, today, 7) == pytest.approx(75.0)
    assert decayed({date(2026, 2, 1): 100.0}, today, 0) == 100.0


LABELS = st.tuples(
    st.sampled_from(["team-a", "team-b", "team-c"]),
    st.sampled_from(["ann", "bob"]),
    st.sampled_from(["K1", "K2"]),
    st.sampled_from(["", "high"]),
    st.booleans(),
)
# One stretch of a job's life: waits `gap` s, runs `length` s, then ends with `end` (None: it
# still runs, the last stretch), with events that do not end a run sprinkled in; `resized`:
# an elastic job admitted with one of its two pods, grown to two halfway.
STRETCH = st.tuples(
    st.integers(0, 20_000), st.integers(0, 3 * 86_400), st.sampled_from(sorted(ENDS)), st.booleans(), st.booleans()
)
JOB = st.tuples(
    LABELS,
    st.tuples(st.integers(0, 4), st.integers(0, 64_000), st.integers(0, 2**38)),
    st.lists(STRETCH, max_size=4),
    st.booleans(),  # still running at the end
)


def histories(jobs):
    """The interleaved timeline (job id, type, time, scale) and the runs each job really had
    (job id, start, end, scale)."""
    events, runs = [], []
    for job_id, (_labels, _amounts, stretches, running) in enumerate(jobs, start=1):
        t = T0 + job_id * 37
        events.append((job_id, "Submitted", t, None))
        for gap, length, end, noise, resized in stretches:
            if noise:
                events.append((job_id, "Cancelled", t + gap / 2, None))  # an end with no run: counts nothing
            t += gap
            if resized:
                events.append((job_id, "Running", t, HALF))
                events.append((job_id, "Resized", t + length // 2, WHOLE))
                runs += [(job_id, t, t + length // 2, HALF), (job_id, t + length // 2, t + length, WHOLE)]
            else:
                events.append((job_id, "Running", t, None))
                runs.append((job_id, t, t + length, None))
            if noise:
                events.append((job_id, "Preempting", t + length / 2, None))
            events.append((job_id, end, t + length, None))
            t += length
        if running:
            t += 60
            events.append((job_id, "Running", t, HALF))
            runs.append((job_id, t, None, HALF))
    # Time order, a job's own events in the order written (ties: as the ids would be).
    order = sorted(range(len(events)), key=lambda i: (events[i][2], i))
    return [events[i] for i in order], runs


HALF, WHOLE = {"W": 1}, {"W": 2}


def as_run(jobs, job_id, start, end, scale):
    """A job of two pods "W", each asking its amounts."""
    (namespace, user, kind, pc, borrowed), (gpus, cpu_m, memory_b), _, _ = jobs[job_id - 1]
    pod = {"nvidia.com/gpu": gpus, "cpu": cpu_m, "memory": memory_b}
    workload = {
        "requests": {k: 2 * v for k, v in pod.items()},
        "pod_sets": [{"role": "W", "count": 2, "requests": pod}],
    }
    gpus, cpu_m, memory_b = resources(scaled_requests(workload, scale))
    return Run(job_id, start, end, gpus, cpu_m, memory_b, namespace, user, kind, pc, borrowed)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=st.lists(JOB, max_size=12), cuts=st.lists(st.integers(1, 8), max_size=40), data=st.data())
def test_folding_in_any_batches_with_failovers_equals_the_direct_sum(jobs, cuts, data):
    events, real_runs = histories(jobs)
    now = (max((e[2] for e in events), default=T0)) + data.draw(st.integers(0, 2 * 86_400))
    # The fold: batches of random sizes; after each, only what a fold persists survives (the
    # totals, the open runs as JSON, the mark), as when the next batch is another process's.
    totals: dict[UsageKey, Amounts] = {}
    persisted_open = "{}"
    mark = 0
    for size in [*cuts, len(events)]:
        batch = events[mark : mark + size]
        open_runs = {int(k): tuple(v) for k, v in json.loads(persisted_open).items()}
        closed, open_runs = runs_from_events(batch, open_runs)
        for key, amounts in summarize(as_run(jobs, *run) for run in closed).items():
            totals[key] = totals.get(key, Amounts()) + amounts
        persisted_open, mark = json.dumps(open_runs), mark + len(batch)
    assert mark == len(events)
    open_runs = {int(k): tuple(v) for k, v in json.loads(persisted_open).items()}
    assert open_runs == {job_id: (start, scale) for job_id, start, end, scale in real_runs if end is None}
    # What a read adds: the open runs up to now.
    reads = (as_run(jobs, job_id, start, now, scale) for job_id, (start, scale) in open_runs.items())
    for key, amounts in summarize(reads).items():
        totals[key] = totals.get(key, Amounts()) + amounts

    direct = summarize(
        as_run(jobs, job_id, start, now if end is None else end, scale) for job_id, start, end, scale in real_runs
    )
    assert {k for k, v in totals.items() if v != Amounts()} == {k for k, v in direct.items() if v != Amounts()}
    for key, amounts in direct.items():
        got = totals.get(key, Amounts())
        assert got.gpu_s == amounts.gpu_s  # whole GPUs times whole seconds: exact
        assert got.cpu_s == pytest.approx(amounts.cpu_s, rel=1e-12, abs=1e-9)
        assert got.memory_gib_s == pytest.approx(amounts.memory_gib_s, rel=1e-12, abs=1e-9)
