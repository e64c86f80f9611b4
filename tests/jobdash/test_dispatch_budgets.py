"""Budgets and fair share with memory in the dispatcher (issue 37), from the usage table:
a namespace past its monthly GPU-hour budget waits (or takes what is left, as borrowing), and
the job page and the submit check say so; with the fair policy and a half-life, the team that
used more lately waits behind the one that did not, and its reason says so."""

import json
from datetime import UTC, datetime

import pytest
from django.utils import timezone

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, Namespace, State
from jobdash.usage.models import UsageDay
from kubesim.testing import batch_job_manifest, running_kubesim

from .dispatch_support import JOBDASH, ManualClock, settings, start_gateway

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sim():
    config = {
        "nodes": [{"prefix": "node", "count": 1, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        "namespaces": [
            {"name": "team-a", "quota": {"requests.cpu": "64"}},
            {"name": "team-b", "quota": {"requests.cpu": "64"}},
        ],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
    }
    with running_kubesim(config, manual_clock=True) as sim:
        yield sim


def used(namespace: str, hours: float) -> None:
    today = timezone.now().astimezone(UTC).date()
    UsageDay.objects.create(day=today, namespace=namespace, user="someone", gpu_s=hours * 3600)


def submit(user, name: str, namespace: str, cpu: str = "6", priority: int = 0) -> Job:
    manifest = batch_job_manifest(name, namespace, cpu=cpu, memory="1Gi", duration=600)
    return services.job_submit(user=user, manifest=json.dumps(manifest), source="api", priority=priority)


def test_a_namespace_past_its_budget_waits_and_the_pages_say_so(user, client, sim, term):
    Namespace.objects.filter(name="team-a").update(gpu_hour_budget=1000, over_budget="wait")
    used("team-a", 1050)
    gateway = start_gateway(sim)
    try:
        dispatcher = Dispatcher(gateway, settings(), clock=ManualClock(datetime.now(UTC)))
        late = submit(user, "late", "team-a")
        other = submit(user, "other", "team-b", cpu="1")
        dispatcher.cycle(term)
    finally:
        gateway.stop()
    waiting = Job.objects.get(pk=late.pk)
    assert (waiting.state, waiting.reason) == (State.QUEUED, "OverBudget")
    assert waiting.message.startswith("team-a used 1,050 of its 1,000 GPU-h budget this month")
    assert Job.objects.get(pk=other.pk).state != State.QUEUED
    client.force_login(user)
    page = client.get(f"/jobs/{late.pk}/").content.decode()
    assert "team-a has used 1,050 of its 1,000 GPU-h budget this month: its jobs wait" in page
    check = client.post("/submit/check/", {"manifest": json.dumps(batch_job_manifest("x", "team-a"))})
    assert "its jobs wait for the next month or a larger budget" in check.content.decode()


def test_fair_share_with_memory_lets_the_team_that_used_less_go_first(user, sim, term):
    used("team-a", 1200)
    used("team-b", 400)
    gateway = start_gateway(sim)
    try:
        dispatcher = Dispatcher(
            gateway, settings(policy="fair", usage_half_life_days=7.0), clock=ManualClock(datetime.now(UTC))
        )
        first = submit(user, "a-job", "team-a")  # (without memory: the tie goes to team-a, by name)
        second = submit(user, "b-job", "team-b")
        dispatcher.cycle(term)
    finally:
        gateway.stop()
    assert Job.objects.get(pk=second.pk).state != State.QUEUED
    held = Job.objects.get(pk=first.pk)
    assert held.state == State.QUEUED
    assert "; team-a used 1,200 GPU-h lately, 1.5 times its share" in held.message
