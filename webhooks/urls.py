"""The webhook listener's whole URLconf: nothing of the UI, the API or the admin is
reachable on it, and the webhook is reachable on nothing else (jobdash.urls omits it).

One path per managed kind, by its plural (`/webhooks/admission/pytorchjobs`); a plural
that is no registered kind's is a 404."""

from django.urls import path

from jobdash.health import healthz

from . import views

urlpatterns = [
    path("webhooks/admission/<str:plural>", views.admission, name="admission"),
    path("healthz", healthz, name="webhook-healthz"),
]

handler404 = views.not_found
handler500 = views.server_error
