"""The tail bound lent nodes are admitted by (queueing/run_tails.py): per key, from its own
runs, by Laplace's rule; no bound until a key has runs enough; and on a stream that mixes
short failures with long runs, admitting by it keeps the share outrunning the slack near its
target where a conformal bound does not."""

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from queueing.predictor import DurationPredictor, JobFeatures
from queueing.run_tails import BUCKETS, RunTails, bucket_of, runs_needed, upper_edge
from tests.examples import examples

KEY = [("namespace", "team-a")]


def test_runs_needed_to_reach_a_share():
    assert runs_needed(0.99) == 98 and runs_needed(0.9) == 8 and runs_needed(0.5) == 0


def test_no_bound_until_the_key_has_runs_enough():
    tails = RunTails(10)
    for _ in range(97):
        tails.add(KEY, 60.0)
    assert tails.bound(KEY, 0.99) == math.inf
    tails.add(KEY, 60.0)
    assert tails.bound(KEY, 0.99) == upper_edge(bucket_of(60.0))  # (0 + 1) / 100 <= 1 %


def test_one_long_run_in_a_hundred_and_fifty_moves_the_bound_past_it():
    tails = RunTails(10)
    for _ in range(150):
        tails.add(KEY, 60.0)
    short = tails.bound(KEY, 0.99)
    tails.add(KEY, 36_000.0)
    # (1 + 1) / 153 > 1 %: the bound is past the long run
    assert short < 120 and tails.bound(KEY, 0.99) >= 36_000.0


def test_the_most_specific_key_with_runs_enough_answers_and_keys_are_capped():
    tails = RunTails(2)
    keys = [("user", "ann"), ("namespace", "team-a")]
    for _ in range(200):
        tails.add(keys, 30.0)
    for _ in range(200):
        tails.add([("namespace", "team-a")], 7200.0)
    assert tails.bound(keys, 0.99) < 60  # ann's own runs
    assert tails.bound([None, ("user", "bob"), ("namespace", "team-a")], 0.99) >= 7200
    for name in ("x", "y", "z"):
        tails.add([("user", name)], 1.0)
    assert len(tails.counts["user"]) == 2
    # The cluster's runs bound no one's tail.
    tails.add([("cluster", "")] * 1, 5.0)
    assert "cluster" not in tails.counts and tails.bound([("cluster", "")], 0.5) == math.inf


@settings(max_examples=examples(100), deadline=None)
@given(st.floats(0, 2**31, allow_nan=False))
def test_every_run_lands_in_the_bucket_whose_edges_hold_it(seconds):
    bucket = bucket_of(seconds)
    assert 0 <= bucket < BUCKETS
    if 1.0 < seconds <= upper_edge(BUCKETS - 1):
        assert upper_edge(bucket - 1) < seconds <= upper_edge(bucket) * (1 + 1e-12)


def test_on_mixed_keys_the_tail_bound_keeps_outruns_near_one_percent_and_the_conformal_one_does_not():
    """Two keys: 'steady' runs 20-40 min always; 'mixed' fails in a minute 90 % of the time and
    runs 2-100 h otherwise. A job is admitted with 10 h of slack if its bound fits; the share
    of admitted jobs that outrun the slack is what lent nodes lose."""
    rng = random.Random(35)
    predictor = DurationPredictor()
    admitted = {"tail": [0, 0], "conformal": [0, 0]}
    slack = 10 * 3600.0
    for step in range(8000):
        key = "steady" if step % 2 else "mixed"
        features = JobFeatures(key, kind="TFJob", gpus=1)
        if key == "steady":
            actual = rng.uniform(1200, 2400)
        else:
            actual = rng.uniform(30, 90) if rng.random() < 0.9 else rng.uniform(2, 100) * 3600
        prediction = predictor.predict(features)
        if step >= 2000 and prediction.tail_s is not None:
            for rule, bound in (("tail", prediction.tail_s), ("conformal", prediction.p90_s)):
                if bound is not None and bound <= slack:
                    admitted[rule][0] += 1
                    admitted[rule][1] += actual > slack
        predictor.observe(features, actual, prediction)
    tail_jobs, tail_lost = admitted["tail"]
    conformal_jobs, conformal_lost = admitted["conformal"]
    assert tail_jobs >= 2900  # every steady job goes there
    assert tail_lost / tail_jobs <= 0.01
    assert conformal_lost / conformal_jobs > 0.02  # it lets the mixed key's runs of days in
