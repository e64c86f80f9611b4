"""What a cycle costs when nothing changed: 10,000 queued jobs, the cluster full, no
submission, no finish, no node event.

    python -m bench.idle_cycle [--jobs 10000] [--namespaces 100] [--cycles 60]

Run it through the harness (PostgreSQL): `.venv/bin/python tests/harness.py --
.venv/bin/python -m bench.idle_cycle`. Prints one JSON line.

kubesim runs in this process (manual clock: nothing finishes) with the real gateway and
the dispatcher's cycle, settings as deployed (JOBDASH_* defaults). Each namespace's quota
holds one job, which runs; the rest wait. First the cycles that take the queue in (its
statuses, QueuedJob objects and Events, with a large write budget) run until nothing is
left to write; then a new leader (settings as deployed) runs 5 cycles, and
`--cycles` cycles one tick apart (JOBDASH_TICK_SECONDS of wall time, so the periodic work
comes due as it would: the status round, the mirror's moves, the reconcile) are measured:
- cpu_ms: the CPU time of the thread that runs the cycle (kubesim's threads serve the
  gateway's requests and are not counted; PostgreSQL's backend is another process);
- wall_ms: the cycle's phases, as Cycle.phases records them;
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import json
import os
import platform
import statistics
import time

from bench import stack


def _spread(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
        "mean": round(statistics.fmean(ordered), 2),
        "max": round(ordered[-1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--cycles", type=int, default=60)
    parser.add_argument("--profile", default=None, help="write a cProfile of the measured cycles here")
    parser.add_argument("--tick", type=float, default=None, help="seconds between measured cycles (default: the tick)")
    args = parser.parse_args()

    stack.setup_django()
    from django.conf import settings

    from jobdash.cluster.factory import gateway_from_settings
    from jobdash.dispatch.cycle import Dispatcher, DispatchSettings
    from jobdash.dispatch.writers import transitions
    from jobdash.jobs.models import EventOutbox, Job, QueuedMirror
    from jobdash.jobs.services import Submission, jobs_submit_many
    from kubesim.testing import running_kubesim

    names = [f"idle-{i:03d}" for i in range(args.namespaces)]
    user = stack.reset_database(names)
    QueuedMirror.objects.all().delete()
    EventOutbox.objects.all().delete()
    transitions.take_term(1, "bench")
    config = {
        "nodes": [{"prefix": "node", "count": 100, "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}}],
        "namespaces": [{"name": name, "quota": {"requests.cpu": "1"}} for name in names],
        "users": [{"token": "jobdash-token", "username": "system:serviceaccount:jobdash:jobdash", "groups": []}],
        "kubelet": {"start_delay_seconds": 0.0},
    }
    tick = args.tick if args.tick is not None else settings.JOBDASH_TICK_SECONDS
    with running_kubesim(config, manual_clock=True) as sim:
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        gateway = gateway_from_settings()
        gateway.start(timeout=30)
        try:
            per = args.jobs // args.namespaces
            manifests = [
                stack.tfjob_yaml(f"j-{i:05d}", names[i % args.namespaces], "1", 3600.0) for i in range(per * len(names))
            ]
            for start in range(0, len(manifests), 1000):
                jobs_submit_many(
                    user=user, submissions=[Submission(m) for m in manifests[start : start + 1000]], source="api"
                )
            # Taking the queue in is not what is measured: a leader with a large write budget
            # does it; the cycles measured are then a new leader's, settings as deployed.
            fast = dataclasses.replace(
                DispatchSettings.from_django(),
                mirror_writes=2000,
                events_per_cycle=2000,
                publish_qps=10_000.0,
                publish_burst=20_000,
                publish_share=1.0,
            )
            dispatcher = Dispatcher(gateway, fast)
            settling, deadline = 0, time.monotonic() + 600
            while True:  # the queue taken in: admissions, statuses, objects, Events
                result = dispatcher.cycle(1)
                sim.advance(1.0)  # the released jobs' pods start (their hour does not pass)
                time.sleep(0.2)
                settling += 1
                busy = (
                    result.admitted
                    or QueuedMirror.objects.count() < Job.objects.filter(state="Queued").count()
                    or EventOutbox.objects.exists()
                )
                if not busy and Job.objects.filter(state="Released").count() == 0:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"the queue never settled: {result.admitted} admitted, {result.mirrored}, "
                        f"{EventOutbox.objects.count()} events, {Job.objects.filter(state='Released').count()} released"
                    )
            dispatcher = Dispatcher(gateway)
            for _ in range(5):  # the new leader reads everything once; the last writes' echoes
                dispatcher.cycle(1)
                time.sleep(tick)
            cpu, wall = [], []
            profiler = cProfile.Profile() if args.profile else None
            for _ in range(args.cycles):
                time.sleep(tick)
                before = time.thread_time()
                if profiler is not None:
                    profiler.enable()
                result = dispatcher.cycle(1)
                if profiler is not None:
                    profiler.disable()
                cpu.append((time.thread_time() - before) * 1000)
                wall.append(sum(result.phases.values()))
            phases = dispatcher.cycle(1).phases
            if profiler is not None:
                profiler.dump_stats(args.profile)
        finally:
            gateway.stop()
    print(
        json.dumps(
            {
                "bench": "idle_cycle",
                "jobs": per * len(names),
                "queued": Job.objects.filter(state="Queued").count(),
                "namespaces": args.namespaces,
                "settling_cycles": settling,
                "cycles": args.cycles,
                "tick_s": tick,
                "cpu_ms": _spread(cpu),
                "wall_ms": _spread(wall),
                "last_phases_ms": phases,
                "loadavg": os.getloadavg()[0],
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
