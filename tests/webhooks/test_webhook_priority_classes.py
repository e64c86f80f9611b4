"""A webhook submission's priority class comes from its pods' priorityClassName (or the
namespace's default) and is held to the namespace's limit, as a member's is."""

import pytest

from jobdash.jobs.models import Job
from kubesim.testing import running_kubesim
from tests.jobdash.dispatch_support import JOBDASH

from .conftest import trial_tfjob

pytestmark = pytest.mark.usefixtures("deny_mode")


@pytest.fixture
def cluster(settings):
    classes = {"normal": 1000, "urgent": 100000}
    config = {
        "namespaces": [{"name": "team-a"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "objects": [
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
            for n, v in classes.items()
        ],
    }
    with running_kubesim(config, manual_clock=True) as sim:
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        yield sim


def with_class(body: dict, name: str) -> dict:
    body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = name
    return body


def test_the_pods_class_is_used_and_held_to_the_limit(webhook, team_a, cluster):
    team_a.max_priority_class = "normal"
    team_a.save()
    refused = webhook(with_class(trial_tfjob("t-1"), "urgent"))
    assert refused["allowed"] is False and refused["status"]["code"] == 403
    assert "priority class 'urgent' (100000) is above team-a's limit 'normal' (1000)" in refused["status"]["message"]
    assert not Job.objects.exists()
    queued = webhook(with_class(trial_tfjob("t-2"), "normal"))
    assert queued["allowed"] is False and "queued by jobdash" in queued["status"]["message"]
    assert Job.objects.values_list("priority", "priority_class").get() == (1000, "normal")
