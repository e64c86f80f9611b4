"""Several clusters in the replay (issue 49, ``--clusters``, ``--dispatch``; bench/replay/multi_cluster.py).

A tiny synthetic trace on VCs "a" and "b" of 8 nodes each: 16 nodes, 2 racks of 8, so
``--clusters 2`` makes two clusters of one rack (64 GPUs) each.  Jobs of 1 to 32 GPUs (a
32-GPU gang takes 4 nodes: it fits one cluster, and may not straddle two).
"""

import json
import random
from collections import Counter
from types import SimpleNamespace

import pytest

from bench import trace_replay
from bench.replay.engine import Replay, ReplayConfig
from bench.replay.mapping import RACK_NODES, cluster_of_racks
from bench.replay.metrics import json_line, summarize
from bench.replay.records import DONE
from bench.replay.trace import TraceJob, parse_time
from queueing.clusters import CLUSTER_LABEL

T0 = parse_time("2017-10-01")
VCS = {"a": 8, "b": 8}


def trace(count: int = 80, seed: int = 11) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs = [
        TraceJob(
            i,
            T0 + rng.randrange(0, 4 * 3600),
            float(rng.randrange(60, 4 * 3600)),
            rng.choice([1, 1, 1, 2, 4, 8, 8, 16, 32]),
            rng.choice("ab"),
        )
        for i in range(1, count + 1)
    ]
    return sorted(jobs, key=lambda j: (j.submit, j.id))


def replayed(jobs, **options) -> Replay:
    replay = Replay(jobs, VCS, ReplayConfig("priority", **options), T0)
    replay.result = replay.run()
    return replay


def test_racks_are_kept_whole_and_the_clusters_get_about_equal_gpus():
    assert cluster_of_racks(20, 1) == ["c0"] * 20
    for clusters, sizes in ((2, [176, 176]), (3, [120, 112, 120]), (4, [88] * 4)):
        names = cluster_of_racks(352, clusters)
        counts = Counter(names)
        assert [counts[f"c{i}"] for i in range(clusters)] == sizes
        for first in range(0, 352, RACK_NODES):  # every rack in one cluster
            assert len(set(names[first : first + RACK_NODES])) == 1
        assert names == sorted(names, key=lambda name: int(name[1:]))  # runs of racks in node order
    assert cluster_of_racks(20, 2) == ["c0"] * 8 + ["c1"] * 12  # racks of 8, 8 and 4: the middles decide
    with pytest.raises(ValueError):
        cluster_of_racks(16, 3)  # 2 racks


@pytest.mark.parametrize("dispatch", ["plan", "first-admits"])
@pytest.mark.parametrize("quota", ["fixed", "elastic"])
def test_no_gang_spans_clusters(dispatch, quota):
    replay = replayed(trace(), clusters=2, dispatch=dispatch, quota=quota)
    assert {labels[CLUSTER_LABEL] for labels in replay.node_labels.values()} == {"c0", "c1"}
    node_cluster = replay.node_cluster
    recs = replay.result.jobs
    assert all(rec.state == DONE for rec in recs)
    for rec in recs:
        # The last release's planned nodes, all in the job's cluster (the replay checks every
        # release and every pod as it binds, and raises otherwise).
        assert rec.cluster in ("c0", "c1")
        assert {node_cluster[node] for _, _, node in rec.placement} == {rec.cluster}
    assert (
        set(replay.stats["admitted_by_cluster"]) == {"c0", "c1"}
        and min(replay.stats["admitted_by_cluster"].values()) > 0
    )
    line = json_line(summarize(replay.result))
    assert line["clusters"] == 2 and line["dispatch"] == dispatch
    by_cluster = line["gpu_hours_by_cluster"]
    assert set(by_cluster) == {"c0", "c1"} and min(by_cluster.values()) > 0
    assert sum(by_cluster.values()) == pytest.approx(line["gpu_hours"], abs=0.2)
    if dispatch == "first-admits":
        assert replay.stats["cluster_plans"] == 2 * replay.stats["cycles"]


def test_a_release_or_a_pod_outside_the_jobs_cluster_raises():
    replay = Replay(trace(4), VCS, ReplayConfig("priority", clusters=2), T0)
    rec = SimpleNamespace(job=SimpleNamespace(id=7), cluster="")
    spanning = SimpleNamespace(placement=(("Worker", 0, "node-0"), ("Worker", 1, "node-8")), cluster="c0")
    with pytest.raises(AssertionError, match="span clusters"):
        replay._in_one_cluster(rec, spanning)
    misnamed = SimpleNamespace(placement=(("Worker", 0, "node-8"),), cluster="c0")
    with pytest.raises(AssertionError, match="admitted to c0"):
        replay._in_one_cluster(rec, misnamed)
    replay._in_one_cluster(rec, SimpleNamespace(placement=(("Worker", 0, "node-9"),), cluster="c1"))
    assert rec.cluster == "c1"
    with pytest.raises(AssertionError, match="bound to node-1"):
        replay._bound_in_cluster(rec, "node-1")


def write(tmp_path, jobs):
    path = tmp_path / "trace.csv"
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for j in jobs:
        at = int(j.submit - T0)
        rows.append(f"2017-10-01 {at // 3600:02d}:{at % 3600 // 60:02d}:{at % 60:02d},{j.duration},{j.gpus},0,{j.vc}")
    path.write_text("\n".join(rows) + "\n")
    vcs = tmp_path / "vc.csv"
    vcs.write_text("vc,node num\n" + "".join(f"{vc},{nodes}\n" for vc, nodes in VCS.items()))
    return ["--trace", str(path), "--vc-nodes", str(vcs), "--policy", "priority", "--quota", "elastic"]


def test_cli_one_cluster_gives_the_numbers_of_no_clusters_and_both_modes_run(tmp_path, capsys):
    common = [*write(tmp_path, trace()), "--cache-dir", str(tmp_path / "cache"), "--compress", "3"]
    for extra in ([], ["--clusters", "1"], ["--clusters", "2"], ["--clusters", "2", "--dispatch", "first-admits"]):
        trace_replay.main([*common, *extra])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["label"] for line in lines] == [
        "priority+elastic@x3",
        "priority+elastic+c1@x3",
        "priority+elastic+c2@x3",
        "priority+elastic+c2-first-admits@x3",
    ]
    plain, one, two, first = lines
    assert (plain["clusters"], one["clusters"], two["clusters"], first["clusters"]) == (1, 1, 2, 2)
    assert [line["dispatch"] for line in lines] == ["plan", "plan", "plan", "first-admits"]
    assert plain["gpu_hours_by_cluster"] is None and one["gpu_hours_by_cluster"] == {"c0": one["gpu_hours"]}
    skip = {"label", "runtime_s", "gpu_hours_by_cluster"}
    assert {k: v for k, v in plain.items() if k not in skip} == {k: v for k, v in one.items() if k not in skip}
    # The full summaries too, but for the wall times and the counts kept only with clusters.
    cache = tmp_path / "cache" / "all_all"
    full = [json.loads((cache / f"{line['label']}.json").read_text()) for line in (plain, one)]
    for summary in full:
        for key in ("label", "runtime_s", "stats", "gpu_hours_by_cluster", "code", "machine"):
            summary.pop(key)
    assert full[0] == full[1]
    for line in (two, first):
        assert sum(line["gpu_hours_by_cluster"].values()) == pytest.approx(line["gpu_hours"], abs=0.2)


def test_cli_refuses_what_clusters_do_not_replay(tmp_path):
    common = write(tmp_path, trace(4))
    for extra in (
        ["--dispatch", "first-admits"],
        ["--clusters", "2", "--no-pin"],
        ["--clusters", "2", "--elastic", "0.3"],
    ):
        with pytest.raises(SystemExit):
            trace_replay.main([*common, *extra])
