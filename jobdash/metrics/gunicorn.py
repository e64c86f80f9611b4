"""gunicorn's server hooks for the metrics (deploy/docker/gunicorn.conf.py installs them):
under PROMETHEUS_MULTIPROC_DIR every worker writes its values to files there, and those of
a worker that died must not be counted as live.
"""

from typing import Any

from .collectors import multiprocess


def child_exit(server: Any, worker: Any) -> None:
    """For gunicorn.conf.py (`child_exit = metrics_hooks.child_exit`) under
    PROMETHEUS_MULTIPROC_DIR: a dead worker's live gauges leave with it."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        mp.mark_process_dead(worker.pid)
