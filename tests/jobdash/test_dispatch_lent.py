"""Lent capacity end to end (issue 35): kubesim lends a night pool on its schedule (its
nodes annotated jobdash.io/lent-until, cordoned at the notice, drained and gone at the
reclaim); the real dispatcher places a short job there, keeps a long one off with the
reason, and lets a checkpointing job run past the notice, preempting it at the reclaim with
its Event and timeline note."""

import json
from datetime import UTC, datetime

import pytest

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.cluster_selectors import node_rows
from jobdash.jobs.models import ClusterState, Job, JobEvent, LostWork, State
from kubesim.resources import EVENTS, NODES
from kubesim.testing import batch_job_manifest, pytorchjob_manifest, running_kubesim

from .dispatch_support import JOBDASH, ManualClock, settings, start_gateway, step
from .dispatch_support import cycle_until as until

pytestmark = pytest.mark.django_db(transaction=True)
START = datetime(2026, 11, 27, 21, 59, tzinfo=UTC)
NIGHT = {
    "name": "night-a",
    "prefix": "night-a",
    "count": 1,
    "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
    "labels": {"pool": "night-a"},
    "schedule": {"start": "22:00", "end": "08:00", "timezone": "UTC"},
    "notice_seconds": 1800,
}


@pytest.fixture
def sim():
    config = {
        "start_time": START.timestamp(),
        "nodes": [{"name": "day-0", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"}}],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "64"}}, {"name": "other"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
        "lent_pools": [NIGHT],
    }
    with running_kubesim(config, manual_clock=True) as sim:
        yield sim


@pytest.fixture
def dispatcher(sim):
    gateway = start_gateway(sim)
    yield Dispatcher(gateway, settings(topology_levels=("kubernetes.io/hostname",)), clock=ManualClock(START))
    gateway.stop()


def job(user, name: str, *, hours: float, runs_s: float, checkpoints: bool = False) -> Job:
    manifest = batch_job_manifest(name, "team-a", cpu="4", memory="1Gi", duration=runs_s)
    annotations = manifest["metadata"].setdefault("annotations", {})
    annotations["jobdash.io/expected-duration"] = f"{int(hours * 3600)}s"
    if checkpoints:
        annotations["jobdash.io/checkpoints"] = "true"
    return services.job_submit(user=user, manifest=json.dumps(manifest), source="api")


def row(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_the_tide_short_jobs_on_the_pool_long_ones_kept_off_checkpointing_ones_reclaimed(user, sim, dispatcher, term):
    step(dispatcher, sim, 61)  # 22:00: the pool is lent
    assert sim.cluster.store.get(NODES, "", "night-a-0") is not None
    short = job(user, "short", hours=0.5, runs_s=1800)
    long = job(user, "long", hours=12, runs_s=40000)
    until(dispatcher, sim, term, lambda: row(short).state in (State.RELEASED, State.RUNNING), seconds=1)
    assert {node for _, _, node in row(short).placement} == {"night-a-0"}
    # admitted by its tail bound: 0.5 h stated, x 12.4 with nothing to calibrate it (< 9.5 h)
    assert row(short).predicted_tail_s == pytest.approx(1800 * 12.385, rel=1e-3)
    assert row(long).predicted_tail_s > row(long).predicted_p90_s > 9.5 * 3600
    dispatcher.cycle(term)
    # the cluster page and API say the node is lent, and until when
    shown = {r["name"]: r["lent"] for r in node_rows(ClusterState.objects.get(id=1).nodes)}
    assert shown == {"day-0": "", "night-a-0": "lent (night-a) until 08:00"}
    waiting = row(long)
    assert waiting.state == State.QUEUED and waiting.reason == "OutlastsLentPool"
    assert "would run past 08:00, when node-pool night-a is reclaimed" in waiting.message
    until(dispatcher, sim, term, lambda: row(short).state == State.SUCCEEDED, seconds=120)

    keeper = job(user, "keeper", hours=12, runs_s=40000, checkpoints=True)
    until(dispatcher, sim, term, lambda: row(keeper).state == State.RUNNING, seconds=1)
    assert {node for _, _, node in row(keeper).placement} == {"night-a-0"}
    # 07:30: the notice; the job is told it leaves at 08:00, and runs on meanwhile
    until(
        dispatcher,
        sim,
        term,
        lambda: JobEvent.objects.filter(job=keeper, type="ReclaimNotice").exists(),
        seconds=1800,
        steps=30,
    )
    notice = JobEvent.objects.get(job=keeper, type="ReclaimNotice")
    assert "node-pool night-a is reclaimed at 08:00" in notice.message
    assert row(keeper).state == State.RUNNING and row(keeper).reclaimed_by == "night-a"
    events = [e for e in sim.cluster.store.items(EVENTS) if e.get("reason") == "ReclaimNotice"]
    assert events and "08:00" in events[0]["message"]
    # 08:00: the pool goes back; the job is queued again in its place, nothing lost silently
    until(dispatcher, sim, term, lambda: row(keeper).state == State.QUEUED, seconds=300, steps=20)
    reclaimed = JobEvent.objects.get(job=keeper, type="Reclaimed")
    # It said it checkpoints, not when: what ran since its start is counted as lost to the reclaim.
    (lost,) = LostWork.objects.filter(job_id=keeper.pk)
    assert lost.cause == "reclaim" and lost.checkpointed_at is None
    assert datetime(2026, 11, 28, 8, 0, tzinfo=UTC) <= lost.at <= datetime(2026, 11, 28, 8, 5, tzinfo=UTC)
    assert 9 * 3600 <= lost.seconds <= 10 * 3600  # since it started, after 22:00 (the short job first)
    assert lost.gpu_s == 0 and "the whole run)" in reclaimed.message  # (CPUs only)
    assert row(long).state == State.QUEUED  # never placed on the pool


def test_an_elastic_job_grows_into_the_night_pool_and_shrinks_back_at_the_reclaim_without_stopping(
    user, sim, dispatcher, term
):
    step(dispatcher, sim, 61)  # 22:00: the pool is lent
    manifest = pytorchjob_manifest(
        "tidal", "team-a", workers=4, master=False, cpu="2", memory="1Gi", duration=100000,
        elastic={"minReplicas": 1, "maxReplicas": 4},
    )  # fmt: skip
    elastic = services.job_submit(user=user, manifest=json.dumps(manifest), source="api")
    # no prediction: as a whole job it stays off the pool, so its minimum starts on the day node...
    until(dispatcher, sim, term, lambda: row(elastic).state == State.RUNNING, seconds=1)
    assert row(elastic).scale == {"Worker": 1} and {n for _, _, n in row(elastic).placement} == {"day-0"}
    # ... and its extra workers grow onto the pool: given back at the reclaim, they kill nothing
    until(dispatcher, sim, term, lambda: (row(elastic).scale or {}).get("Worker") == 4, seconds=5)
    assert {n for _, _, n in row(elastic).placement} == {"day-0", "night-a-0"}
    until(
        dispatcher, sim, term, lambda: JobEvent.objects.filter(job=elastic, type="ReclaimNotice").exists(),
        seconds=1800, steps=30,
    )  # fmt: skip
    notice = JobEvent.objects.get(job=elastic, type="ReclaimNotice").message
    assert "gives back its pods there and runs on with 1 Worker" in notice
    until(dispatcher, sim, term, lambda: row(elastic).scale == {"Worker": 1}, seconds=300, steps=20)
    shrunk = row(elastic)
    assert shrunk.state == State.RUNNING and {n for _, _, n in shrunk.placement} == {"day-0"}
    assert not JobEvent.objects.filter(job=elastic, type__in=("Reclaimed", "Preempted")).exists()
    assert sim.cluster.job("pytorchjobs", "team-a", "tidal")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
