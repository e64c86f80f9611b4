"""Namespace.policy reaches the planner through the dispatcher's snapshot."""

import pytest

from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.phases.snapshot_phase import namespace_policies
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State
from kubesim.testing import running_kubesim

from .dispatch_support import cluster_config, manifest, settings, start_gateway

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway():
    with running_kubesim(cluster_config(quota_cpu="20"), manual_clock=True) as sim:
        gateway = start_gateway(sim)
        yield gateway
        gateway.stop()


def submit_two(user, namespace):
    return [
        services.job_submit(user=user, manifest=manifest(f"{namespace}-{i}", namespace=namespace), source="api")
        for i in range(2)
    ]


def test_a_seed_namespace_releases_one_job_per_cycle_the_others_all_that_fit(user, gateway):
    transitions.take_term(1, "test")
    Namespace.objects.filter(name="team-a").update(policy="seed")
    seeded, default = submit_two(user, "team-a"), submit_two(user, "team-b")
    Dispatcher(gateway, settings(policy="priority")).cycle(1)
    states = dict(Job.objects.values_list("name", "state"))
    assert sorted(states[j.name] for j in seeded) == [State.QUEUED, State.RELEASED]
    assert [states[j.name] for j in default] == [State.RELEASED, State.RELEASED]
    waiting = Job.objects.get(namespace__name="team-a", state=State.QUEUED)
    assert waiting.reason == "WaitingForInFlight" and waiting.position == 1


def test_unknown_stored_policies_fall_back_to_the_global_one():
    assert namespace_policies([("a", "fifo"), ("b", ""), ("c", "retired-policy")]) == {"a": "fifo"}
