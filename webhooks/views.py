"""POST /webhooks/admission/<plural>: AdmissionReview v1 in, AdmissionReview v1 out.

Thin on purpose, as it sits on the API server's request path: parse, one decision, render.
The plural is a managed kind's (queueing's adapter registry), else 404; a review whose
request.resource is another resource than the URL's is a 400 (the webhook configuration
and the URL disagree). A body that is not a well-formed AdmissionReview is a 400 with the
reason; an unexpected error while deciding (the database away, a bug) is a well-formed
review that denies with the reason, never a 500, so the API server shows people why
(failurePolicy: Fail applies only when the webhook cannot be reached or times out).
"""

import logging
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponseNotAllowed, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from jobdash import metrics
from jobdash.cluster.gateway import QUEUED_PLURAL
from queueing.workload import BY_KEY

from . import decide, queued_deletes, review
from .decision import refused

log = logging.getLogger(__name__)


def _managed_plurals() -> frozenset[str]:
    return frozenset(adapter.plural for adapter in BY_KEY.values())


@csrf_exempt
def admission(request: HttpRequest, plural: str):
    if plural == QUEUED_PLURAL:
        return _queued_delete(request)
    if plural not in _managed_plurals():
        return JsonResponse({"error": f"{plural!r} is not a kind jobdash manages"}, status=404)
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    # Read the stream ourselves: Django's DATA_UPLOAD_MAX_MEMORY_SIZE is not the limit here.
    body = request.read(review.MAX_REVIEW_BYTES + 1)
    try:
        admission = review.parse(body)
    except review.Malformed as error:
        return JsonResponse({"error": f"not an AdmissionReview {review.API_VERSION}: {error}"}, status=400)
    if admission.resource != plural:
        return JsonResponse(
            {
                "error": f"a review of {admission.resource!r} posted to the path of {plural!r}: "
                "the webhook configuration's path must be /webhooks/admission/<the rule's resource>"
            },
            status=400,
        )
    started = time.perf_counter()
    try:
        decision = decide.decide(
            admission, mode=settings.JOBDASH_WEBHOOK_MODE, own_identities=settings.JOBDASH_OWN_IDENTITIES
        )
    except Exception as error:
        log.exception("webhook: deciding %s %s/%s failed", admission.uid, admission.namespace, admission.name)
        decision = refused(
            500,
            f"jobdash could not queue this {admission.kind} ({error.__class__.__name__}: {error}); try again",
            "InternalError",
        )
    metrics.observe_review(admission.kind, decision.allowed, time.perf_counter() - started)
    return JsonResponse(review.response(admission.uid, **decision.response_fields()))


def _queued_delete(request: HttpRequest):
    """A QueuedJob's DELETE: who left the queue, and whether they may (queued_deletes.py)."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    try:
        admission = review.parse(request.read(review.MAX_REVIEW_BYTES + 1))
    except review.Malformed as error:
        return JsonResponse({"error": f"not an AdmissionReview {review.API_VERSION}: {error}"}, status=400)
    try:
        decision = queued_deletes.decide(admission, own_identities=settings.JOBDASH_OWN_IDENTITIES)
    except Exception as error:  # a cancel nobody judged would be anyone's: refused, saying why
        log.exception("webhook: the DELETE of QueuedJob %s/%s", admission.namespace, admission.name)
        decision = refused(
            500,
            f"jobdash could not judge this delete ({error.__class__.__name__}: {error}); try again",
            "InternalError",
        )
    return JsonResponse(review.response(admission.uid, **decision.response_fields()))


def not_found(request: HttpRequest, exception=None):
    """The listener's 404: plain JSON, no page of the UI (its templates name the UI's URLs)."""
    return JsonResponse({"error": f"no webhook at {request.path}"}, status=404)


def server_error(request: HttpRequest):
    return JsonResponse({"error": "the webhook failed; see its log"}, status=500)
