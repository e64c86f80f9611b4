"""queueing.predictor: online duration predictions with a calibrated late bound."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queueing.predictor import LEVELS, SOURCES, DurationPredictor, JobFeatures, Prediction, name_tokens
from tests.examples import examples

features_st = st.builds(
    JobFeatures,
    namespace=st.sampled_from(["team-a", "team-b", "team-c"]),
    submitter=st.sampled_from(["", "alice", "bob"]),
    kind=st.sampled_from(["TFJob", "PyTorchJob", ""]),
    name=st.sampled_from(["", "bert-large-ft-lr3e-4-run7", "bert-large-ft-run8", "resnet50-x7k2p", "12345", "-"]),
    gpus=st.integers(0, 16),
    pods=st.integers(1, 4),
    stated_s=st.one_of(
        st.none(),
        st.floats(min_value=0.001, max_value=1e6),
        st.sampled_from([0.0, -5.0, math.nan, math.inf]),
    ),
)
seconds_st = st.one_of(
    st.floats(min_value=0.0, max_value=1e7),
    st.sampled_from([-1.0, math.nan, math.inf, 0.5]),
)
stream_st = st.lists(st.tuples(features_st, seconds_st), max_size=60)
small_predictor_st = st.builds(
    DurationPredictor,
    runs_per_key=st.integers(1, 5),
    max_keys=st.integers(1, 4),
    min_samples=st.integers(1, 4),
    calibration_window=st.integers(1, 30),
)


def check(prediction: Prediction) -> None:
    assert prediction.source in SOURCES
    if prediction.source == "none":
        assert prediction.median_s is None and prediction.p90_s is None and prediction.tail_s is None
        return
    assert prediction.median_s is not None and prediction.p90_s is not None and prediction.tail_s is not None
    # (the tail is inf while no key has runs enough to bound it: run_tails.py)
    assert 0 <= prediction.median_s <= prediction.p90_s <= prediction.tail_s
    assert prediction.samples >= 0


# -- properties -----------------------------------------------------------------------


@settings(max_examples=examples(150), deadline=None)
@given(predictor=small_predictor_st, stream=stream_st, probes=st.lists(features_st, min_size=1, max_size=5))
def test_never_negative_p90_at_least_median_and_never_raises(predictor, stream, probes):
    for features, seconds in stream:
        prediction = predictor.predict(features)
        check(prediction)
        predictor.observe(features, seconds, prediction if len(stream) % 2 else None)
    for features in probes:
        check(predictor.predict(features))


@settings(max_examples=examples(100), deadline=None)
@given(stream=stream_st)
def test_unseen_features_fall_back_and_say_from_where(stream):
    predictor = DurationPredictor()
    for features, seconds in stream:
        predictor.observe(features, seconds)
    unseen = JobFeatures("never-seen", submitter="carol", kind="MPIJob", name="unseen-model", gpus=99, pods=13)
    prediction = predictor.predict(unseen)
    check(prediction)
    if predictor.observed:
        assert prediction.source == "cluster" and prediction.samples == min(predictor.observed, 20)
    else:
        assert prediction == Prediction(None, None, "none", 0)
    stated = predictor.predict(JobFeatures("never-seen", stated_s=600.0))
    assert stated.source == "stated" and stated.median_s == pytest.approx(600.0)


@settings(max_examples=examples(150), deadline=None)
@given(
    features=features_st.map(lambda f: JobFeatures(f.namespace, f.submitter, f.kind, f.name, f.gpus, f.pods)),
    runs_per_key=st.integers(1, 6),
    min_samples=st.integers(1, 4),
    history=st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=4, max_size=12),
    factors=st.lists(st.floats(min_value=1.001, max_value=100.0), min_size=1, max_size=20),
)
def test_runs_longer_than_the_median_never_lower_it(features, runs_per_key, min_samples, history, factors):
    predictor = DurationPredictor(runs_per_key=runs_per_key, min_samples=min_samples, max_keys=3)
    for seconds in history:
        predictor.observe(features, seconds)
    before = predictor.predict(features)
    assert before.median_s is not None
    for factor in factors:
        predictor.observe(features, before.median_s * factor)
        after = predictor.predict(features)
        assert after.source == before.source  # the same key answers
        assert after.median_s is not None and after.median_s >= before.median_s
        before = after


@settings(max_examples=examples(60), deadline=None)
@given(stream=stream_st, probes=st.lists(features_st, min_size=1, max_size=5))
def test_the_same_stream_gives_the_same_predictions(stream, probes):
    def replay() -> list[Prediction]:
        predictor = DurationPredictor(max_keys=3, runs_per_key=4, calibration_window=10)
        made = []
        for features, seconds in stream:
            made.append(predictor.predict(features))
            predictor.observe(features, seconds, made[-1])
        return made + [predictor.predict(features) for features in probes]

    first, second = replay(), replay()
    assert repr(first) == repr(second)  # repr: NaN-free, and equal floats print alike


@settings(max_examples=examples(150), deadline=None)
@given(predictor=small_predictor_st, stream=stream_st)
def test_memory_stays_within_the_caps(predictor, stream):
    for features, seconds in stream:
        predictor.observe(features, seconds, predictor.predict(features))
        for table in (*predictor.history.values(), predictor.stated_user, predictor.stated_namespace):
            assert len(table.windows) <= predictor.max_keys
            assert all(len(window) <= predictor.runs_per_key for window in table.windows.values())
        for window in (*predictor.residuals.values(), predictor.all_residuals):
            assert len(window) <= predictor.calibration_window
            assert len(window.ordered) == len(window.order)
    assert predictor.key_count() <= (2 * len(LEVELS) + 2) * predictor.max_keys
    assert predictor.max_runs_held() <= max(predictor.runs_per_key, predictor.calibration_window)


@pytest.mark.parametrize("sigma", [0.5, 1.5])
def test_late_bound_covers_about_90_percent_of_a_lognormal_stream(sigma):
    rng = random.Random(20211114)
    predictor = DurationPredictor()
    keys = [JobFeatures(f"team-{i}", kind="TFJob", gpus=1) for i in range(3)]
    centres = [math.log(60), math.log(1800), math.log(7200)]
    hits, tail_hits = [], []
    for step in range(6000):
        which = step % 3
        features = keys[which]
        actual = rng.lognormvariate(centres[which], sigma)
        prediction = predictor.predict(features)
        if step >= 3000:
            assert prediction.p90_s is not None and prediction.tail_s is not None
            hits.append(actual <= prediction.p90_s)
            tail_hits.append(actual <= prediction.tail_s)
        predictor.observe(features, actual, prediction)
    coverage = sum(hits) / len(hits)
    assert 0.85 <= coverage <= 0.95, coverage
    # The tail bound (what lent nodes are admitted by) covers 99 %.
    tail = sum(tail_hits) / len(tail_hits)
    assert 0.975 <= tail <= 1.0 and sum(not hit for hit in tail_hits) >= 5, tail


# -- examples ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tokens"),
    [
        ("bert-large-ft-lr3e-4-run7", ("bert", "large", "ft")),
        ("resnet50-imagenet-x7k2p", ("resnet50", "imagenet")),
        ("katib-random-kx7b9qzl", ("katib", "random")),
        ("gpt2-medium-20240105-bs256", ("gpt2", "medium")),
        ("llama-7b-sft-seed3-v2", ("llama", "7b", "sft")),
        ("Job_1699999999.trial12", ("job",)),
        ("a1b2c3d4e5-train-train", ("train",)),
        ("", ()),
        ("123-456", ()),
    ],
)
def test_name_tokens_keep_what_the_job_is_not_which_run(name, tokens):
    assert name_tokens(name) == tokens


def test_most_specific_history_with_enough_runs_answers():
    predictor = DurationPredictor(min_samples=2)
    assert predictor.predict(JobFeatures("team-a")) == Prediction(None, None, "none", 0)
    bert = JobFeatures("team-a", "alice", "TFJob", "bert-large-run1", gpus=8, pods=1)
    for seconds in (3600.0, 4000.0, 3800.0):
        predictor.observe(JobFeatures("team-a", "alice", "TFJob", "bert-large-run0", gpus=8), seconds)
    for seconds in (60.0, 90.0):
        predictor.observe(JobFeatures("team-a", "alice", "TFJob", "debug-run0", gpus=1), seconds)
    answer = predictor.predict(bert)
    assert answer.source == "user+name" and answer.median_s == pytest.approx(3800.0) and answer.samples == 3
    assert predictor.predict(JobFeatures("team-a", "bob", "TFJob", "bert-large-run2")).source == "name"
    assert predictor.predict(JobFeatures("team-a", "alice", "TFJob", "gpt-run2", gpus=4)).source == "user"
    anonymous = predictor.predict(JobFeatures("team-a", kind="TFJob", gpus=8, pods=1))
    assert anonymous.source == "namespace+shape" and anonymous.median_s == pytest.approx(3800.0)
    assert predictor.predict(JobFeatures("team-a", kind="TFJob", gpus=2)).source == "namespace"
    assert predictor.predict(JobFeatures("team-b", kind="TFJob", gpus=1)).source == "shape"
    assert predictor.predict(JobFeatures("team-b", kind="JAXJob", gpus=3)).source == "cluster"


def test_stated_expectations_are_corrected_by_their_record():
    predictor = DurationPredictor()
    for _ in range(5):  # alice's jobs run three times what she states; bob's as stated
        predictor.observe(JobFeatures("team-a", "alice", stated_s=600.0), 1800.0)
        predictor.observe(JobFeatures("team-a", "bob", stated_s=600.0), 600.0)
    alice = predictor.predict(JobFeatures("team-a", "alice", stated_s=1000.0))
    assert alice.source == "stated+user" and alice.median_s == pytest.approx(3000.0)
    bob = predictor.predict(JobFeatures("team-a", "bob", stated_s=1000.0))
    assert bob.source == "stated+user" and bob.median_s == pytest.approx(1000.0)
    carol = predictor.predict(JobFeatures("team-a", "carol", stated_s=1000.0))
    assert carol.source == "stated+namespace" and carol.median_s == pytest.approx(1000.0)  # the lower median
    stranger = predictor.predict(JobFeatures("team-b", stated_s=1000.0))
    assert stranger.source == "stated" and stranger.median_s == pytest.approx(1000.0)
    assert stranger.p90_s is not None and stranger.p90_s >= stranger.median_s
    # a statement that is no duration is ignored: history answers
    assert predictor.predict(JobFeatures("team-a", "alice", stated_s=math.nan)).source == "user"


def test_bad_settings_are_refused():
    for settings_ in ({"runs_per_key": 0}, {"max_keys": 0}, {"min_samples": 0}, {"calibration_window": 0}):
        with pytest.raises(ValueError):
            DurationPredictor(**settings_)
    for coverage in (0.0, 1.0):
        with pytest.raises(ValueError):
            DurationPredictor(coverage=coverage)
        with pytest.raises(ValueError):
            DurationPredictor(tail_coverage=coverage)


# -- a running job's likely whole duration ---------------------------------------------------


@settings(max_examples=examples(80), deadline=None)
@given(stream_st, features_st, st.floats(min_value=0.0, max_value=1e7), st.floats(min_value=1.0, max_value=1e6))
def test_likely_total_is_past_the_elapsed_time_and_grows_with_it(stream, features, elapsed, more):
    predictor = DurationPredictor(min_samples=1)
    for seen, seconds in stream:
        predictor.observe(seen, seconds)
    total = predictor.likely_total(features, elapsed)
    later = predictor.likely_total(features, elapsed + more)
    if total is None:
        assert later is None and predictor.predict(features).source == "none"
        return
    assert total >= elapsed and later is not None and later >= elapsed + more
    assert later >= total  # monotone: running longer never makes the job look shorter


def test_likely_total_is_the_median_of_the_longer_runs_then_as_long_again():
    predictor = DurationPredictor(min_samples=3)
    job = JobFeatures("team-a", gpus=1)
    for seconds in (60, 120, 600, 3600, 36000):
        predictor.observe(job, seconds)
    assert predictor.likely_total(job, 0) == pytest.approx(600)  # nothing run yet: the median
    assert predictor.likely_total(job, 500) == pytest.approx(3600)  # of 600, 3600, 36000
    assert predictor.likely_total(job, 4000) == pytest.approx(36000)  # one longer run: no ceiling,
    assert predictor.likely_total(job, 30000) == pytest.approx(60000)  # so at least as long again
    assert predictor.likely_total(job, 50000) == pytest.approx(100000)  # past every run on record
    stated = JobFeatures("team-b", stated_s=1800)
    assert predictor.likely_total(stated, 600) == pytest.approx(1800)
    assert predictor.likely_total(stated, 2000) == pytest.approx(4000)
    assert DurationPredictor().likely_total(JobFeatures("x"), 100) is None


def test_features_of_a_workload():
    from queueing import PodSet, Workload

    workload = Workload(
        "PyTorchJob",
        "kubeflow.org/v1",
        "bert-large-run7",
        "team-a",
        (PodSet("Master", 1, {"nvidia.com/gpu": 2}), PodSet("Worker", 3, {"nvidia.com/gpu": 2})),
        annotations={"jobdash.io/expected-duration": "1h30m"},
    )
    features = JobFeatures.of(workload, "team-a", "alice")
    assert features == JobFeatures("team-a", "alice", "PyTorchJob", "bert-large-run7", 8, 4, 5400.0)
