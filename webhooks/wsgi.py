"""The webhook's own WSGI application, for its own listener.

Served apart from the UI (deploy/docker/entrypoint.sh webhook: gunicorn with TLS that
requires a client certificate issued by JOBDASH_WEBHOOK_CLIENT_CA, the CA of the API
server's webhook client certificate) so that only the API server can post reviews: a
review names the user it acts for, and jobdash queues and later releases jobs with its
own rights on that word. Its routes are webhooks.urls alone.
"""

import os

import django
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler

URLCONF = "webhooks.urls"


class WebhookHandler(WSGIHandler):
    def load_middleware(self, is_async=False):
        # None of the UI's middleware: no sessions, CSRF or messages, and no ALLOWED_HOSTS
        # check (the API server calls with the Service's name as Host; its certificate, not
        # the Host header, is what is trusted here). The view reads and limits the body itself.
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        self._middleware_chain = convert_exception_to_response(self._get_response)  # type: ignore[attr-defined]

    def get_response(self, request):
        request.urlconf = URLCONF  # resolve_request() routes by it instead of ROOT_URLCONF
        return super().get_response(request)


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobdash.settings")
django.setup(set_prefix=False)
application = WebhookHandler()

from jobdash import metrics  # noqa: E402 (after django.setup)

metrics.serve()  # JOBDASH_METRICS_PORT: the listener itself answers only the API server
