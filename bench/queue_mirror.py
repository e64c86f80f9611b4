"""The cost of the queue in the cluster: the cycle's mirror phase (QueuedJob objects) and
events phase (Kubernetes Events) with a queue of 1000 jobs.

    python -m bench.queue_mirror [--jobs 1000] [--writes 200]

Run it through the harness (PostgreSQL): `.venv/bin/python tests/harness.py --
.venv/bin/python -m bench.queue_mirror`. Prints one JSON line.

kubesim runs in this process (manual clock, HTTP on loopback) with the real gateway and
the dispatcher's cycle, settings as deployed (JOBDASH_* defaults) but `--writes` writes a
cycle. One namespace whose quota holds one job at a time; `--jobs` are submitted at once.
Measured, in milliseconds of the phases' own timings (Cycle.phases):
- creating: the cycles until every waiting job has its QueuedJob (`--writes` a cycle),
  their mirror and events phases;
- idle: cycles where nothing changed (the mirror reads the queue and compares);
- churn: a second of cluster time a cycle, one job finishing and the next released every
  couple of cycles: every place behind moves (statuses written every cycle here), so the
  first mirror.FRONT objects are rewritten each cycle and the rest in a round of moves
  every mirror.MOVES_INTERVAL_S (here every ROUND_EVERY cycles; `--writes` a cycle at most).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import time

from bench import stack

NAMESPACE = "mirror"
ROUND_EVERY = 5  # cycles between two rounds of moves (mirror.MOVES_INTERVAL_S / a 2 s tick)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--churn-cycles", type=int, default=40)
    args = parser.parse_args()

    stack.setup_django()
    from django.conf import settings

    from jobdash.cluster.factory import gateway_from_settings
    from jobdash.dispatch.cycle import Dispatcher, DispatchSettings
    from jobdash.dispatch.writers import transitions
    from jobdash.jobs.models import EventOutbox, QueuedMirror
    from jobdash.jobs.services import Submission, jobs_submit_many
    from kubesim.resources import QUEUEDJOBS
    from kubesim.testing import running_kubesim

    user = stack.reset_database([NAMESPACE])
    QueuedMirror.objects.all().delete()
    EventOutbox.objects.all().delete()
    transitions.take_term(1, "bench")
    config = {
        "nodes": [{"prefix": "node", "count": 4, "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}}],
        "namespaces": [{"name": NAMESPACE, "quota": {"requests.cpu": "1"}}],
        "users": [{"token": "jobdash-token", "username": "system:serviceaccount:jobdash:jobdash", "groups": []}],
        "kubelet": {"start_delay_seconds": 0.5},
    }
    with running_kubesim(config, manual_clock=True) as sim:
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        gateway = gateway_from_settings()
        gateway.start(timeout=30)
        try:
            manifests = [stack.tfjob_yaml(f"q-{i:04d}", NAMESPACE, "1", 1.0) for i in range(args.jobs)]
            for start in range(0, len(manifests), 500):
                jobs_submit_many(
                    user=user, submissions=[Submission(m) for m in manifests[start : start + 500]], source="api"
                )
            dispatcher = Dispatcher(
                gateway, dataclasses.replace(DispatchSettings.from_django(), mirror_writes=args.writes)
            )

            def objects() -> int:
                return len(sim.cluster.store.items(QUEUEDJOBS, NAMESPACE))

            def settle() -> None:  # the watch cache sees what kubesim has
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and len(gateway.queued_objects() or []) != objects():
                    time.sleep(0.01)

            creating = []
            while objects() < args.jobs - 1 or EventOutbox.objects.exists():
                creating.append(dispatcher.cycle(1).phases)
                settle()
                if len(creating) > 100:
                    raise SystemExit("the mirror never caught up")
            idle = []
            for _ in range(5):
                idle.append(dispatcher.cycle(1).phases)
            # The running job finishes; the next is released: every position moves by one.
            shifting: list[dict] = []
            updates: list[int] = []
            for _ in range(args.churn_cycles):
                sim.advance(1.0)
                time.sleep(0.05)
                dispatcher._all_statuses_at = float("-inf")  # every status round complete
                if len(shifting) % ROUND_EVERY == 0:  # a round of moves, as every 10 s at a 2 s tick
                    dispatcher.out.moves_at = float("-inf")
                result = dispatcher.cycle(1)
                settle()
                shifting.append(result.phases)
                updates.append(result.mirrored.get("updated", 0))
        finally:
            gateway.stop()

    def ms(cycles: list[dict], phase: str) -> dict:
        values = [c[phase] for c in cycles]
        return {"p50": round(statistics.median(values), 1), "max": round(max(values), 1)}

    print(
        json.dumps(
            {
                "bench": "queue_mirror",
                "jobs": args.jobs,
                "writes_per_cycle": args.writes,
                "creating_cycles": len(creating),
                "creating_mirror_ms": ms(creating, "mirror"),
                "creating_events_ms": ms(creating, "events"),
                "idle_mirror_ms": ms(idle, "mirror"),
                "idle_events_ms": ms(idle, "events"),
                "idle_cycle_ms": {"p50": round(statistics.median(sum(c.values()) for c in idle), 1)},
                "churn_cycles": len(shifting),
                "churn_updates_per_cycle": {"p50": statistics.median(updates), "max": max(updates)},
                "churn_mirror_ms": ms(shifting, "mirror"),
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
