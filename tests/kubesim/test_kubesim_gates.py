"""Pod scheduling gates (KEP-3521) and the mutable scheduling directives of gated pods
(KEP-3838), as the API server and the scheduler treat them, through the official client."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import BASE_CONFIG

GATE = "jobdash.io/placement"
CONFIG = {
    "nodes": [{"prefix": "node", "count": 3, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
    "namespaces": [{"name": "team-a"}],
    "users": BASE_CONFIG["users"],
    "kubelet": {"start_delay_seconds": 1},
}


@pytest.fixture
def config():
    return CONFIG


def pod(name: str, gates: list[str] | None = None, **spec) -> dict:
    body: dict = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}], **spec},
    }
    if gates is not None:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return body


def error(exc: pytest.ExceptionInfo) -> tuple[int, str]:
    return exc.value.status, json.loads(exc.value.body)["message"]


def merge(core: client.CoreV1Api, name: str, patch: dict) -> client.V1Pod:
    """A JSON merge patch, as jobdash sends it."""
    return core.patch_namespaced_pod(name, "team-a", patch, _content_type="application/merge-patch+json")


def test_a_gated_pod_waits_and_is_scheduled_where_its_selector_says_once_released(sim, core):
    created = core.create_namespaced_pod("team-a", pod("p", [GATE, "example.com/other"]))
    assert [c.reason for c in created.status.conditions] == ["SchedulingGated"]
    assert created.status.conditions[0].message == "Scheduling is blocked due to non-empty scheduling gates"
    assert created.status.conditions[0].status == "False"
    sim.advance(30)
    current = core.read_namespaced_pod("p", "team-a")
    assert current.spec.node_name is None and current.status.phase == "Pending"
    # jobdash's patch: pin the node and drop its gate, keep the other one.
    patched = merge(
        core,
        "p",
        {
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": "node-2"},
                "schedulingGates": [{"name": "example.com/other"}],
            },
        },
    )
    assert patched.spec.node_selector == {"kubernetes.io/hostname": "node-2"}
    sim.advance(30)
    assert core.read_namespaced_pod("p", "team-a").spec.node_name is None  # one gate left
    merge(core, "p", {"spec": {"schedulingGates": None}})
    sim.advance(5)
    released = core.read_namespaced_pod("p", "team-a")
    assert released.spec.node_name == "node-2"
    assert released.status.phase == "Running"
    scheduled = [c for c in released.status.conditions if c.type == "PodScheduled"]
    assert [(c.status, c.reason) for c in scheduled] == [("True", None)]


def test_a_stale_resource_version_precondition_is_a_conflict(sim, core):
    created = core.create_namespaced_pod("team-a", pod("stale", [GATE]))
    merge(core, "stale", {"metadata": {"labels": {"x": "y"}}})
    with pytest.raises(ApiException) as exc:
        merge(
            core,
            "stale",
            {"metadata": {"resourceVersion": created.metadata.resource_version}, "spec": {"schedulingGates": None}},
        )
    assert exc.value.status == 409
    assert core.read_namespaced_pod("stale", "team-a").spec.scheduling_gates


def test_gates_may_be_removed_but_never_added(sim, core):
    core.create_namespaced_pod("team-a", pod("g", [GATE]))
    with pytest.raises(ApiException) as exc:
        merge(core, "g", {"spec": {"schedulingGates": [{"name": GATE}, {"name": "example.com/new"}]}})
    assert error(exc) == (
        422,
        'Pod "g" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, '
        "but found new scheduling gate 'example.com/new'",
    )
    merge(core, "g", {"spec": {"schedulingGates": None}})
    with pytest.raises(ApiException) as exc:
        merge(core, "g", {"spec": {"schedulingGates": [{"name": GATE}]}})
    assert "only deletion is allowed, but found new scheduling gate 'jobdash.io/placement'" in error(exc)[1]


def test_gate_names_are_unique_qualified_names(sim, core):
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("team-a", pod("dup", [GATE, GATE]))
    assert error(exc) == (422, 'Pod "dup" is invalid: spec.schedulingGates[1]: Duplicate value: "jobdash.io/placement"')
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("team-a", pod("bad", ["-bad-"]))
    status, message = error(exc)
    assert status == 422 and message.startswith(
        'Pod "bad" is invalid: spec.schedulingGates[0]: Invalid value: "-bad-": name part must consist of'
    )
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("team-a", pod("bound", [GATE], nodeName="node-0"))
    assert error(exc)[1] == (
        'Pod "bound" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared'
    )


def test_a_gated_pod_may_only_narrow_its_node_selector(sim, core):
    core.create_namespaced_pod("team-a", pod("ns", [GATE], nodeSelector={"pool": "a"}))
    merge(core, "ns", {"spec": {"nodeSelector": {"pool": "a", "kubernetes.io/hostname": "node-1"}}})
    for change in ({"pool": "b"}, {"pool": None}):
        with pytest.raises(ApiException) as exc:
            merge(core, "ns", {"spec": {"nodeSelector": change}})
        status, message = error(exc)
        assert status == 422
        assert "spec.nodeSelector: Invalid value: " in message
        assert message.endswith("only additions to spec.nodeSelector are allowed (no mutations or deletions)")
    assert core.read_namespaced_pod("ns", "team-a").spec.node_selector == {
        "pool": "a",
        "kubernetes.io/hostname": "node-1",
    }


def test_a_gated_pod_may_only_narrow_its_required_node_affinity(sim, core):
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
    core.create_namespaced_pod("team-a", pod("aff", [GATE]))
    # None before: any required affinity may be set.
    required = {"nodeSelectorTerms": [term]}
    merge(
        core,
        "aff",
        {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}},
    )
    narrower = {
        "nodeSelectorTerms": [{"matchExpressions": term["matchExpressions"] + [{"key": "rack", "operator": "Exists"}]}]
    }
    merge(
        core,
        "aff",
        {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": narrower}}}},
    )
    wider = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b", "c"]}]}]
    }
    with pytest.raises(ApiException) as exc:
        merge(
            core,
            "aff",
            {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": wider}}}},
        )
    assert (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: Invalid value:"
        in error(exc)[1]
    )
    assert error(exc)[1].endswith("only additions are allowed (no mutations or deletions)")
    two = {"nodeSelectorTerms": narrower["nodeSelectorTerms"] + [term]}
    with pytest.raises(ApiException) as exc:
        merge(
            core,
            "aff",
            {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": two}}}},
        )
    assert error(exc)[1].endswith("no additions/deletions to non-empty NodeSelectorTerms list are allowed")


def test_an_ungated_pod_is_immutable_but_for_the_api_servers_exceptions(sim, core):
    core.create_namespaced_pod("team-a", pod("plain", nodeSelector={"pool": "a"}))
    with pytest.raises(ApiException) as exc:
        merge(core, "plain", {"spec": {"nodeSelector": {"pool": "a", "kubernetes.io/hostname": "node-1"}}})
    status, message = error(exc)
    assert status == 422
    assert message.startswith(
        'Pod "plain" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
        "`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
        "(allow it to be set to 1 if it was previously negative)"
    )
    assert "nodeSelector" in message
    # The exceptions: an image, an added toleration, a label.
    # (a strategic merge patch: containers merge by name; a merge patch would replace the list)
    strategic = {"spec": {"containers": [{"name": "main", "image": "busybox:2"}]}, "metadata": {"labels": {"a": "b"}}}
    core.patch_namespaced_pod("plain", "team-a", strategic, _content_type="application/strategic-merge-patch+json")
    tolerations = core.read_namespaced_pod("plain", "team-a").to_dict()["spec"]["tolerations"]
    added = [
        {"key": k, "operator": t["operator"], "effect": t["effect"], "tolerationSeconds": t["toleration_seconds"]}
        for t in tolerations
        for k in [t["key"]]
    ]
    added.append({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"})
    merge(core, "plain", {"spec": {"tolerations": added}})
    with pytest.raises(ApiException) as exc:
        merge(core, "plain", {"spec": {"tolerations": added[:-1]}})
    assert error(exc)[1].endswith(
        "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
    )
    current = core.read_namespaced_pod("plain", "team-a")
    assert current.spec.containers[0].image == "busybox:2"
    assert len(current.spec.tolerations) == 3


def test_every_pod_tolerates_node_failures_for_300_seconds(sim, core):
    created = core.create_namespaced_pod("team-a", pod("tol"))
    assert [(t.key, t.operator, t.effect, t.toleration_seconds) for t in created.spec.tolerations] == [
        ("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300),
    ]
    own = {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 60,
    }
    created = core.create_namespaced_pod("team-a", pod("own", tolerations=[own]))
    assert [(t.key, t.toleration_seconds) for t in created.spec.tolerations] == [
        ("node.kubernetes.io/unreachable", 60),
        ("node.kubernetes.io/not-ready", 300),
    ]
    everything = {"operator": "Exists"}
    created = core.create_namespaced_pod("team-a", pod("all", tolerations=[everything]))
    assert [t.operator for t in created.spec.tolerations] == ["Exists"]


def test_malformed_tolerations_and_node_affinity_are_refused(sim, core):
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(
            "team-a",
            pod("t", tolerations=[{"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
        )
    assert error(exc)[1].endswith(
        "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set"
    )
    bad = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [{"key": "zone", "operator": "In"}],
                "matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}],
            }
        ]
    }
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(
            "team-a", pod("a", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": bad}})
        )
    message = error(exc)[1]
    assert (
        "nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        in message
    )
    assert (
        'nodeSelectorTerms[0].matchFields[0].key: Invalid value: "metadata.uid": not a valid field selector key'
        in message
    )
