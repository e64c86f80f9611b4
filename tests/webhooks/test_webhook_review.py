"""The AdmissionReview contract: 400 for anything malformed, the uid echoed, and the
requests the webhook does not act on pass untouched without touching the database
(these tests have no database access: a query would fail them)."""

import json

import pytest

from .conftest import JOBDASH, KATIB, URL, admission_review, path_of, trial_tfjob


def review_with(**request_changes) -> dict:
    review = admission_review(trial_tfjob())
    for key, value in request_changes.items():
        if value is ...:
            review["request"].pop(key)
        else:
            review["request"][key] = value
    return review


MALFORMED = {
    "not json": b"{nope",
    "not utf-8": b"\xff\xfe{}",
    "a list": b"[]",
    "empty": b"",
    "deeply nested": b"[" * 100_000 + b"]" * 100_000,
    "wrong apiVersion": json.dumps(
        {**admission_review(trial_tfjob()), "apiVersion": "admission.k8s.io/v1beta1"}
    ).encode(),
    "wrong kind": json.dumps({**admission_review(trial_tfjob()), "kind": "TokenReview"}).encode(),
    "no request": json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
    "request not an object": json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": "x"}
    ).encode(),
    "no uid": json.dumps(review_with(uid=...)).encode(),
    "empty uid": json.dumps(review_with(uid="")).encode(),
    "uid not a string": json.dumps(review_with(uid=42)).encode(),
    "no operation": json.dumps(review_with(operation=...)).encode(),
    "kind not an object": json.dumps(review_with(kind="TFJob")).encode(),
    "no resource": json.dumps(review_with(resource=...)).encode(),
    "no userInfo": json.dumps(review_with(userInfo=...)).encode(),
    "groups not strings": json.dumps(review_with(userInfo={"username": KATIB, "groups": [1]})).encode(),
    "dryRun not a boolean": json.dumps(review_with(dryRun="yes")).encode(),
    "object a string": json.dumps(review_with(object="apiVersion: v1")).encode(),
    "CREATE without object": json.dumps(review_with(object=None)).encode(),
    "namespace not a string": json.dumps(review_with(namespace=["team-a"])).encode(),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_anything_but_a_well_formed_review_is_a_400_with_a_reason(webhook, body):
    reply = webhook.post_raw(body)
    assert reply.status_code == 400
    assert reply.json()["error"].startswith("not an AdmissionReview admission.k8s.io/v1: ")


def test_a_body_over_the_limit_is_a_400(webhook, monkeypatch):
    from webhooks import review

    monkeypatch.setattr(review, "MAX_REVIEW_BYTES", 1024)
    reply = webhook.post_raw(json.dumps(admission_review(trial_tfjob())))
    assert reply.status_code == 400 and "larger than 1024 bytes" in reply.json()["error"]


def test_only_post(webhook):
    reply = webhook.client.get(URL)
    assert reply.status_code == 405 and reply["Allow"] == "POST"


def test_no_csrf_token_needed(webhook):
    webhook.client = type(webhook.client)(enforce_csrf_checks=True)
    response = webhook(trial_tfjob(), user=JOBDASH)
    assert response["allowed"] is True


PASSING = {
    "UPDATE of a TFJob": dict(operation="UPDATE"),
    "DELETE of a TFJob": dict(operation="DELETE"),
    "a version of a managed kind jobdash does not know": dict(version="v2"),
    "a TFJob-named kind of another group": dict(group="example.com"),
    "a subresource of a managed kind": dict(operation="UPDATE", user=JOBDASH, sub_resource="status"),
    "jobdash's own create": dict(user=JOBDASH),
}


@pytest.mark.parametrize("changes", PASSING.values(), ids=PASSING.keys())
def test_what_is_not_someone_elses_job_create_passes_untouched(webhook, changes):
    response = webhook(trial_tfjob(), **changes)
    assert response["allowed"] is True
    assert "patch" not in response and "status" not in response


def test_a_delete_review_without_object_is_well_formed(webhook):
    response = webhook(None, operation="DELETE")
    assert response["allowed"] is True


def test_own_identities_come_from_settings(webhook, settings):
    settings.JOBDASH_OWN_IDENTITIES = ["system:serviceaccount:ops:jobdash-blue", KATIB]
    assert webhook(trial_tfjob(), user=KATIB)["allowed"] is True


def test_the_compatible_tfjobs_path_is_the_generic_one():
    from django.urls import resolve, reverse

    assert reverse("admission", kwargs={"plural": "tfjobs"}, urlconf="webhooks.urls") == "/webhooks/admission/tfjobs"
    assert resolve("/webhooks/admission/tfjobs", urlconf="webhooks.urls").kwargs == {"plural": "tfjobs"}


@pytest.mark.parametrize("plural", ["deployments", "tfjob", "TFJOBS", "trials"])
def test_a_plural_that_is_no_managed_kind_is_a_404(webhook, plural):
    posted = webhook.post_raw(json.dumps(admission_review(trial_tfjob(), resource=plural)), path=path_of(plural))
    for reply in (posted, webhook.client.get(path_of(plural))):
        assert reply.status_code == 404 and reply.json()["error"] == f"{plural!r} is not a kind jobdash manages"


def test_a_review_of_another_resource_than_the_paths_is_a_400(webhook):
    """The configuration routes each kind to its own path: a review of pytorchjobs on the
    tfjobs path is a configuration mistake, said as such, never decided as a TFJob."""
    body = admission_review(trial_tfjob(), kind="PyTorchJob", resource="pytorchjobs")
    reply = webhook.post_raw(json.dumps(body), path=path_of("tfjobs"))
    assert reply.status_code == 400
    assert reply.json()["error"] == (
        "a review of 'pytorchjobs' posted to the path of 'tfjobs': the webhook configuration's path must "
        "be /webhooks/admission/<the rule's resource>"
    )
