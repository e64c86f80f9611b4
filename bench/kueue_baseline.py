"""Kueue's scheduler-performance baseline, end to end: PostgreSQL + the dispatcher +
kubesim at real-time speed 1.

    python -m bench.kueue_baseline                     # default policy at scale 1, then seed vs
                                                       # default at scale 0.02; one JSON line per
                                                       # run, the last line is the summary
    python -m bench.kueue_baseline --only main         # just the full default run
    python -m bench.kueue_baseline --only compare      # just the scale-0.02 side-by-side
    python -m bench.kueue_baseline --policy fifo --scale 0.1 --only main   # while iterating
    python -m bench.kueue_baseline --only main --bulk  # bulk submission (see below)
    python -m bench.kueue_baseline --only main --config large        # Kueue's large-scale config
    python -m bench.kueue_baseline --only main --config tas --runs 3  # Kueue's topology-aware config
    python -m bench.kueue_baseline --only main --config tas --check bench/kueue_configs/tas/rangespec.yaml
    python -m bench.kueue_baseline --only main --quota-only           # node-bound and quota-only, side by side
    python -m bench.kueue_baseline --only main --runs 5 --rangespec bench/results/kueue_rangespec_baseline.yaml
    python -m bench.kueue_baseline --only main --check bench/results/kueue_rangespec_baseline.yaml

Kueue's method (bench.kueue_method, which cites Kueue's files): `--runs N` repeats the main
run N times, each with a fresh stack, and the summary's `main_runs` gives min / mean / max of
wall_s, usage_pct, kueue_usage_pct and tta_s per class; `--rangespec PATH` writes the
thresholds Kueue's rangespec procedure derives from the means; `--check PATH` exits 1 (after
printing the summary) naming each metric a main run misses, as Kueue's CI checker does.

Run it through the harness (PostgreSQL and Redis): `.venv/bin/python tests/harness.py --
.venv/bin/python -m bench.kueue_baseline`.

`--config tas` is Kueue's topology-aware benchmark (configs/tas, read from its generator.yaml,
vendored with its rangespec.yaml in bench/kueue_configs/tas/ at kubernetes-sigs/kueue
ff69552e79ad, last changed by 8bf23d956b68, #12840): the baseline's 30 namespaces of quota 20
and 15,000 jobs, now of 2 / 4 / 8 pods, in nine classes (small / medium / large x required /
preferred / balanced at the rack level), on 640 nodes of 96 CPU in 10 racks of 64, one block,
labelled with Kueue's level labels; the dispatcher gets them as JOBDASH_TOPOLOGY_LEVELS.
"required" and "preferred" are jobdash.io/required-topology and jobdash.io/preferred-topology;
Kueue's "balanced" is, in its generator, a slice-only request (podset-slice-required-topology
at the rack, podset-slice-size 1 / 2 / 4), not its TASBalancedPlacement algorithm (an alpha
gate, off there): jobdash.io/slice-required-topology + jobdash.io/slice-size, the same request
(bench.kueue_shape says where in Kueue's code). Kueue's means (KUEUE_MEANS["tas"]): wall
401.5 s, usage 62.41 %, time to admission large 37.9-39.6 s, medium 106.3-107.1 s, small
237.8-246.8 s.

`--quota-only` runs each main run twice, interleaved: on the config's nodes, and on enough
nodes of the same size that none ever keeps a job the quota admits from starting
(Shape.never_binding_nodes: baseline 49 x 32 CPU instead of 20, large 1,666 instead of 667;
tas's 640 x 96 CPU never bind, so its one run stands for both), which is how Kueue's harness
admits (minimalkueue: ClusterQueue quota, no nodes). The summary's `quota_only` puts the two
beside Kueue's means (wall, kueue_usage_pct, time to admission per class) and, per class,
the bound that limits it on either node count (`bound`: quota or nodes, from its quota_s
and nodes_s, the shortest time each allows the class alone; arrival_s for reference);
each run's line has `class_bounds` and `nodes`.

The shapes are in bench.kueue_shape; `--config large` is Kueue's large-scale config (1,000
namespaces of quota 20 in 10 cohorts of 100, per namespace 35 small / 11 medium / 4 large
jobs created every 60 / 300 / 700 ms, running 150 / 350 / 700 ms: 50,000 jobs at scale 1,
on 667 nodes). The default, "baseline" (Kueue's test/performance/scheduler): 30 namespaces with a
ResourceQuota of requests.cpu: 20; per namespace 350 small jobs (1 CPU, 200 ms, one
created every 100 ms, priority 50), 100 medium (5 CPU, 500 ms, every 500 ms, priority
100), 50 large (20 CPU, 1 s, every 1.2 s, priority 200): 15,000 TFJobs at scale 1.
`--scale` is the fraction of jobs per namespace (rates unchanged).

Processes: kubesim (`python -m kubesim serve`, 20 nodes x 32 CPU at baseline, kubelet start delay
50 ms) and the dispatcher (`python manage.py run_dispatcher`, election none) each run on
their own, as in production; this process submits through jobs.services.job_submit
(source "api") from submitter processes at the given rates, then waits until every job
has finished and measures from the Job rows and kubesim's audit. With `--bulk` each
submitter sends the jobs due in the same 0.5 s window in one `jobs_submit_many` call (one
bulk request, as `Client.submit_many` makes), when the window's last job is due: no job is
sent before it is due, and each job's lag counts its wait for the window.

Measured:
- wall_s: first submission to last finish (Job.submitted_at .. Job.finished_at);
- ideal_s: CPU-seconds of work / quota per namespace (66 s at scale 1);
- node_bound_s / usage_bound_pct: the shortest wall the nodes allow (a large job's 20-CPU
  pod takes a 32-CPU node alone: 75 s at scale 1) and the usage it means (88 %);
- usage_pct: CPU-seconds run / (600 CPU x wall). A job's run time is what kubesim's
  work clock ran it for: exactly its annotated duration, counted from the moment its
  whole gang runs (kubesim's pod timestamps have one-second resolution, too coarse for
  200 ms jobs). usage_rows_pct is the same from the Job rows (finished_at - started_at):
  those are when the dispatcher's tracker *noticed* Running and Succeeded, so it is off
  by the tracker's lag, either way (a job noticed only once finished gets started_at =
  finished_at). admitted_pct counts release -> finish (the quota an admitted job holds,
  which is what Kueue's usage counts);
- kueue_usage_pct: usage as Kueue's checker computes it: the quota admitted jobs held
  (release -> finish) over quota x (first submission -> last finish), see bench.kueue_method;
- tta_s: average submit -> release (Job.released_at - submitted_at) per class;
- double_releases: TFJob names created (201) more than once in kubesim's audit;
- lost: jobs not Succeeded at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import kueue_method, kueue_placement, stack
from bench.kueue_measure import measure
from bench.kueue_shape import BASELINE, SHAPES, Shape
from bench.kueue_submit import BULK_WINDOW_S, Submitter, wait_until_finished

KUEUE = {"wall_s": 351.0, "usage_pct": 55.9, "tta_s": {"large": 16.5, "medium": 76.8, "small": 215.0}}
# Kueue's means per config, from the comments of its rangespec files (usage as its checker
# computes it: compare with kueue_usage_pct).
KUEUE_MEANS: dict[str, dict[str, Any]] = {
    "baseline": KUEUE,
    "large": {"wall_s": 1179.4, "usage_pct": 38.64, "tta_s": {"large": 105.6, "medium": 256.4, "small": 700.4}},
    # configs/tas/rangespec.yaml (8bf23d956b68, #12840; the means of 10 CI runs, set in #9495).
    "tas": {
        "wall_s": 401.5,
        "usage_pct": 62.41,
        "tta_s": {
            "large-balanced-rack": 37.9,
            "large-preferred-rack": 39.6,
            "large-required-rack": 39.6,
            "medium-balanced-rack": 106.3,
            "medium-preferred-rack": 106.3,
            "medium-required-rack": 107.1,
            "small-balanced-rack": 237.8,
            "small-preferred-rack": 246.1,
            "small-required-rack": 246.8,
        },
    },
}
POLICY_TICKS = {"seed": 10.0}  # the article's poll; everything else 2 s


def run(
    shape: Shape,
    scale: float,
    policy: str,
    *,
    tick_s: float | None = None,
    profile_dir: Path | None = None,
    keep_logs: Path | None = None,
    submitters: int = 4,
    polling_only: bool = False,
    bulk: bool = False,
    scoring: str = "LeastAllocated",
) -> dict:
    tick = tick_s if tick_s is not None else POLICY_TICKS.get(policy, 2.0)
    items = shape.schedule(scale)
    names = shape.namespace_names()
    user = stack.reset_database(names)
    with tempfile.TemporaryDirectory(prefix="bench-kueue-") as tmp:
        workdir = Path(tmp)
        config = stack.cluster_config(
            {name: {"requests.cpu": str(shape.quota_cpu)} for name in names},
            nodes=shape.nodes,
            node_cpu=shape.node_cpu,
            start_delay_s=shape.start_delay_s,
            scoring=scoring,
            node_groups=shape.node_groups(),
        )
        kubesim = stack.Kubesim(config, workdir, profile=profile_dir / f"kubesim-{policy}.txt" if profile_dir else None)
        dispatcher = None
        try:
            dispatcher = stack.Dispatcher(
                kubesim.kubeconfig,
                workdir,
                policy=policy,
                tick_s=tick,
                polling_only=polling_only,
                # Kueue's topology levels, widest first, when the config has a topology.
                extra_env={"JOBDASH_TOPOLOGY_LEVELS": ",".join(shape.topology_levels)} if shape.levels else None,
                profile=profile_dir / f"dispatcher-{policy}{'-polling' if polling_only else ''}.txt"
                if profile_dir
                else None,
            )
            stack.log(
                f"{policy} (tick {tick}s{', polling only' if polling_only else ''}) "
                f"{shape.name} at scale {scale}: {len(items)} jobs on {shape.nodes} nodes"
            )
            cpu_before = {
                "dispatcher": stack.cpu_seconds(dispatcher.process.pid),
                "kubesim": stack.cpu_seconds(kubesim.process.pid),
                "postgres": stack.postgres_cpu_seconds(),
                "bench": time.process_time(),
            }
            submitter = Submitter(user, shape, items, submitters, bulk=bulk, profile_dir=profile_dir)
            # Generous: polling only, the seed policy releases one job per namespace every other tick.
            timeout = 120 + 30 * shape.ideal_seconds(scale) + 2.5 * tick * len(items) / shape.namespaces
            finished = wait_until_finished(submitter, len(items), timeout)
            cpu = {
                "dispatcher": stack.cpu_seconds(dispatcher.process.pid) - cpu_before["dispatcher"],
                "kubesim": stack.cpu_seconds(kubesim.process.pid) - cpu_before["kubesim"],
                "postgres": stack.postgres_cpu_seconds() - cpu_before["postgres"],
                "submitters": submitter.cpu_s,
                "bench": time.process_time() - cpu_before["bench"],
            }
            cpu = {name: round(value, 1) for name, value in cpu.items()}
            audit = kubesim.audit()
            # With a topology: did every job run where its request says (bench.kueue_placement)?
            placement = (
                kueue_placement.check(shape, kueue_placement.pods(kubesim.url, stack.JOBDASH_TOKEN))
                if shape.levels
                else None
            )
        finally:
            if dispatcher is not None:
                dispatcher.stop()
            kubesim.stop()
            if keep_logs is not None:
                keep_logs.mkdir(parents=True, exist_ok=True)
                for path in workdir.glob("*.log"):
                    (keep_logs / path.name).write_text(path.read_text())
    result = measure(shape, scale, policy, audit, submitter, finished, cpu)
    result["tick_s"] = tick
    result["scoring"] = scoring
    bound = max(shape.ideal_seconds(scale), shape.node_bound_seconds(scale))
    result["node_bound_s"] = round(bound, 2)
    result["usage_bound_pct"] = round(100 * shape.ideal_seconds(scale) / bound, 1)
    result["nodes"] = shape.nodes
    if placement is not None:
        result["placement"] = placement
    result["class_bounds"] = shape.class_bounds(scale)
    result["loop"] = "polling" if polling_only else "events"
    result["submission"] = f"bulk ({BULK_WINDOW_S} s windows)" if bulk else "per job"
    return result


def side_by_side(shape: Shape, unbound: Shape, bound_runs: list[dict], free_runs: list[dict], scale: float) -> dict:
    """--quota-only's summary: the node-bound runs' means beside the quota-only runs' and
    Kueue's, per class too, with each class's bound on either node count (Shape.class_bounds:
    the quota's and the nodes' shortest time, and which is the longer)."""
    kueue: dict[str, Any] = KUEUE_MEANS.get(shape.name, {})
    node_bound = kueue_method.summarize(bound_runs)
    quota_only = kueue_method.summarize(free_runs)
    classes = sorted(set(node_bound["tta_s"]) | set(quota_only["tta_s"]) | set(kueue.get("tta_s", {})))
    bounds = {"node_bound": shape.class_bounds(scale), "quota_only": unbound.class_bounds(scale)}
    return {
        "nodes": {"node_bound": shape.nodes, "quota_only": unbound.nodes},
        "same_run": unbound is shape,  # the config's nodes never bind: one run stands for both
        "runs": {"node_bound": len(bound_runs), "quota_only": len(free_runs)},
        **{
            key: {
                "node_bound": node_bound[key]["mean"],
                "quota_only": quota_only[key]["mean"],
                "kueue": kueue.get("usage_pct" if key == "kueue_usage_pct" else key),
            }
            for key in ("wall_s", "kueue_usage_pct")
        },
        "tta_s": {
            cls: {
                "node_bound": node_bound["tta_s"].get(cls, {}).get("mean"),
                "quota_only": quota_only["tta_s"].get(cls, {}).get("mean"),
                "kueue": kueue.get("tta_s", {}).get(cls),
            }
            for cls in classes
        },
        "bound": {
            cls: {
                "node_bound": bounds["node_bound"][cls]["bound"],
                "quota_only": bounds["quota_only"][cls]["bound"],
                "quota_s": bounds["node_bound"][cls]["quota_s"],
                "nodes_s": {setting: bounds[setting][cls]["nodes_s"] for setting in bounds},
                "arrival_s": bounds["node_bound"][cls]["arrival_s"],
            }
            for cls in shape.classes
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--config", choices=sorted(SHAPES), default=BASELINE.name, help="Kueue's config (default baseline)"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of jobs per namespace (default 1.0)")
    parser.add_argument("--runs", type=int, default=1, help="main runs, each with a fresh stack (default 1)")
    parser.add_argument("--policy", default="priority", help="policy of the main run (default: priority)")
    parser.add_argument("--tick", type=float, default=None, help="tick of the main run (default 2 s; seed 10 s)")
    parser.add_argument("--compare-scale", type=float, default=0.02)
    parser.add_argument("--only", choices=("main", "compare"), default=None)
    parser.add_argument("--submitters", type=int, default=4, help="submitter processes (default 4)")
    parser.add_argument(
        "--bulk",
        action="store_true",
        help=f"submit the jobs due in each {BULK_WINDOW_S} s window in one jobs_submit_many call (main run)",
    )
    parser.add_argument(
        "--scoring",
        choices=("LeastAllocated", "MostAllocated"),
        default="LeastAllocated",
        help="kubesim's scheduler scoring (main run; default kube-scheduler's LeastAllocated)",
    )
    parser.add_argument(
        "--quota-only",
        action="store_true",
        help="run each main run twice, on the config's nodes and on enough that none binds (as Kueue's harness, "
        "which has no nodes), and put both beside Kueue's figures with the bound that limits each class",
    )
    parser.add_argument("--profile", type=Path, default=None, help="record py-spy profiles into this directory")
    parser.add_argument("--logs", type=Path, default=None, help="keep the kubesim and dispatcher logs here")
    parser.add_argument(
        "--rangespec", type=Path, default=None, help="write thresholds derived from the main runs' means (YAML)"
    )
    parser.add_argument(
        "--check", type=Path, default=None, help="a rangespec (YAML): exit 1 naming each metric a main run misses"
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs: at least 1")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    spec = kueue_method.load_rangespec(args.check) if args.check else None
    shape = SHAPES[args.config]

    # --quota-only: also on enough nodes that none binds (itself if it has them already).
    unbound = shape.quota_only() if args.quota_only else shape
    settings = [("node-bound", shape)] + ([("quota-only", unbound)] if unbound is not shape else [])

    stack.setup_django()
    results = []
    mains: list[dict] = []
    quota_mains: list[dict] = []
    if args.only in (None, "main"):
        for index in range(args.runs):
            # Interleaved (node-bound, quota-only, node-bound, ...): drift on the machine
            # falls on both alike.
            for label, run_shape in settings:
                logs = args.logs / f"run-{index + 1}" if args.logs and args.runs > 1 else args.logs
                if logs is not None and len(settings) > 1:
                    logs = logs / label
                result = run(
                    run_shape,
                    args.scale,
                    args.policy,
                    tick_s=args.tick,
                    profile_dir=args.profile,
                    keep_logs=logs,
                    submitters=args.submitters,
                    bulk=args.bulk,
                    scoring=args.scoring,
                )
                result["node_setting"] = label
                (mains if label == "node-bound" else quota_mains).append(result)
                print(json.dumps(result), flush=True)
        results += mains + quota_mains
    compare = {}
    if args.only in (None, "compare"):
        # The article's dispatcher (seed, woken by its 10 s poll only), seed in jobdash's
        # loop (same tick, also woken by cluster events and submissions), and the default.
        for label, policy, polling in (
            ("seed_polling", "seed", True),
            ("seed", "seed", False),
            ("priority", "priority", False),
        ):
            compare[label] = run(
                shape,
                args.compare_scale,
                policy,
                profile_dir=args.profile,
                keep_logs=args.logs,
                submitters=args.submitters,
                polling_only=polling,
            )
            results.append(compare[label])
            print(json.dumps(compare[label]), flush=True)
    main_run = results[0]
    summary = {
        **{
            k: main_run[k]
            for k in ("policy", "scale", "jobs", "wall_s", "ideal_s", "usage_pct", "tta_s", "double_releases", "lost")
        },
        "config": shape.name,
        "double_releases": sum(r["double_releases"] for r in results),
        "lost": sum(r["lost"] for r in results),
        "kueue": KUEUE_MEANS[shape.name],
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    failures = []
    if mains:
        # Over the main runs (the keys above are the first run's, as they always were).
        summary["main_runs"] = {"count": len(mains), **kueue_method.summarize(mains)}
        if args.quota_only:
            summary["quota_only"] = side_by_side(shape, unbound, mains, quota_mains or mains, args.scale)
        if args.rangespec:
            derived = kueue_method.derive_rangespec(mains)
            kueue_method.write_rangespec(args.rangespec, derived, f"{shape.name} at scale {args.scale}")
            summary["rangespec"] = {"path": str(args.rangespec), **derived}
        if spec is not None:
            for index, r in enumerate(mains):
                failures += [f"run {index + 1}: {line}" for line in kueue_method.check(spec, r)]
            for index, r in enumerate(quota_mains):
                failures += [f"quota-only run {index + 1}: {line}" for line in kueue_method.check(spec, r)]
            summary["check"] = {"path": str(args.check), "failures": failures}
    if compare:
        default = compare["priority"]
        summary["side_by_side"] = {
            "scale": args.compare_scale,
            **{
                label: {k: r[k] for k in ("wall_s", "usage_pct", "tta_s", "tick_s", "loop")}
                for label, r in compare.items()
            },
            "wall_ratio_seed_polling_over_default": round(compare["seed_polling"]["wall_s"] / default["wall_s"], 2),
            "wall_ratio_seed_over_default": round(compare["seed"]["wall_s"] / default["wall_s"], 2),
        }
    summary["runs"] = [
        {
            k: r.get(k)
            for k in (
                "policy",
                "node_setting",
                "nodes",
                "loop",
                "submission",
                "scale",
                "wall_s",
                "usage_pct",
                "kueue_usage_pct",
                "double_releases",
                "lost",
            )
        }
        for r in results
    ]
    print(json.dumps(summary), flush=True)
    for line in failures:
        print(f"check failed: {line}", file=sys.stderr)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
