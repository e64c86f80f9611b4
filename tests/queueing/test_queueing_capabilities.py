"""Kind capabilities are declared by protocol (queueing/capabilities.py), and what a kind
does not declare gets the written default, on both the core's and the cluster's side."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from jobdash.cluster import kinds
from jobdash.cluster.gateway import PodInfo
from queueing import ADAPTERS, BY_KEY, JobStatus, PodSet, Workload, assign_generated_name, capabilities
from queueing import kinds as core
from queueing.workload import RuntimeSource, register, resource_key


@dataclass(frozen=True)
class Bare:
    """A kind with nothing but the core: no name rule, no suspend flag, no role label."""

    api_version: str = "example.com/v1"
    kind: str = "Bare"
    plural: str = "bares"
    pod_job_label: str = "example.com/bare-name"

    def validate_and_build(self, manifest: Mapping[str, Any], runtimes: RuntimeSource | None = None) -> Workload:
        raise NotImplementedError

    def status(self, obj: Mapping[str, Any]) -> JobStatus:
        return JobStatus("")


@dataclass(frozen=True)
class DriverFirst(Bare):
    """Started once its driver runs, whatever its workers do; names of at most 10 characters."""

    kind: str = "DriverFirst"
    plural: str = "driverfirsts"
    pod_role_label: str = "example.com/role"

    def started(self, workload: Workload, running: Mapping[str, int]) -> bool:
        return running.get("driver", 0) >= 1

    def name_problem(self, name: str) -> str | None:
        return "at most 10 characters" if len(name) > 10 else None


@pytest.fixture
def registered():
    """The two kinds, registered for the test only (the project's kinds are checked against
    the deployment files elsewhere)."""
    adapters = [register(Bare()), register(DriverFirst())]
    yield adapters
    for adapter in adapters:
        ADAPTERS.pop((adapter.api_version, adapter.kind))
        BY_KEY.pop(resource_key(adapter))


def workload(kind: str) -> Workload:
    return Workload(
        kind, "example.com/v1", "w", "ns", (PodSet("driver", 1, {"cpu": 1}), PodSet("worker", 2, {"cpu": 1}))
    )


def pod(name: str, phase: str, role: str | None = None) -> PodInfo:
    labels = {"example.com/role": role} if role else {}
    return PodInfo("ns", name, phase, "n1", labels, {})


def test_every_kind_of_the_project_declares_what_it_can_do():
    for adapter in BY_KEY.values():
        assert isinstance(adapter, capabilities.JobWithNameRule), adapter.kind
        assert not isinstance(adapter, capabilities.JobWithStartRule), adapter.kind
        # A kind is either an object that can wait suspended, or its pods (waiting gated, never taken back).
        pods = capabilities.objects_are_pods(adapter)
        assert isinstance(adapter, capabilities.JobWithSuspendFlag) is not pods, adapter.kind
        assert capabilities.can_take_back(adapter) is not pods, adapter.kind
    assert capabilities.objects_are_pods(core.POD) and not capabilities.can_take_back(core.POD)
    assert "never taken back" in capabilities.not_taken_back(core.POD)
    # A batch Job's pods carry no role label: it has one group.
    assert not isinstance(core.JOB, capabilities.JobWithPodRoles)
    assert isinstance(core.TFJOB, capabilities.JobWithPodRoles)


def test_what_a_kind_does_not_declare_gets_the_default(registered):
    bare, _ = registered
    key = resource_key(bare)
    assert capabilities.suspend_path(bare) is None and not kinds.can_suspend(key)
    assert not kinds.is_suspended(key, {"spec": {"suspend": True}})
    with pytest.raises(ValueError):
        kinds.suspend_patch(key, True)
    manifest = {"apiVersion": "example.com/v1", "kind": "Bare", "metadata": {"generateName": "Has.Dots-"}}
    with pytest.raises(Exception, match="metadata.generateName"):
        assign_generated_name(manifest, "bcdfg")  # the default rule: a DNS-1035 label
    # One group: every pod is of the only role; started when every pod of the gang runs.
    alone = Workload("Bare", "example.com/v1", "w", "ns", (PodSet("worker", 2, {"cpu": 1}),))
    assert kinds.pod_role(key, pod("a", "Running"), ["worker"]) == "worker"
    assert not kinds.started(key, alone, [pod("a", "Running"), pod("b", "Pending")])
    assert kinds.started(key, alone, [pod("a", "Running"), pod("b", "Running")])


def test_a_declared_start_and_name_rule_are_the_kinds_own(registered):
    _, driver_first = registered
    key = resource_key(driver_first)
    shape = workload("DriverFirst")
    assert not kinds.started(key, shape, [pod("w0", "Running", "worker"), pod("w1", "Running", "worker")])
    assert kinds.started(key, shape, [pod("d", "Running", "driver"), pod("w0", "Pending", "worker")])
    manifest = {"apiVersion": "example.com/v1", "kind": "DriverFirst", "metadata": {"generateName": "much-too-long-"}}
    with pytest.raises(Exception, match="at most 10 characters"):
        assign_generated_name(manifest, "bcdfg")
    assert "example.com/role" in kinds.pod_labels()
