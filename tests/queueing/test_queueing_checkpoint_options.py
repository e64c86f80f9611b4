"""What a job says of its checkpoints (issue 48), through job_options' one parser: the
annotations, the API's fields over them, every bad value at its own path, the admin's limits
refused (never cut to), and the checkpointed-at time."""

from datetime import UTC, datetime

import pytest

from queueing import ManifestError
from queueing.checkpoint_options import CheckpointLimits, checkpointed_at, words
from queueing.job_options import JobOptions, options_from_annotations, with_fields

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC).timestamp()
EVERY, NOTICE, MIN = (
    f'metadata.annotations["jobdash.io/{name}"]' for name in ("checkpoint-every", "checkpoint-on-notice", "min-runtime")
)


def errors(call):
    with pytest.raises(ManifestError) as caught:
        call()
    return {error.path: error.message for error in caught.value.errors}


def test_the_annotations_in_the_duration_syntax():
    options = options_from_annotations(
        {
            "jobdash.io/checkpoint-every": "10m",
            "jobdash.io/checkpoint-on-notice": "90s",
            "jobdash.io/min-runtime": "1h",
        },
        NOW,
    )
    assert (options.checkpoint_every_s, options.checkpoint_on_notice_s, options.min_runtime_s) == (600, 90, 3600)
    assert options_from_annotations({}, NOW) == JobOptions()  # none said: None each
    zero = options_from_annotations({"jobdash.io/checkpoint-on-notice": "0", "jobdash.io/min-runtime": "0s"}, NOW)
    assert (zero.checkpoint_on_notice_s, zero.min_runtime_s) == (0.0, 0.0)


def test_the_limits_at_their_edges_and_past_them():
    limits = CheckpointLimits(max_notice_s=300, max_min_runtime_s=1800)
    edge = options_from_annotations(
        {
            "jobdash.io/checkpoint-on-notice": "5m",
            "jobdash.io/min-runtime": "30m",
            "jobdash.io/checkpoint-every": "366d",
        },
        NOW,
        limits,
    )
    assert (edge.checkpoint_on_notice_s, edge.min_runtime_s, edge.checkpoint_every_s) == (300, 1800, 366 * 86400)
    found = errors(
        lambda: options_from_annotations(
            {
                "jobdash.io/checkpoint-on-notice": "301s",
                "jobdash.io/min-runtime": "31m",
                "jobdash.io/checkpoint-every": "367d",
            },
            NOW,
            limits,
        )
    )
    assert "JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS=300" in found[NOTICE] and "301s" in found[NOTICE]
    assert "JOBDASH_MAX_MIN_RUNTIME_SECONDS=1800" in found[MIN] and "31m" in found[MIN]
    assert "366d" in found[EVERY]


@pytest.mark.parametrize(
    ("name", "value", "path"),
    [
        ("checkpoint-every", "often", EVERY),
        ("checkpoint-every", "-5m", EVERY),
        ("checkpoint-on-notice", "soon", NOTICE),
        ("checkpoint-on-notice", "-1", NOTICE),
        ("min-runtime", "1 hour", MIN),
        ("min-runtime", "", MIN),
    ],
)
def test_bad_annotations_at_their_paths(name, value, path):
    found = errors(lambda: options_from_annotations({f"jobdash.io/{name}": value}, NOW))
    assert list(found) == [path] and "duration" in found[path]


def test_a_zero_interval_is_refused_with_one_message_on_every_path():
    def annotation(text):
        return errors(lambda: options_from_annotations({"jobdash.io/checkpoint-every": text}, NOW))[EVERY]

    def field(value):
        return errors(lambda: with_fields(JobOptions(), {"checkpoint_every": value}, NOW))["checkpoint_every"]

    said = [annotation(text) for text in ("0", "0s", "0m0s")] + [field(value) for value in (0, 0.0, "0", "0s")]
    assert {message.split(": ", 1)[1] for message in said} == {
        "must be more than 0 (a job that never checkpoints says nothing)"
    }


def test_every_bad_one_at_once():
    found = errors(
        lambda: options_from_annotations(
            {
                "jobdash.io/checkpoint-every": "x",
                "jobdash.io/checkpoint-on-notice": "1h",
                "jobdash.io/min-runtime": "3h",
            },
            NOW,
        )
    )
    assert set(found) == {EVERY, NOTICE, MIN}


def test_fields_over_the_annotations():
    base = options_from_annotations({"jobdash.io/checkpoint-every": "10m", "jobdash.io/min-runtime": "1h"}, NOW)
    options = with_fields(base, {"checkpoint_every": "1h30m", "checkpoint_on_notice": 120, "min_runtime": "0"}, NOW)
    assert (options.checkpoint_every_s, options.checkpoint_on_notice_s, options.min_runtime_s) == (5400, 120, 0)
    kept = with_fields(base, {"checkpoint_every": None}, NOW)  # null: the annotation's stays
    assert (kept.checkpoint_every_s, kept.min_runtime_s) == (600, 3600)


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"checkpoint_every": 0}, "checkpoint_every"),
        ({"checkpoint_every": "soon"}, "checkpoint_every"),
        ({"checkpoint_every": True}, "checkpoint_every"),
        ({"checkpoint_every": [600]}, "checkpoint_every"),
        ({"checkpoint_on_notice": "11m"}, "checkpoint_on_notice"),
        ({"checkpoint_on_notice": -1}, "checkpoint_on_notice"),
        ({"min_runtime": 7201}, "min_runtime"),
        ({"min_runtime": float("nan")}, "min_runtime"),
    ],
)
def test_bad_fields_at_their_paths(fields, path):
    assert list(errors(lambda: with_fields(JobOptions(), fields, NOW))) == [path]


def test_the_stored_shape_round_trips():
    options = with_fields(JobOptions(), {"checkpoint_every": "10m", "checkpoint_on_notice": "0s"}, NOW)
    assert JobOptions.from_json(options.to_json()) == options
    assert JobOptions.from_json({"after": []}).checkpoint_every_s is None  # stored before issue 48


def test_checkpointed_at():
    assert checkpointed_at("2025-06-01T12:00:00Z") == NOW
    assert checkpointed_at(" 2025-06-01T14:00:00.5+02:00 ") == NOW + 0.5
    for bad in ("yesterday", "2025-06-01", "2025-13-01T00:00:00Z", "1717243200"):
        with pytest.raises(ValueError):
            checkpointed_at(bad)


def test_words():
    assert [words(s) for s in (600, 5400, 90, 7200, 0.5)] == ["10m", "1h30m", "90s", "2h", "0.5s"]
