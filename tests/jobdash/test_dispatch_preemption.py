"""Elastic quota end to end: PostgreSQL, the real gateway, kubesim over HTTP.

One node of 8 CPUs; team-a and team-b each have a ResourceQuota of the whole node (the
ceiling) and a guaranteed share of half of it.  team-a borrows team-b's idle half; when
team-b's job comes, the borrower is preempted, team-b's job starts within the grace
period plus one cycle, and the borrower resumes later from its last checkpoint and
finishes, its object never created twice.
"""

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, LostWork, Namespace, State
from jobdash.jobs.words import duration
from kubesim.testing import running_kubesim

from .dispatch_support import ManualClock, advance, cluster_config, manifest, settings, start_gateway

pytestmark = pytest.mark.django_db

GRACE_S = 30.0  # of the dispatcher's clock, moved by the test


def tfjob(name: str, namespace: str, *, workers: int, cpu: str, duration: int, checkpoint: int = 1800) -> str:
    return manifest(name, workers, cpu, duration, namespace, checkpoint)


@pytest.fixture
def world(db):
    # The cluster's clock starts with the dispatcher's (ManualClock: now), so the checkpoint
    # times the training writes on its object fall within the run the dispatcher saw start.
    config = cluster_config(nodes=1, node_cpu="8", start_time=timezone.now().timestamp())
    config["namespaces"] = [
        {"name": "team-a", "quota": {"requests.cpu": "8"}},
        {"name": "team-b", "quota": {"requests.cpu": "8"}},
    ]
    with running_kubesim(config, manual_clock=True) as sim:
        gateway = start_gateway(sim)
        try:
            user = User.objects.create_user("ana")
            for name in ("team-a", "team-b"):
                namespace = Namespace.objects.create(name=name, guaranteed={"requests.cpu": "4"})
                namespace.members.add(user)
            from jobdash.dispatch.writers import transitions

            transitions.take_term(1, "test")
            yield sim, gateway, user
        finally:
            gateway.stop()


def refreshed(job: Job) -> Job:
    job.refresh_from_db()
    return job


def step(dispatcher, sim, gateway, seconds: float = 1.0) -> None:
    """One cycle, then the cluster and the dispatcher's clock move on by `seconds` and the
    watch cache catches up."""
    dispatcher.cycle(1)
    advance(sim, gateway, dispatcher.clock, seconds)


def until(dispatcher, sim, gateway, job, wanted, steps=60, seconds=1.0) -> int:
    for taken in range(steps):
        if refreshed(job).state == wanted:
            return taken
        step(dispatcher, sim, gateway, seconds)
    raise AssertionError(f"job {job.name} is {job.state} ({job.reason}: {job.message}), never {wanted}")


def test_a_borrower_is_preempted_for_a_guarantee_and_resumes_from_its_checkpoint(world):
    sim, gateway, user = world
    dispatcher = Dispatcher(gateway, settings(preemption_grace_s=GRACE_S), clock=ManualClock())
    borrower = services.job_submit(
        user=user, manifest=tfjob("big", "team-a", workers=2, cpu="3", duration=100, checkpoint=20), source="api"
    )
    until(dispatcher, sim, gateway, borrower, State.RUNNING)
    assert refreshed(borrower).borrowing  # 6 CPUs, beyond team-a's guaranteed 4: team-b's idle half
    uid = borrower.object_uid
    for _ in range(5):  # 50 s of work: 40 s up to its last checkpoint
        step(dispatcher, sim, gateway, 10.0)

    owner = services.job_submit(
        user=user, manifest=tfjob("fair", "team-b", workers=1, cpu="4", duration=10), source="api"
    )
    dispatcher.cycle(1)
    owner.refresh_from_db()
    borrower.refresh_from_db()
    assert owner.state == State.QUEUED and owner.reason == "Preempting"
    assert borrower.state == State.RUNNING and borrower.preempted_for_id == owner.pk and borrower.preempt_at
    assert f"job {owner.pk}" in borrower.events.get(type="Preempting").message
    assert f"job {borrower.pk}" in owner.events.get(type="Preempting").message
    announced = [
        e
        for e in sim.cluster.store.items(_events())
        if e["involvedObject"]["name"] == "big" and e["reason"] == "Preempting"
    ]
    assert len(announced) == 1 and announced[0]["involvedObject"]["uid"] == uid

    # Another cycle within the grace period preempts nothing more.
    dispatcher.cycle(1)
    assert Job.objects.filter(preempted_for__isnull=False).count() == 1

    dispatcher.clock.advance(GRACE_S)
    started_cycles = 0
    saved = refreshed(borrower).last_checkpoint_at  # reported on its object by its training
    assert saved is not None
    dispatcher.cycle(1)  # the tracker's pass: the grace period is over
    borrower.refresh_from_db()
    assert borrower.state == State.QUEUED and borrower.preemptions == 1 and borrower.preempted_by_id == owner.pk
    preempted = borrower.events.get(type="Preempted")
    # What it lost is counted: its run since that checkpoint, up to the end of its grace.
    (lost,) = LostWork.objects.filter(job_id=borrower.pk)
    assert lost.cause == "preemption" and lost.namespace == "team-a" and lost.borrowed
    assert lost.checkpointed_at >= saved
    assert lost.seconds == pytest.approx((lost.at - lost.checkpointed_at).total_seconds())
    assert 0 < lost.seconds <= GRACE_S + 20 and lost.gpu_s == 0  # CPUs only: no GPU-seconds
    assert preempted.message.endswith(
        f"{duration(lost.seconds)} redone ({duration(lost.seconds)}, since its checkpoint at {lost.checkpointed_at:%H:%M:%S} UTC)"
    )
    suspended = sim.cluster.tfjob("team-a", "big")
    assert suspended["spec"]["runPolicy"]["suspend"] is True
    # Suspended, its template is as the user wrote it again (no placement gate of jobdash's).
    assert "schedulingGates" not in suspended["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    sim.settle()  # the training-operator deletes the suspended job's pods
    assert not [p for p in sim.cluster.pods("team-a") if not p["metadata"].get("deletionTimestamp")]
    # The job it made room for starts the next cycle.
    while refreshed(owner).state == State.QUEUED:
        started_cycles += 1
        assert started_cycles <= 1, owner.message
        step(dispatcher, sim, gateway, 1.0)
    assert owner.state in (State.RELEASED, State.RUNNING)
    waiting = refreshed(borrower)
    assert waiting.state == State.QUEUED and waiting.reason == "Preempted"
    assert f"to make room for job {owner.pk}" in waiting.message

    until(dispatcher, sim, gateway, owner, State.SUCCEEDED, seconds=2.0)
    until(dispatcher, sim, gateway, borrower, State.RUNNING)
    resumed = sim.cluster.tfjob("team-a", "big")
    assert resumed["metadata"]["uid"] == uid and resumed["spec"]["runPolicy"]["suspend"] is False
    # Resumed on its new placement: its pods wait for their planned nodes again (gated, or,
    # all on one node, their template names it).
    spec = resumed["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    nodes = {node for _, _, node in refreshed(borrower).placement}
    if len(nodes) == 1:
        assert spec["nodeSelector"] == {"kubernetes.io/hostname": nodes.pop()} and "schedulingGates" not in spec
    else:
        assert spec["schedulingGates"] == [{"name": "jobdash.io/placement"}]
    # 60 s of work left (100 - the 40 kept): not done after 50 s, done after 70.
    for _ in range(5):
        step(dispatcher, sim, gateway, 10.0)
    assert refreshed(borrower).state == State.RUNNING
    until(dispatcher, sim, gateway, borrower, State.SUCCEEDED, steps=5, seconds=10.0)
    assert [a["code"] for a in sim.cluster.audit if a["name"] == "big"] == [201]  # created once, never again
    assert list(refreshed(borrower).events.values_list("type", flat=True)).count("Released") == 2
    assert refreshed(owner).preemptions == 0


def test_a_deposed_leader_neither_marks_nor_evicts(world):
    """Preemption is fenced like a release: a leader whose term has passed changes nothing."""
    from jobdash.dispatch.writers import preempt, transitions

    sim, gateway, user = world
    dispatcher = Dispatcher(gateway, settings(preemption_grace_s=60.0), clock=ManualClock())
    borrower = services.job_submit(
        user=user, manifest=tfjob("big", "team-a", workers=2, cpu="3", duration=100), source="api"
    )
    until(dispatcher, sim, gateway, borrower, State.RUNNING)
    owner = services.job_submit(
        user=user, manifest=tfjob("fair", "team-b", workers=1, cpu="4", duration=10), source="api"
    )
    transitions.take_term(2, "newer-leader")
    with pytest.raises(transitions.StaleTerm):
        dispatcher.cycle(1)
    assert refreshed(borrower).preempted_for_id is None
    Dispatcher(gateway, settings(preemption_grace_s=60.0)).cycle(2)  # the new leader marks it
    assert refreshed(borrower).preempted_for_id == owner.pk
    Job.objects.filter(pk=borrower.pk).update(preempt_at=timezone.now())  # its grace period is over
    with pytest.raises(transitions.StaleTerm):
        preempt.evict(gateway, term=1)
    assert refreshed(borrower).state == State.RUNNING
    assert (sim.cluster.tfjob("team-a", "big")["spec"].get("runPolicy") or {}).get("suspend") is not True
    assert preempt.evict(gateway, term=2) == {"preempted": 1, "called-off": 0}
    assert refreshed(borrower).state == State.QUEUED


def _events():
    from kubesim.resources import EVENTS

    return EVENTS
