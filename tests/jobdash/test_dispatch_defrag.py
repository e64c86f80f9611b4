"""Defragmentation end to end (issue 48; PostgreSQL, the real gateway, kubesim over HTTP): two
8-GPU nodes each half taken by a 4-GPU job that checkpoints on notice; an 8-GPU job waits.
With JOBDASH_DEFRAG the dispatcher moves one of them: it is told, writes its checkpoint, leaves
within a cycle of it, the waiting job starts on the node it left, and the mover starts again at
once beside the other, from its checkpoint, its object never made twice. Off, the job waits."""

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, LostWork, Namespace, State
from kubesim.testing import running_kubesim
from queueing.defrag import DefragRules

from .dispatch_support import JOBDASH, ManualClock, advance, settings, start_gateway

pytestmark = pytest.mark.django_db

RULES = DefragRules(limit_gpu_s=3600.0, window_s=3600.0)


def gpu_job(name: str, gpus: int, duration: int, on_notice: bool = False) -> str:
    notice = '\n    jobdash.io/checkpoint-on-notice: "30s"' if on_notice else ""
    return f"""apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: {name}
  namespace: team-a
  annotations:
    kubesim.io/duration-seconds: "{duration}"
    kubesim.io/checkpoint-seconds: "20"{notice}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers:
            - name: tensorflow
              image: tf:2
              resources:
                requests: {{cpu: "1", memory: 1Gi, nvidia.com/gpu: "{gpus}"}}
                limits: {{nvidia.com/gpu: "{gpus}"}}
"""


@pytest.fixture
def world(db):
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}
    config = {
        "start_time": timezone.now().timestamp(),  # the dispatcher's clock starts now too
        "nodes": [{"prefix": "gpu", "count": 2, "capacity": capacity}],
        "namespaces": [{"name": "team-a"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
    }
    with running_kubesim(config, manual_clock=True) as sim:
        gateway = start_gateway(sim)
        try:
            user = User.objects.create_user("ana")
            Namespace.objects.create(name="team-a").members.add(user)
            from jobdash.dispatch.writers import transitions

            transitions.take_term(1, "test")
            yield sim, gateway, user
        finally:
            gateway.stop()


def row(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def step(dispatcher, sim, gateway, seconds: float = 1.0) -> None:
    dispatcher.cycle(1)
    advance(sim, gateway, dispatcher.clock, seconds)


def until(dispatcher, sim, gateway, check, steps=60, seconds=1.0) -> None:
    for _ in range(steps):
        if check():
            return
        step(dispatcher, sim, gateway, seconds)
    raise AssertionError("never")


def scattered(dispatcher, sim, gateway, user) -> tuple[Job, Job, Job]:
    """Four 4-GPU jobs fill both nodes (best fit: two on each); the short one on each ends,
    leaving 4 GPUs free on each node; then an 8-GPU job comes."""
    submit = lambda name, gpus, duration, on_notice=False: services.job_submit(  # noqa: E731
        user=user, manifest=gpu_job(name, gpus, duration, on_notice), source="api"
    )
    left = submit("left", 4, 600, on_notice=True)
    short_a = submit("short-a", 4, 10)
    right = submit("right", 4, 600, on_notice=True)
    short_b = submit("short-b", 4, 10)
    until(dispatcher, sim, gateway, lambda: all(row(j).state == State.RUNNING for j in (left, short_a, right, short_b)))
    nodes = {j.name: {n for _, _, n in row(j).placement} for j in (left, short_a, right, short_b)}
    assert nodes["left"] != nodes["right"], nodes  # one long job on each node
    until(dispatcher, sim, gateway, lambda: row(short_a).state == row(short_b).state == State.SUCCEEDED, seconds=2.0)
    big = submit("big", 8, 30)
    return left, right, big


def test_off_the_big_job_waits_for_nodes_while_8_gpus_are_free(world):
    sim, gateway, user = world
    dispatcher = Dispatcher(gateway, settings(), clock=ManualClock())
    left, right, big = scattered(dispatcher, sim, gateway, user)
    for _ in range(3):
        step(dispatcher, sim, gateway)
    assert row(big).state == State.QUEUED and row(big).reason == "NoNodeFits"
    assert row(left).preempted_for_id is None and row(right).preempted_for_id is None


def test_on_a_mover_checkpoints_leaves_the_big_job_starts_and_the_mover_starts_again_at_once(world):
    sim, gateway, user = world
    dispatcher = Dispatcher(gateway, settings(defrag=RULES), clock=ManualClock())
    left, right, big = scattered(dispatcher, sim, gateway, user)
    dispatcher.cycle(1)
    movers = [j for j in (row(left), row(right)) if j.preempted_for_id == big.pk]
    assert len(movers) == 1 and row(big).reason == "Preempting", row(big).message
    mover = movers[0]
    assert mover.preempt_cause == "move" and (mover.preempt_at - dispatcher.clock.now()).total_seconds() <= 31
    note = mover.events.get(type="Preempting").message
    assert "whose GPUs are free only scattered" in note and "it loses no work (it checkpoints on notice)" in note
    uid, old_nodes = mover.object_uid, {n for _, _, n in mover.placement}

    # Its next checkpoint (every 20 s of its run) comes within the notice; a cycle after, it is gone.
    until(dispatcher, sim, gateway, lambda: row(mover).state != State.RUNNING, steps=25)
    moved = row(mover)
    assert moved.events.filter(type="NoticeEnded").exists() and moved.events.filter(type="Moved").exists()
    assert moved.moved_at is not None and moved.preempt_cause == ""
    (lost,) = LostWork.objects.filter(job_id=mover.pk)
    assert (lost.cause, lost.seconds) == ("move", 0)

    # The big job starts on the node it left; the mover starts again on the other, beside the one that stayed.
    until(
        dispatcher,
        sim,
        gateway,
        lambda: row(big).state == State.RUNNING and row(mover).state == State.RUNNING,
        steps=10,
    )
    assert {n for _, _, n in row(big).placement} == old_nodes
    assert {n for _, _, n in row(mover).placement} != old_nodes
    assert row(mover).attempts == mover.attempts  # not a failure, not an attempt
    until(dispatcher, sim, gateway, lambda: row(big).state == State.SUCCEEDED, seconds=2.0)
    assert sim.cluster.tfjob("team-a", mover.name)["metadata"]["uid"] == uid
    assert [a["code"] for a in sim.cluster.audit if a["name"] == mover.name] == [201]  # made once
    # Within the window it is not moved again, whatever waits.
    assert row(mover).preempted_for_id is None


def test_moves_are_on_by_default_and_their_rules_come_from_the_settings(settings):
    from jobdash.dispatch.cycle import DispatchSettings

    assert DispatchSettings.from_django().defrag == DefragRules(limit_gpu_s=4 * 3600.0, window_s=3600.0, max_movers=8)
    settings.JOBDASH_DEFRAG_MAX_LOST_GPU_HOURS, settings.JOBDASH_DEFRAG_MAX_MOVERS = 0.5, 3
    assert DispatchSettings.from_django().defrag == DefragRules(limit_gpu_s=1800.0, window_s=3600.0, max_movers=3)
    settings.JOBDASH_DEFRAG = False
    assert DispatchSettings.from_django().defrag is None
