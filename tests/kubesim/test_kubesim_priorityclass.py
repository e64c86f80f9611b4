"""scheduling.k8s.io/v1 PriorityClass: cluster-scoped, value validated and immutable."""

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import BASE_CONFIG, JOBDASH


@pytest.fixture
def config():
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10000}
    return {**BASE_CONFIG, "objects": [high]}


@pytest.fixture
def scheduling(sim):
    api_client = sim.api_client(JOBDASH)
    yield client.SchedulingV1Api(api_client)
    api_client.close()


def test_priority_classes_are_served_cluster_scoped_with_defaults(scheduling):
    high = scheduling.read_priority_class("high")
    assert (high.value, high.global_default, high.preemption_policy) == (10000, False, "PreemptLowerPriority")
    scheduling.create_priority_class(
        client.V1PriorityClass(metadata=client.V1ObjectMeta(name="low"), value=100, description="batch")
    )
    assert sorted((p.metadata.name, p.value) for p in scheduling.list_priority_class().items) == [
        ("high", 10000),
        ("low", 100),
    ]


def test_value_is_validated_and_immutable(scheduling):
    with pytest.raises(ApiException) as refused:
        scheduling.create_priority_class(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": 2**31}
        )
    assert refused.value.status == 422 and "value" in refused.value.body
    with pytest.raises(ApiException) as refused:
        scheduling.create_priority_class(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "Bad_Name"},
                "value": 1,
            }
        )
    assert refused.value.status == 422
    with pytest.raises(ApiException) as refused:
        scheduling.patch_priority_class("high", {"value": 1})
    assert refused.value.status == 422 and "may not be changed" in refused.value.body
    scheduling.patch_priority_class("high", {"description": "deadlines"})
    assert scheduling.read_priority_class("high").description == "deadlines"
