"""gunicorn settings the command line does not carry (deploy/docker/entrypoint.sh passes -c).

Used by both listeners (entrypoint.sh web and webhook). The access log skips what would
drown it: the probes' /healthz, the monitors' /readyz and the admission webhook's answered
reviews (the API server calls it for every job create, and its audit log has them; the
webhook logs each job it queues), and Prometheus' scrapes of /metrics. Anything else, and
any of those answered with other than a 200 (a /readyz 503), is logged as usual.

Under PROMETHEUS_MULTIPROC_DIR (set in deploy/base for the web and the webhook; the
entrypoint empties the directory before gunicorn starts) every worker's metrics are
exported together, and a dead worker's live gauges are dropped (child_exit, from
jobdash.metrics.gunicorn: gunicorn loads this file from the working directory, /app,
where jobdash is importable).
"""

from gunicorn.glogging import Logger

from jobdash.metrics import gunicorn as metrics_hooks

QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# The webhook's paths, one per managed kind (/webhooks/admission/<plural>): whatever kinds
# the registry holds, without naming them here.
QUIET_PREFIXES = ("/webhooks/admission/",)


def quiet(path: str) -> bool:
    return path in QUIET_PATHS or path.startswith(QUIET_PREFIXES)


class AccessLogger(Logger):
    def access(self, resp, req, environ, request_time):
        if quiet(environ.get("PATH_INFO") or "") and getattr(resp, "status_code", None) == 200:
            return
        super().access(resp, req, environ, request_time)


logger_class = AccessLogger

child_exit = metrics_hooks.child_exit
