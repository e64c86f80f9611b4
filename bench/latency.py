"""Admission latency on an idle cluster: 200 single submissions, p50/p99 of
submit -> Released and submit -> Running.

    python -m bench.latency [--jobs 200] [--tick 2]

Run it through the harness (PostgreSQL): `.venv/bin/python tests/harness.py --
.venv/bin/python -m bench.latency`. Prints one JSON line.

The same deployment as bench.kueue_baseline: kubesim (`python -m kubesim serve`, kubelet
start delay 50 ms) and the dispatcher (`python manage.py run_dispatcher`, default policy,
tick 2 s, election none) in processes of their own; this process submits through
jobs.services.job_submit (source "api"), as the API does, without a Celery broker, so the
submission's kick reaches the dispatcher as a PostgreSQL NOTIFY.

One job at a time on an otherwise idle cluster: submit (1 CPU, runs 0.2 s, quota to
spare), wait until it is Running and then finished, pause 0-300 ms at random (so
submissions fall anywhere in the tick), submit the next. `--no-kick` disconnects the
submission's kick, to show what the tick alone gives.
Latencies are from just before the job_submit call (this process's clock) to the Job row's
released_at (set by the dispatcher's claim) and started_at (set when the tracker has seen
every pod running); all processes share one machine clock.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import stack

NAMESPACE = "latency"
START_DELAY_S = 0.05
RUN_S = 0.2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--tick", type=float, default=2.0)
    parser.add_argument("--policy", default="priority")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--no-kick",
        action="store_true",
        help="submissions do not kick the dispatcher (only the tick and cluster events wake it)",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)

    stack.setup_django()
    from jobdash.jobs.models import Job
    from jobdash.jobs.services import job_submit

    user = stack.reset_database([NAMESPACE])
    if args.no_kick:
        from jobdash.jobs.signals import queue_changed

        queue_changed.disconnect(dispatch_uid="jobdash-kick")
    released, running = [], []
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
        workdir = Path(tmp)
        config = stack.cluster_config(
            {NAMESPACE: {"requests.cpu": "64"}}, nodes=2, node_cpu=32, start_delay_s=START_DELAY_S
        )
        kubesim = stack.Kubesim(config, workdir)
        dispatcher = None
        try:
            dispatcher = stack.Dispatcher(kubesim.kubeconfig, workdir, policy=args.policy, tick_s=args.tick)
            time.sleep(1.0)  # let the dispatcher's first (leadership) cycle pass
            for i in range(args.jobs):
                manifest = stack.tfjob_yaml(f"job-{i:04d}", NAMESPACE, "1", RUN_S)
                sent = time.time()
                job = job_submit(user=user, manifest=manifest, source="api", priority=0)
                deadline = time.monotonic() + 30
                while True:
                    row = (
                        Job.objects.filter(pk=job.pk).values("state", "released_at", "started_at", "finished_at").get()
                    )
                    if row["finished_at"] is not None:  # idle again: nothing of this job is left to wake anyone
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"job {i} did not finish within 30 s: {row}")
                    time.sleep(0.005)
                if row["state"] != "Succeeded":
                    raise RuntimeError(f"job {i} ended {row['state']}")
                released.append(row["released_at"].timestamp() - sent)
                running.append(row["started_at"].timestamp() - sent)
                time.sleep(rng.uniform(0.0, 0.3))
        finally:
            if dispatcher is not None:
                dispatcher.stop()
            kubesim.stop()

    def ms(values, q):
        return round(stack.percentile(values, q), 4)

    stack.log(
        f"released: mean {statistics.fmean(released):.3f}s max {max(released):.3f}s; "
        f"running: mean {statistics.fmean(running):.3f}s max {max(running):.3f}s"
    )
    print(
        json.dumps(
            {
                "release_p50_s": ms(released, 50),
                "release_p99_s": ms(released, 99),
                "running_p50_s": ms(running, 50),
                "running_p99_s": ms(running, 99),
                "release_max_s": round(max(released), 4),
                "running_max_s": round(max(running), 4),
                "jobs": args.jobs,
                "kick": not args.no_kick,
                "tick_s": args.tick,
                "kubelet_start_delay_s": START_DELAY_S,
                "machine": {
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "loadavg_end": [round(x, 2) for x in os.getloadavg()],
                },
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
