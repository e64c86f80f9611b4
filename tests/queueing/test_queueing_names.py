"""metadata.generateName: every kind accepts it, and jobdash names the object as the API server would."""

import re

import pytest
import yaml

from queueing import ManifestError, assign_generated_name, workload_from_manifest
from queueing.names import SUFFIX_ALPHABET, new_suffix
from tests.queueing.kinds_support import Runtimes, errors_of, with_value
from tests.queueing.test_queueing_batchjob import KATIB_TRIAL
from tests.queueing.test_queueing_jobset import PARALLEL_JOBS
from tests.queueing.test_queueing_kubeflow import JAX, PADDLE, PYTORCH_SIMPLE, XGBOOST
from tests.queueing.test_queueing_mpijob import PI
from tests.queueing.test_queueing_tfjob import SINGLE_WORKER_CPU
from tests.queueing.test_queueing_trainjob import KUEUE_EXAMPLE, TORCH_DISTRIBUTED

EVERY_KIND = [SINGLE_WORKER_CPU, PYTORCH_SIMPLE, XGBOOST, PADDLE, JAX, PI, KATIB_TRIAL, PARALLEL_JOBS, KUEUE_EXAMPLE]
RUNTIMES = Runtimes(yaml.safe_load(TORCH_DISTRIBUTED))


def generated(text, prefix="run-"):
    manifest = yaml.safe_load(text)
    del manifest["metadata"]["name"]
    manifest["metadata"]["generateName"] = prefix
    return manifest


@pytest.mark.parametrize("text", EVERY_KIND)
def test_every_kind_accepts_generate_name_without_a_name(text):
    manifest = generated(text)
    assert workload_from_manifest(manifest, RUNTIMES).name == ""
    assert assign_generated_name(manifest, "x2b9z") == "run-x2b9z"
    assert manifest["metadata"]["name"] == "run-x2b9z"
    assert workload_from_manifest(manifest, RUNTIMES).name == "run-x2b9z"


@pytest.mark.parametrize("text", EVERY_KIND)
def test_no_name_and_no_generate_name(text):
    manifest = yaml.safe_load(text)
    del manifest["metadata"]["name"]
    assert errors_of(manifest, RUNTIMES) == {"metadata.name": "required (or set metadata.generateName)"}
    assert assign_generated_name(manifest) == ""


def test_random_suffix_uses_the_api_servers_alphabet():
    names = {assign_generated_name(generated(PI, "pi-")) for _ in range(50)}
    assert len(names) > 1
    assert all(re.fullmatch(f"pi-[{SUFFIX_ALPHABET}]{{5}}", name) for name in names)
    assert len(new_suffix()) == 5


def test_a_set_name_is_kept():
    manifest = yaml.safe_load(PI)
    manifest["metadata"]["generateName"] = "other-"
    assert assign_generated_name(manifest, "bbbbb") == "pi"
    assert manifest["metadata"]["name"] == "pi"


def test_long_prefixes_are_cut_like_the_api_server_does():
    manifest = generated(KATIB_TRIAL, "t" * 62)
    assert assign_generated_name(manifest, "bcdfg") == "t" * 58 + "bcdfg"
    assert workload_from_manifest(manifest).name == "t" * 58 + "bcdfg"


@pytest.mark.parametrize(
    ("text", "prefix", "message"),
    [
        (
            PYTORCH_SIMPLE,
            "Run-",
            "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and ending "
            "with a letter or digit), got 'Run-'",
        ),
        (
            PYTORCH_SIMPLE,
            "1run-",
            "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and ending "
            "with a letter or digit), got '1run-'",
        ),
        (PYTORCH_SIMPLE, "r" * 64, "must be at most 63 characters"),
        (KATIB_TRIAL, "trial_", "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'"),
    ],
)
def test_bad_prefixes_are_refused_with_the_kinds_rule(text, prefix, message):
    manifest = generated(text, prefix)
    with pytest.raises(ManifestError) as caught:
        assign_generated_name(manifest, "bcdfg")
    assert [(e.path, e.message) for e in caught.value.errors] == [("metadata.generateName", message)]
    assert "name" not in manifest["metadata"]
    assert errors_of(manifest, RUNTIMES) == {"metadata.generateName": message}


def test_batch_job_prefixes_may_hold_dots_and_start_with_a_digit():
    assert assign_generated_name(generated(KATIB_TRIAL, "1.trial-"), "bcdfg") == "1.trial-bcdfg"


def test_a_trailing_dash_is_fine_but_other_trailing_characters_are_checked():
    assert assign_generated_name(generated(JAX, "jax-"), "bcdfg") == "jax-bcdfg"
    with pytest.raises(ManifestError):
        assign_generated_name(generated(JAX, "jax."), "bcdfg")


@pytest.mark.parametrize("value", [7, ["a"]])
def test_generate_name_must_be_a_string(value):
    manifest = generated(JAX, value)
    with pytest.raises(ManifestError) as caught:
        assign_generated_name(manifest)
    assert caught.value.errors[0].path == "metadata.generateName"
    assert "metadata.generateName" in errors_of(manifest)


@pytest.mark.parametrize("suffix", ["abcde", "bcd", "BCDFG"])
def test_a_given_suffix_must_look_generated(suffix):
    with pytest.raises(ValueError, match="random_suffix"):
        assign_generated_name(generated(JAX), suffix)


def test_metadata_missing_is_left_to_validation():
    assert assign_generated_name({"kind": "JAXJob"}) == ""
    manifest = with_value(yaml.safe_load(JAX), "metadata", "x")
    assert assign_generated_name(manifest) == ""
