"""The webhook listener's whole URLconf: nothing of the UI, the API or the admin is
reachable on it, and the webhook is reachable on nothing else (jobdash.urls omits it).

One path per managed kind, by its plural (`/webhooks/admission/pytorchjobs`); a plural
that is no registered kind's is a 404. "admission-tfjobs" is the path the first
deployments registered, kept by name."""

from django.urls import path

from jobdash.health import healthz

from . import views

urlpatterns = [
    path("webhooks/admission/tfjobs", views.admission, {"plural": "tfjobs"}, name="admission-tfjobs"),
    path("webhooks/admission/<str:plural>", views.admission, name="admission"),
    path("healthz", healthz, name="webhook-healthz"),
]
