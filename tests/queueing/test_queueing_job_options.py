"""Job options from annotations and API fields: one parser, every bad value at its own path."""

from datetime import UTC, datetime

import pytest

from queueing import ManifestError
from queueing.job_options import (
    DEFAULT_RETRY_ON,
    Dependency,
    JobOptions,
    RetryPolicy,
    options_from_annotations,
    parse_after,
    with_fields,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC).timestamp()


def annotation(name):
    return f'metadata.annotations["jobdash.io/{name}"]'


def errors(call):
    with pytest.raises(ManifestError) as caught:
        call()
    return {error.path: error.message for error in caught.value.errors}


def test_no_annotations_give_the_defaults():
    options = options_from_annotations({"other.io/x": "y"}, NOW)
    assert options == JobOptions()
    assert options.retry == RetryPolicy(limit=3, on=DEFAULT_RETRY_ON, exit_codes=frozenset(), backoff_s=30.0)
    assert DEFAULT_RETRY_ON == {"NodeLost", "Evicted", "Preempted"}


def test_parse_after():
    assert parse_after("ok:train-1", "p") == (Dependency("ok", "train-1"),)
    assert parse_after(" any:42 , notok:prep,train-2 ", "p") == (
        Dependency("any", "42"),
        Dependency("notok", "prep"),
        Dependency("ok", "train-2"),
    )
    assert parse_after("", "p") == ()


@pytest.mark.parametrize("text", ["sometimes:train-1", "ok:", "ok:Train_1", "always:42", "ok:a,,ok:b", "ok:-x"])
def test_parse_after_refuses(text):
    with pytest.raises(ManifestError) as caught:
        parse_after(text, "p")
    assert caught.value.errors[0].path == "p"
    assert "is not a dependency: use ok:NAME, any:NAME or notok:NAME (NAME a job name or id)" in str(caught.value)


def test_the_message_quotes_the_bad_item():
    assert parse_after("sometimes", "p") == (Dependency("ok", "sometimes"),)  # a bare name is ok:NAME
    assert errors(lambda: parse_after("sometimes:x", "p")) == {
        "p": '"sometimes:x" is not a dependency: use ok:NAME, any:NAME or notok:NAME (NAME a job name or id)'
    }


def test_dependencies_named_twice_or_too_many():
    assert "named twice" in errors(lambda: parse_after("ok:a,any:a", "p"))["p"]
    many = ",".join(f"j{i}" for i in range(65))
    assert "at most 64" in errors(lambda: parse_after(many, "p"))["p"]
    assert len(parse_after(",".join(f"j{i}" for i in range(64)), "p")) == 64


def test_every_annotation():
    options = options_from_annotations(
        {
            "jobdash.io/after": "ok:prep,any:17",
            "jobdash.io/keep-if-never-satisfied": "true",
            "jobdash.io/retry-limit": "5",
            "jobdash.io/retry-on": "NodeLost, oomkilled",
            "jobdash.io/retry-exit-codes": "3,42",
            "jobdash.io/retry-backoff": "1m",
            "jobdash.io/max-run-time": "2h",
            "jobdash.io/start-by": "2025-06-01T18:00:00Z",
        },
        NOW,
    )
    assert options == JobOptions(
        after=(Dependency("ok", "prep"), Dependency("any", "17")),
        keep_if_never=True,
        retry=RetryPolicy(
            limit=5, on=frozenset({"NodeLost", "OOMKilled"}), exit_codes=frozenset({3, 42}), backoff_s=60
        ),
        max_run_s=7200,
        start_by=NOW + 6 * 3600,
    )


def test_start_by_as_a_duration_and_with_an_offset():
    assert options_from_annotations({"jobdash.io/start-by": "90m"}, NOW).start_by == NOW + 5400
    at = options_from_annotations({"jobdash.io/start-by": "2025-06-01T16:00:00+02:00"}, NOW).start_by
    assert at == NOW + 2 * 3600 and at == datetime(2025, 6, 1, 14, tzinfo=UTC).timestamp()


def test_every_bad_annotation_at_once():
    found = errors(
        lambda: options_from_annotations(
            {
                "jobdash.io/after": "sometimes:x",
                "jobdash.io/keep-if-never-satisfied": "yes",
                "jobdash.io/retry-limit": "101",
                "jobdash.io/retry-on": "NodeLost,Flaky",
                "jobdash.io/retry-exit-codes": "0,256,3",
                "jobdash.io/retry-backoff": "2h",
                "jobdash.io/max-run-time": "367d",
                "jobdash.io/start-by": "tomorrow",
            },
            NOW,
        )
    )
    assert set(found) == {
        annotation(name)
        for name in (
            "after",
            "keep-if-never-satisfied",
            "retry-limit",
            "retry-on",
            "retry-exit-codes",
            "retry-backoff",
            "max-run-time",
            "start-by",
        )
    }
    assert found[annotation("keep-if-never-satisfied")] == '"yes" is not true or false'
    assert found[annotation("retry-limit")] == '"101" is not a number of retries: use a whole number from 0 to 100'
    assert found[annotation("retry-on")].startswith('"Flaky" is not a failure class: use NodeLost, Evicted, Preempted')
    assert '"0" is not an exit code' in found[annotation("retry-exit-codes")]
    assert '"256" is not an exit code' in found[annotation("retry-exit-codes")]
    assert "up to 1h" in found[annotation("retry-backoff")]
    assert "up to 366d" in found[annotation("max-run-time")]
    assert "RFC 3339" in found[annotation("start-by")]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retry-limit", "-1"),
        ("retry-limit", "2.5"),
        ("retry-on", "DeadlineExceeded"),
        ("max-run-time", "0"),
        ("max-run-time", "soon"),
        ("start-by", "2025-06-01T11:00:00Z"),  # already past
        ("start-by", "2025-06-01T18:00:00"),  # no offset: not RFC 3339
        ("start-by", "2025-06-01"),
    ],
)
def test_bad_values(name, value):
    assert annotation(name) in errors(lambda: options_from_annotations({f"jobdash.io/{name}": value}, NOW))


def test_limits_at_their_edges():
    edge = options_from_annotations(
        {"jobdash.io/retry-limit": "100", "jobdash.io/retry-exit-codes": "1,255", "jobdash.io/max-run-time": "366d"},
        NOW,
    )
    assert (edge.retry.limit, edge.retry.exit_codes, edge.max_run_s) == (100, {1, 255}, 366 * 86400)
    assert options_from_annotations({"jobdash.io/retry-limit": "0"}, NOW).retry.limit == 0
    assert options_from_annotations({"jobdash.io/retry-on": ""}, NOW).retry.on == frozenset()


def test_json_round_trip_in_the_stored_shape():
    options = JobOptions(
        after=(Dependency("ok", "42"),),
        retry=RetryPolicy(limit=2, on=frozenset({"Preempted", "NodeLost"}), exit_codes=frozenset({42, 3})),
        max_run_s=3600.0,
        start_by=NOW,
        checkpoint_every_s=600.0,
        min_runtime_s=0.0,
    )
    assert options.to_json() == {
        "after": [["ok", "42"]],
        "keep_if_never": False,
        "retry": {"limit": 2, "on": ["NodeLost", "Preempted"], "exit_codes": [3, 42], "backoff_s": 30.0},
        "max_run_s": 3600.0,
        "start_by": NOW,
        "checkpoint_every_s": 600.0,
        "checkpoint_on_notice_s": None,
        "min_runtime_s": 0.0,
    }
    assert JobOptions.from_json(options.to_json()) == options
    assert JobOptions.from_json(JobOptions().to_json()) == JobOptions()
    assert JobOptions.from_json({}) == JobOptions() == JobOptions.from_json(None)


def test_fields_take_precedence_over_annotations():
    base = options_from_annotations(
        {"jobdash.io/after": "ok:prep", "jobdash.io/retry-limit": "5", "jobdash.io/retry-on": "Evicted"}, NOW
    )
    options = with_fields(
        base,
        {
            "after": ["any:train-1", "notok:17"],
            "keep_if_never_satisfied": True,
            "retry": {"on": ["NodeLost", "ExitCode"], "exit_codes": [3], "backoff_seconds": 10},
            "max_run_seconds": 600,
            "start_by": "2025-06-02T00:00:00Z",
            "manifest": "not an option: ignored",
        },
        NOW,
    )
    assert options == JobOptions(
        after=(Dependency("any", "train-1"), Dependency("notok", "17")),
        keep_if_never=True,
        retry=RetryPolicy(limit=5, on=frozenset({"NodeLost", "ExitCode"}), exit_codes=frozenset({3}), backoff_s=10),
        max_run_s=600,
        start_by=NOW + 12 * 3600,
    )
    assert with_fields(base, {"after": "ok:a,ok:b", "retry": {"limit": 0}}, NOW).after == (
        Dependency("ok", "a"),
        Dependency("ok", "b"),
    )
    assert with_fields(base, {}, NOW) == base
    assert with_fields(base, {"after": None, "retry": None}, NOW) == base


def test_bad_fields_at_their_paths():
    found = errors(
        lambda: with_fields(
            JobOptions(),
            {
                "after": ["ok:a", "sometimes:b"],
                "keep_if_never_satisfied": "yes",
                "retry": {"limit": 101, "on": ["Flaky", "NodeLost"], "exit_codes": [0], "backoff_seconds": -1},
                "max_run_seconds": 0,
                "start_by": "tomorrow",
            },
            NOW,
        )
    )
    assert found == {
        "after[1]": '"sometimes:b" is not a dependency: use ok:NAME, any:NAME or notok:NAME (NAME a job name or id)',
        "keep_if_never_satisfied": "must be true or false",
        "retry.limit": "must be a whole number from 0 to 100",
        "retry.on[0]": found["retry.on[0]"],
        "retry.exit_codes[0]": "0 is not an exit code: use whole numbers from 1 to 255",
        "retry.backoff_seconds": "must be more than 0 and at most 3600 seconds",
        "max_run_seconds": "must be more than 0 and at most 31622400 seconds (366 days)",
        "start_by": found["start_by"],
    }
    assert found["retry.on[0]"].startswith('"Flaky" is not a failure class')
    assert "RFC 3339" in found["start_by"]


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"after": 42}, "after"),
        ({"after": "ok:a,any:a"}, "after"),
        ({"after": ["ok:a", "any:a"]}, "after"),
        ({"after": [7]}, "after[0]"),
        ({"retry": [3]}, "retry"),
        ({"retry": {"limit": True}}, "retry.limit"),
        ({"retry": {"on": 3}}, "retry.on"),
        ({"max_run_seconds": "1h"}, "max_run_seconds"),
        ({"max_run_seconds": 367 * 86400}, "max_run_seconds"),
        ({"start_by": 1700000000}, "start_by"),
    ],
)
def test_more_bad_fields(fields, path):
    assert path in errors(lambda: with_fields(JobOptions(), fields, NOW))
