"""Prometheus metrics: every `jobdash_*` family, the database collector, `/metrics` and the
dispatcher's own HTTP port (docs/operations.md, "Metrics and logs").

Two places export them:
- the web app's `/metrics` (`exposition.metrics_view`, answered by
  `exposition.MetricsEndpoint` before the host check): the job and queue gauges, read from
  the database at each scrape (`collectors.JobsCollector`, right under gunicorn too since
  nothing is kept in memory), and what the web process itself observed; under gunicorn
  with PROMETHEUS_MULTIPROC_DIR set, every worker's values (prometheus_client's
  multiprocess mode, and `gunicorn.child_exit` for a worker that died);
- the dispatcher's processes (the Celery worker and beat, `run_dispatcher`, `run_embedded`)
  and the webhook's listener: `serve()` on JOBDASH_METRICS_PORT (0: off).

families.py holds the families the processes observe and the one-line helpers; they, and
what the processes call to serve, are re-exported here, so that a call site is
`from jobdash import metrics; metrics.observe_cycle(...)`.
"""

from .collectors import multiprocess
from .exposition import serve
from .families import (
    count_preemption,
    count_releases,
    count_replacements,
    observe_cycle,
    observe_released,
    observe_review,
    observe_started,
    set_leader,
    set_off_plan,
)

__all__ = [
    "count_preemption",
    "count_releases",
    "count_replacements",
    "multiprocess",
    "observe_cycle",
    "observe_released",
    "observe_review",
    "observe_started",
    "serve",
    "set_leader",
    "set_off_plan",
]
