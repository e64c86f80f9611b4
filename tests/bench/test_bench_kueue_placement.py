"""bench.kueue_placement: a topology run's pods against their classes' requests."""

from bench.kueue_placement import JOB_NAME, REPLICA_INDEX, check, domains_of
from bench.kueue_shape import TAS

RACK = "cloud.provider.com/topology-rack"


def pods(name: str, nodes: list[str | None], namespace: str = "ns-00") -> list[dict]:
    return [
        {"namespace": namespace, "labels": {JOB_NAME: name, REPLICA_INDEX: str(i)}, "node": node}
        for i, node in enumerate(nodes)
    ]


def test_nodes_map_to_kueues_racks():
    racks = domains_of(TAS, RACK)
    assert len(racks) == 640 and racks["node-b0-r3-63"] == "rack-3" and racks["node-b0-r0-0"] == "rack-0"


def test_each_request_is_checked_as_it_reads():
    r0, r1 = "node-b0-r0-1", "node-b0-r1-7"
    listed = [
        *pods("large-required-rack-0000", [r0] * 8),  # kept
        *pods("large-required-rack-0001", [r0] * 7 + [r1]),  # broken
        *pods("large-balanced-rack-0000", [r0] * 4 + [r1] * 4),  # two slices of 4, each in a rack
        *pods("large-balanced-rack-0001", [r0] * 3 + [r1] * 5),  # a slice across racks
        *pods("medium-preferred-rack-0000", [r0, r0, r1, r1]),  # spread: allowed, counted
        *pods("small-required-rack-0000", [r0, None]),  # a pod with no node
        {"namespace": "ns-00", "labels": {}, "node": r0},  # not a job's
    ]
    assert check(TAS, listed) == {
        "jobs": 6,
        "pods": 38,
        "unplaced": 1,
        "required_broken": 2,
        "slices_broken": 1,
        "preferred_spread": 1,
    }
