"""Settings from the environment: a value we cannot read is refused at start-up, never
read as a default or as "no"."""

import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobdash.settings import env_bool, env_choice, env_number


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("TRUE", True), (" yes ", True), ("off", False), ("0", False), ("", True)]
)
def test_env_bool_reads_the_words_it_knows(monkeypatch, value, expected):
    monkeypatch.setenv("JOBDASH_X", value)
    assert env_bool("JOBDASH_X", True) is expected


@pytest.mark.parametrize("value", ["ture", "2", "enabled", "nein"])
def test_env_bool_refuses_a_word_it_does_not_know(monkeypatch, value):
    monkeypatch.setenv("JOBDASH_X", value)
    with pytest.raises(ImproperlyConfigured, match="JOBDASH_X"):
        env_bool("JOBDASH_X", False)


def test_env_number_keeps_the_default_type_and_checks_the_minimum(monkeypatch):
    monkeypatch.delenv("JOBDASH_N", raising=False)
    assert env_number("JOBDASH_N", 5, minimum=1) == 5
    monkeypatch.setenv("JOBDASH_N", "7")
    assert env_number("JOBDASH_N", 5) == 7 and isinstance(env_number("JOBDASH_N", 5), int)
    assert env_number("JOBDASH_N", 2.0) == 7.0 and isinstance(env_number("JOBDASH_N", 2.0), float)
    monkeypatch.setenv("JOBDASH_N", "0.5")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_number("JOBDASH_N", 5)
    with pytest.raises(ImproperlyConfigured, match="at least 1.0"):
        env_number("JOBDASH_N", 2.0, minimum=1.0)
    monkeypatch.setenv("JOBDASH_N", "ten")
    with pytest.raises(ImproperlyConfigured, match="not a number"):
        env_number("JOBDASH_N", 2.0)


def test_env_choice(monkeypatch):
    monkeypatch.setenv("JOBDASH_C", "postgres")
    assert env_choice("JOBDASH_C", "none", ("consul", "postgres", "none")) == "postgres"
    monkeypatch.setenv("JOBDASH_C", "zookeeper")
    with pytest.raises(ImproperlyConfigured, match="consul, postgres, none"):
        env_choice("JOBDASH_C", "none", ("consul", "postgres", "none"))


def test_a_bad_setting_stops_the_process_at_start(tmp_path):
    """Through the real settings module: a typo in a safety switch is an error at start-up."""
    code = "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'jobdash.settings'; django.setup()"
    env = {"PATH": "/usr/bin:/bin", "JOBDASH_NODE_FIT": "ture", "JOBDASH_VAR_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "JOBDASH_NODE_FIT='ture'" in result.stderr
    env["JOBDASH_NODE_FIT"] = "false"
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60).returncode == 0


@pytest.mark.parametrize(
    ("value", "words"), [("1", "must be below 1"), ("0.3", "must be at least 0.5"), ("x", "not a number")]
)
def test_the_lent_coverage_is_a_share_below_one(tmp_path, value, words):
    code = "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'jobdash.settings'; django.setup()"
    env = {"PATH": "/usr/bin:/bin", "JOBDASH_LENT_COVERAGE": value, "JOBDASH_VAR_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "JOBDASH_LENT_COVERAGE=" in result.stderr and words in result.stderr
