"""The webhook listener's whole URLconf: nothing of the UI, the API or the admin is
reachable on it, and the webhook is reachable on nothing else (jobdash.urls omits it)."""

from django.urls import path

from jobdash.health import healthz

from . import views

urlpatterns = [
    path("webhooks/admission/tfjobs", views.admission_tfjobs, name="admission-tfjobs"),
    path("healthz", healthz, name="webhook-healthz"),
]
