"""No 5xx and no row from anything posted to the webhook: random bytes, random JSON trees
as the object of a well-formed review, strings PostgreSQL cannot store. A review that is
well-formed gets a well-formed answer (a refusal naming the field), never an HTTP 500."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobdash.jobs.models import Job, JobEvent
from tests.examples import examples

from .conftest import KATIB, admission_review, trial_tfjob

pytestmark = pytest.mark.django_db
json_trees = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@pytest.fixture(autouse=True)
def deny_mode(settings):
    settings.JOBDASH_WEBHOOK_MODE = "deny"


def rows() -> int:
    return Job.objects.count() + JobEvent.objects.count()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=json_trees, raw=st.binary(max_size=300), text=st.text(max_size=40))
def test_random_input_never_gives_a_5xx_or_a_row(webhook, team_a, tree, raw, text):
    reviews = [admission_review(tree if isinstance(tree, dict) else {"spec": tree}, namespace="team-a", name="x")]
    half = trial_tfjob("trial-1")
    half["spec"]["tfReplicaSpecs"]["Worker"]["template"] = tree
    half["metadata"]["labels"]["team"] = text
    reviews.append(admission_review(half))
    for body in (raw, *(json.dumps(r).encode() for r in reviews)):
        reply = webhook.post_raw(body)
        assert reply.status_code < 500, (reply.status_code, reply.content[:300])
        if reply.status_code == 200:
            answer = reply.json()["response"]
            assert answer["allowed"] is False and answer["status"]["code"] in (413, 422), answer
    assert rows() == 0


def test_a_nul_in_a_manifest_string_is_refused_naming_its_path(webhook, team_a):
    body = trial_tfjob("trial-1")
    body["metadata"]["labels"]["team"] = "a\x00b"
    answer = webhook(body, user=KATIB)
    assert answer["allowed"] is False and answer["status"]["code"] == 422
    assert "metadata.labels.team" in answer["status"]["message"]
    assert rows() == 0


def test_the_property_test_can_see_a_valid_review(webhook, team_a):
    """The counterpart: the same path does store a valid trial, so 'no row' above is not
    an accident of the setup."""
    assert webhook(trial_tfjob("trial-1"))["allowed"] is False
    assert Job.objects.count() == 1


def test_workflow_annotations_from_kubectl_are_read_and_refused_naming_the_annotation(webhook, team_a):
    """issue 36: a job created with kubectl waits for another by its annotation; a bad one is refused."""
    first = webhook(trial_tfjob("trial-1"), user=KATIB)
    assert first["allowed"] is False  # (deny mode: queued by jobdash, released later)
    body = trial_tfjob("trial-2")
    body["metadata"].setdefault("annotations", {})["jobdash.io/after"] = "ok:trial-1"
    webhook(body, user=KATIB)
    dependent = Job.objects.get(name="trial-2")
    assert [(d.on.name, d.condition) for d in dependent.dependencies.all()] == [("trial-1", "ok")]
    bad = trial_tfjob("trial-3")
    bad["metadata"].setdefault("annotations", {})["jobdash.io/retry-limit"] = "lots"
    answer = webhook(bad, user=KATIB)
    assert answer["allowed"] is False and answer["status"]["code"] == 422
    assert 'metadata.annotations["jobdash.io/retry-limit"]' in answer["status"]["message"]
    assert not Job.objects.filter(name="trial-3").exists()
