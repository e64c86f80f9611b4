"""The admission cycle end to end: PostgreSQL, the real gateway, kubesim over HTTP."""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobdash.cluster.gateway import NotFound
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import ClusterState, Cycle, Job, State

from .dispatch_support import create_namesake, eventually, manifest, run_until, settings, state, tf

pytestmark = pytest.mark.django_db


def submit(user, name, **kwargs) -> Job:
    return services.job_submit(user=user, manifest=manifest(name, **kwargs), source="api")


def test_a_job_goes_queued_released_running_succeeded(user, sim, gateway, term):
    job = submit(user, "mnist", workers=2, cpu="1", duration=5)
    dispatcher = Dispatcher(gateway, settings())
    result = dispatcher.cycle(term)
    assert (result.pending, result.admitted, result.released) == (1, 1, {"created": 1})
    job.refresh_from_db()
    assert job.state == State.RELEASED and job.leader_term == 1 and job.object_uid
    assert len(job.placement) == 2  # a node for each pod
    tfjob = sim.cluster.tfjob("team-a", "mnist")
    assert tfjob["metadata"]["labels"]["jobdash.io/job-id"] == str(job.pk)

    run_until(dispatcher, sim, gateway, job, State.RUNNING)
    dispatcher.cycle(term)  # publishes the pods of the now running job
    published = ClusterState.objects.get().pods["team-a/mnist"]
    assert (published["job"], published["replicas"]) == (job.pk, {"worker": {"Running": 2}})
    # Each pod runs on the node its placement names.
    assert sorted(pod["node"] for pod in published["pods"]) == sorted(node for _, _, node in job.placement)
    run_until(dispatcher, sim, gateway, job, State.SUCCEEDED)
    dispatcher.cycle(term)
    assert "team-a/mnist" not in ClusterState.objects.get().pods  # only active jobs' pods are published
    job.refresh_from_db()
    assert job.started_at and job.finished_at and job.finished_at >= job.started_at
    assert list(job.events.values_list("type", flat=True)) == ["Submitted", "Released", "Running", "Succeeded"]
    assert Cycle.objects.count() >= 3
    assert [a["code"] for a in sim.cluster.audit if a["name"] == "mnist"] == [201]


def test_a_one_pod_job_starts_with_its_pod_running_not_all_1_pods(user, sim, gateway, term):
    job = submit(user, "single", workers=1, cpu="1", duration=30)
    run_until(Dispatcher(gateway, settings()), sim, gateway, job, State.RUNNING)
    assert job.events.get(type="Running").message == "its pod is running"


def test_a_cycle_reads_the_active_jobs_once(user, sim, gateway, term):
    """The snapshot reads the Released and Running jobs with what the tracker needs of them,
    and the tracker follows them from those rows: one read of them a cycle, not two."""
    job = submit(user, "once", workers=2, cpu="1", duration=2)
    dispatcher = Dispatcher(gateway, settings())
    run_until(dispatcher, sim, gateway, job, State.RUNNING)
    with CaptureQueriesContext(connection) as queries:
        dispatcher.cycle(term)
    reads = [
        q["sql"]
        for q in queries
        if q["sql"].startswith("SELECT") and "jobs_job" in q["sql"] and "'Released', 'Running'" in q["sql"]
    ]
    assert len(reads) == 1, reads
    run_until(dispatcher, sim, gateway, job, State.SUCCEEDED)  # followed from the snapshot's rows


def test_the_deadlock_scenario_through_jobdash_finishes_both(user, sim, gateway, term):
    """Two 4-pod jobs, quota for 6 pods' CPU: straight to the cluster they deadlock
    (kubesim's own test shows it); through jobdash one waits and both finish."""
    first = submit(user, "gang-a", workers=4, cpu="1", duration=3)
    second = submit(user, "gang-b", workers=4, cpu="1", duration=3)
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)
    states = {state(first), state(second)}
    assert states == {State.RELEASED, State.QUEUED}
    waiting = Job.objects.get(state=State.QUEUED)
    assert waiting.position == 1 and waiting.reason == "QuotaExceeded" and "requests.cpu" in waiting.message
    assert waiting.events.filter(type="Waiting").exists()
    run_until(dispatcher, sim, gateway, first, State.SUCCEEDED)
    run_until(dispatcher, sim, gateway, second, State.SUCCEEDED)


def test_a_stale_term_releases_nothing(user, gateway, term):
    job = submit(user, "fenced")
    transitions.take_term(5, "newer-leader")
    with pytest.raises(transitions.StaleTerm):
        Dispatcher(gateway, settings()).cycle(term)
    assert state(job) == State.QUEUED
    with pytest.raises(transitions.StaleTerm):
        transitions.take_term(4, "older-leader")


def test_transient_create_failures_requeue_with_backoff(user, sim, gateway, term):
    # the gateway tries twice (retries=1): two failures spoil exactly one cycle's release
    sim.cluster.faults.add(verbs=["create"], resources=["tfjobs"], status=503, times=2)
    job = submit(user, "flaky")
    Dispatcher(gateway, settings(backoff_s=0.0)).cycle(term)
    job.refresh_from_db()
    assert job.state == State.QUEUED and job.reason == "BackingOff" and job.attempts == 0
    assert job.events.filter(type="Requeued").count() == 1
    Dispatcher(gateway, settings()).cycle(term)  # the fault is spent; backoff 0 has passed
    assert state(job) == State.RELEASED


def test_a_permanent_refusal_fails_the_job_with_the_cluster_message(user, sim, gateway, term):
    job = submit(user, "refused")
    create_namesake(sim, "refused")
    Dispatcher(gateway, settings()).cycle(term)
    job.refresh_from_db()
    assert job.state == State.FAILED and "already exists" in job.message


def test_start_timeout_takes_back_requeues_then_gives_up(user, sim, gateway, term):
    job = submit(user, "stuck", workers=2, cpu="1")
    dispatcher = Dispatcher(gateway, settings(start_timeout_s=0.0, max_attempts=2))
    dispatcher.cycle(term)  # released, and the tracker finds it not running: taken back
    # (if the watch cache had not seen the new TFJob yet, the next tracker pass does it)
    eventually(lambda: (dispatcher.track(), state(job))[1] == State.QUEUED, message="not taken back")
    job.refresh_from_db()
    assert job.state == State.QUEUED and job.attempts == 1 and job.reason == "BackingOff"
    assert "taken back" in job.message
    eventually(lambda: sim.cluster.tfjob("team-a", "stuck") is None, message="TFJob not deleted")
    eventually(lambda: gateway.job_object(tf("team-a", "stuck")) is None)
    dispatcher.cycle(term)  # second attempt, second timeout: the limit
    eventually(lambda: (dispatcher.track(), state(job))[1] == State.FAILED, message="never gave up")
    job.refresh_from_db()
    assert job.state == State.FAILED and "gave up" in job.message
    assert list(job.events.values_list("type", flat=True)).count("Released") == 2


def test_cancelling_a_released_job_deletes_its_tfjob(user, sim, gateway, term):
    job = submit(user, "to-cancel")
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)
    eventually(lambda: gateway.job_object(tf("team-a", "to-cancel")) is not None)
    services.job_cancel(job_id=job.pk, user=user)
    dispatcher.cycle(term)
    eventually(lambda: sim.cluster.tfjob("team-a", "to-cancel") is None, message="TFJob of a cancelled job kept")
    assert state(job) == State.CANCELLED


def test_a_tfjob_deleted_behind_our_back_fails_the_job(user, sim, gateway, term):
    job = submit(user, "vanishing")
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)
    eventually(lambda: gateway.job_object(tf("team-a", "vanishing")) is not None)
    gateway.delete_job_object(tf("team-a", "vanishing"))
    eventually(lambda: gateway.job_object(tf("team-a", "vanishing")) is None)
    dispatcher.cycle(term)
    job.refresh_from_db()
    assert job.state == State.FAILED and "deleted outside jobdash" in job.message


def test_reconcile_resends_a_release_interrupted_after_the_claim(user, sim, gateway, term):
    job = submit(user, "interrupted")
    assert transitions.claim([transitions.Claim(job.pk)], term) == [job.pk]  # the crash: no create followed
    counts = Dispatcher(gateway, settings()).reconcile(term)
    assert counts == {"resent": 1, "adopted": 0}
    job.refresh_from_db()
    assert job.state == State.RELEASED and job.object_uid
    # and again (a second leader start, once its cache has the TFJob): nothing more is created
    eventually(lambda: gateway.job_object(tf("team-a", "interrupted")) is not None)
    assert Dispatcher(gateway, settings()).reconcile(term) == {"resent": 0, "adopted": 0}
    assert [a["code"] for a in sim.cluster.audit if a["name"] == "interrupted"] == [201]


def test_reconcile_adopts_a_tfjob_created_before_the_claim_stuck(user, sim, gateway, term):
    job = submit(user, "adopted")
    gateway.create_job_object(job_id=job.pk, manifest=Job.objects.get(pk=job.pk).parsed)  # then the crash
    eventually(lambda: gateway.job_object(tf("team-a", "adopted")) is not None)
    counts = Dispatcher(gateway, settings()).reconcile(term)
    assert counts == {"resent": 0, "adopted": 1}
    job.refresh_from_db()
    assert job.state == State.RELEASED and job.object_uid
    Dispatcher(gateway, settings()).cycle(term)
    assert [a["code"] for a in sim.cluster.audit if a["name"] == "adopted"] == [201]


def test_repair_adopts_the_object_of_a_job_queued_again_since_the_last_pass(user, sim, gateway, term):
    """The periodic repair skips the objects of jobs the tracker's last pass found active:
    a job queued again since (its object not taken back: a crash) is asked about."""
    job = submit(user, "strayed")
    dispatcher = Dispatcher(gateway, settings(reconcile_every=1))
    dispatcher.cycle(term)
    eventually(lambda: gateway.job_object(tf("team-a", "strayed")) is not None)
    assert job.pk not in dispatcher.sweep.active  # the cycle's tracker follows it from its next pass
    dispatcher.track(term)
    assert job.pk in dispatcher.sweep.active
    backoff = transitions.backoff(1, 0)
    assert transitions.requeue(job.pk, note="then the crash", backoff_until=backoff, count_attempt=False, term=term)
    dispatcher.track(term)
    assert dispatcher.repair(term) == {"resent": 0, "adopted": 1}
    assert state(job) == State.RELEASED


def test_statuses_are_written_only_when_they_change(user, gateway, term):
    big = submit(user, "too-big", workers=1, cpu="7")  # quota is 6 CPUs: can never fit
    small = submit(user, "small", workers=1, cpu="1")
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)
    big.refresh_from_db()
    assert big.state == State.QUEUED and big.reason == "NeverFitsQuota" and big.position == 1
    assert big.eta is None and ". Start time unknown: " in big.message, big.message  # two sentences
    assert state(small) == State.RELEASED
    events = big.events.count()
    dispatcher.cycle(term)
    assert big.events.count() == events  # same reason: no new event


def test_status_reports_the_leader_and_the_last_cycle(user, gateway, term, client):
    from rest_framework.test import APIClient

    submit(user, "observed")
    Dispatcher(gateway, settings()).cycle(term)
    api = APIClient()
    api.force_login(user)
    body = api.get("/api/v1/status/").json()
    # a member sees the term, not the leader's host and process, and only its own jobs
    assert body["leader"]["term"] == 1 and body["leader"]["identity"] is None
    assert body["last_cycle"]["admitted"] == 1 and set(body["last_cycle"]["phases"]) >= {"snapshot", "plan", "release"}
    assert body["jobs"]["Released"] == 1
    outsider = User.objects.create_user("outsider")
    api.force_login(outsider)
    assert api.get("/api/v1/status/").json()["jobs"]["Released"] == 0
    staff = User.objects.create_user("boss", is_staff=True)
    api.force_login(staff)
    staff_view = api.get("/api/v1/status/").json()
    assert staff_view["leader"]["identity"] == "test" and staff_view["jobs"]["Released"] == 1
    client.force_login(user)
    assert "leader term 1" in client.get("/").content.decode()
    client.force_login(staff)
    assert "leader test · term 1" in client.get("/").content.decode()


def test_the_cluster_summary_carries_reservations_of_in_flight_jobs(user, sim, gateway, term):
    from jobdash.jobs.models import ClusterState

    submit(user, "reserving", workers=3, cpu="1")
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)  # released; the manual clock has not let the operator create pods
    assert ClusterState.objects.get().quotas["team-a"]["reserved"] == {}, "published before the release"
    dispatcher.cycle(term)  # sees the released job in flight and publishes it
    state = ClusterState.objects.get()
    assert state.quotas["team-a"]["hard"] == {"requests.cpu": 6000}
    assert (
        state.quotas["team-a"]["reserved"]["requests.cpu"] + state.quotas["team-a"]["used"].get("requests.cpu", 0)
        == 3000
    )
    assert len(state.nodes) == 2 and state.nodes[0]["allocatable"]["cpu"] == 16000


def test_queue_shifts_are_written_at_most_every_status_interval(user, gateway, term):
    """Reasons and new jobs' positions at once; the rest of the queue moving up, only
    once the interval has passed (rewriting thousands of rows each cycle is too dear)."""

    def positions():
        return dict(Job.objects.filter(state=State.QUEUED).values_list("name", "position"))

    submit(user, "running", cpu="4")  # the quota is 6 CPUs: it takes 4
    for name in ("first", "second"):
        submit(user, name, cpu="4")
    dispatcher = Dispatcher(gateway, settings(status_interval_s=3600))
    dispatcher.cycle(term)
    assert positions() == {"first": 1, "second": 2}
    root = User.objects.create_user("root", is_staff=True)  # a numeric priority is staff's
    services.job_submit(user=root, manifest=manifest("urgent", cpu="4"), source="api", priority=10)
    dispatcher.cycle(term)
    assert positions() == {"urgent": 1, "first": 1, "second": 2}  # the new job at once, shifts later
    dispatcher._all_statuses_at = float("-inf")  # the interval has passed
    dispatcher.cycle(term)
    assert positions() == {"urgent": 1, "first": 2, "second": 3}


def test_the_status_interval_grows_with_a_queue_of_thousands(gateway):
    """Shifts rewrite every queued row: beyond 1,000 queued, the interval grows with the
    queue, so the rows written per second stay bounded."""
    dispatcher = Dispatcher(gateway, settings(status_interval_s=3))
    assert dispatcher.status_interval(0) == dispatcher.status_interval(1000) == 3
    assert dispatcher.status_interval(5000) == 15
    assert Dispatcher(gateway, settings(status_interval_s=0)).status_interval(50_000) == 0


def test_the_cycle_table_keeps_only_the_latest_cycles(user, gateway, term, monkeypatch):
    from jobdash.dispatch import cycle as cycle_module

    monkeypatch.setattr(cycle_module, "KEEP_CYCLES", 3)
    monkeypatch.setattr(cycle_module, "PRUNE_EVERY", 2)
    dispatcher = Dispatcher(gateway, settings())
    for _ in range(5):
        dispatcher.cycle(term)
    # pruned after the 2nd (2 rows: nothing to do) and the 4th (4 -> 3); the 5th adds one
    assert Cycle.objects.count() == 4
    dispatcher.cycle(term)
    assert Cycle.objects.count() == 3


def test_two_cycles_planned_on_one_snapshot_claim_once(user, term, gateway):
    """No lock keeps two cycles of one term apart (a paused process could hold it): the
    claim counter does. The cycle whose snapshot predates another's claim releases nothing."""
    first, second = submit(user, "first"), submit(user, "second")
    seen = transitions.claims_seen()  # both cycles took their snapshot here
    assert transitions.claim([transitions.Claim(first.pk)], term, seen=seen) == [first.pk]
    with pytest.raises(transitions.StaleSnapshot):
        transitions.claim([transitions.Claim(second.pk)], term, seen=seen)
    assert state(second) == "Queued"
    # planned again on a fresh snapshot, it goes through
    assert transitions.claim([transitions.Claim(second.pk)], term, seen=transitions.claims_seen()) == [second.pk]
    # a claim of nothing (everything already taken) does not make others replan
    before = transitions.claims_seen()
    assert transitions.claim([transitions.Claim(first.pk)], term, seen=before) == []
    assert transitions.claims_seen() == before


def test_a_claim_stranded_without_its_tfjob_is_resent_by_the_next_cycles(user, term, sim, gateway):
    """A database error right after the claim left the job Released with no TFJob: the
    next cycles re-send it once the claim is old enough, with no start timeout and no
    attempt counted (it used to wait for the 300 s start timeout, at the cost of an attempt)."""
    job = submit(user, "stranded")
    assert transitions.claim([transitions.Claim(job.pk)], term) == [job.pk]  # ... and then nothing was sent
    patient = Dispatcher(gateway, settings(repair_after_s=60.0))
    patient.cycle(term)
    with pytest.raises(NotFound):  # too young to be called stranded: not sent yet
        gateway.read_job_object(tf("team-a", "stranded"))
    assert Job.objects.get(pk=job.pk).object_uid == ""
    dispatcher = Dispatcher(gateway, settings(repair_after_s=0.0, reconcile_every=1000))  # the cheap path
    dispatcher.cycle(term)
    stored = Job.objects.get(pk=job.pk)
    assert stored.state == State.RELEASED and stored.object_uid and stored.attempts == 0
    eventually(lambda: gateway.job_object(tf("team-a", "stranded")) is not None, timeout=5)
    assert gateway.job_object(tf("team-a", "stranded")).job_id == job.pk


def test_the_name_of_a_finished_job_is_reusable_its_object_replaced(user, sim, gateway, term):
    """The finished job's TFJob stays in the cluster (its logs stay readable) until a new
    job of that name is released: then it is deleted and the new one created."""
    dispatcher = Dispatcher(gateway, settings())
    first = submit(user, "nightly", duration=2)
    run_until(dispatcher, sim, gateway, first, State.SUCCEEDED)
    assert sim.cluster.tfjob("team-a", "nightly")["metadata"]["labels"]["jobdash.io/job-id"] == str(first.pk)
    again = submit(user, "nightly", duration=2)
    dispatcher.cycle(term)
    assert state(again) == State.RELEASED, Job.objects.get(pk=again.pk).message
    assert sim.cluster.tfjob("team-a", "nightly")["metadata"]["labels"]["jobdash.io/job-id"] == str(again.pk)
    run_until(dispatcher, sim, gateway, again, State.SUCCEEDED)
    assert state(first) == State.SUCCEEDED  # the first job's record is untouched


def test_an_object_of_an_active_job_or_of_someone_else_is_never_replaced(user, sim, gateway, term):
    from jobdash.dispatch.writers.release import replace_finished_namesakes

    running = submit(user, "busy", duration=60)
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)
    eventually(lambda: gateway.job_object(tf("team-a", "busy")) is not None)
    theirs = {**Job.objects.get(pk=running.pk).parsed}
    theirs["metadata"] = {**theirs["metadata"], "name": "theirs", "labels": {}}
    sim.cluster.create_tfjob(theirs)  # created by someone else: no jobdash.io/job-id
    eventually(lambda: gateway.job_object(tf("team-a", "theirs")) is not None)
    keys = {10_001: tf("team-a", "busy"), 10_002: tf("team-a", "theirs")}
    assert replace_finished_namesakes(gateway, keys, term) == 0
    assert sim.cluster.tfjob("team-a", "busy") and sim.cluster.tfjob("team-a", "theirs")


def _versions() -> dict[int, str]:
    from django.db import connection

    from jobdash.dispatch.writers import bulk

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, {bulk.row_version('j')} FROM jobs_job j WHERE state = 'Queued'")
        return dict(cursor.fetchall())


def test_a_cycle_does_not_read_back_the_statuses_it_wrote_but_reads_what_others_changed(user, gateway, term):
    submit(user, "running", cpu="4")  # the quota is 6 CPUs: it takes 4
    first, second = submit(user, "first", cpu="4"), submit(user, "second", cpu="4")
    dispatcher = Dispatcher(gateway, settings(status_interval_s=0))
    dispatcher.cycle(term)
    assert Job.objects.get(pk=second.pk).position == 2
    # The cache holds the versions its own status write made: nothing to read back.
    assert {job_id: dispatcher.cache.version(job_id) for job_id in _versions()} == _versions()
    read = {job_id: dispatcher.cache.rows[job_id][1] for job_id in (first.pk, second.pk)}
    dispatcher.cycle(term)
    assert all(dispatcher.cache.rows[job_id][1] is row for job_id, row in read.items())
    assert read[second.pk]["position"] == 2 and read[second.pk]["reason"] == "QuotaExceeded"
    # Someone else's change is read again, and planned from.
    Job.objects.filter(pk=second.pk).update(priority=10)
    dispatcher.cycle(term)
    assert dispatcher.cache.rows[second.pk][1] is not read[second.pk]
    assert dict(Job.objects.filter(state=State.QUEUED).values_list("name", "position")) == {"second": 1, "first": 2}


def test_a_status_is_not_written_over_a_change_made_since_the_snapshot(user, gateway, term):
    """The status write is conditional on the row's version: a row changed between the
    snapshot and the write keeps the change, and the next cycle reads it and decides again."""
    import queueing
    from jobdash.dispatch.phases import snapshot_phase
    from jobdash.dispatch.phases.statuses import write_statuses

    submit(user, "running", cpu="4")  # the quota is 6 CPUs: it takes 4
    waiting = submit(user, "waiting", cpu="4")
    dispatcher = Dispatcher(gateway, settings(status_interval_s=0))
    dispatcher.cycle(term)
    Job.objects.filter(pk=waiting.pk).update(position=None, message="")  # as if never written
    dispatcher.cycle(term)  # reads the change, writes the status again
    assert Job.objects.get(pk=waiting.pk).position == 1
    cache = dispatcher.cache
    Job.objects.filter(pk=waiting.pk).update(position=None, message="")
    observed = snapshot_phase.observe(gateway, cache, release_mode="create", node_fit=True, preemption_limit=None)
    plan = queueing.plan(observed.snapshot, dispatcher.policy)
    Job.objects.filter(pk=waiting.pk).update(message="changed after the snapshot")
    assert write_statuses(observed.pending, plan, cache=cache) == 1  # it wanted to write it...
    waiting.refresh_from_db()
    assert (waiting.position, waiting.message) == (None, "changed after the snapshot")  # ...and did not
    assert cache.version(waiting.pk) != _versions()[waiting.pk]
    dispatcher.cycle(term)
    waiting.refresh_from_db()
    assert (
        waiting.position == 1 and waiting.reason == "QuotaExceeded" and waiting.message != "changed after the snapshot"
    )
    assert cache.version(waiting.pk) == _versions()[waiting.pk]


def test_start_times_are_forecast_in_the_cycles_that_write_every_status(user, gateway, term):
    """Forecasting plays the whole queue forward: only in the cycles that rewrite every
    status. In between, a new job gets its position and reason at once and its start range
    at the next complete round, and a job's range is kept, not cleared."""

    def stated(name: str) -> Job:
        text = manifest(name, cpu="4").replace(
            "annotations:\n", 'annotations:\n    jobdash.io/expected-duration: "600"\n'
        )
        return services.job_submit(user=user, manifest=text, source="api")

    stated("running")  # the quota is 6 CPUs: it takes 4
    first = stated("first")
    dispatcher = Dispatcher(gateway, settings(status_interval_s=3600))
    dispatcher.cycle(term)  # the first cycle is a complete round
    first.refresh_from_db()
    assert first.position == 1 and first.eta is not None
    second = stated("second")
    dispatcher.cycle(term)
    second.refresh_from_db()
    assert (second.position, second.reason, second.eta) == (2, "QuotaExceeded", None)
    assert Job.objects.get(pk=first.pk).eta == first.eta  # kept
    dispatcher._all_statuses_at = float("-inf")  # the interval has passed
    dispatcher.cycle(term)
    second.refresh_from_db()
    assert second.eta is not None and second.eta > first.eta and second.eta_first_at is not None


def test_a_flip_between_reasons_that_wait_for_room_waits_for_the_complete_round(user, gateway, term):
    """Under load a job flips between QuotaExceeded, NoNodeFits and ReservedForOlderJob from
    one cycle to the next: such a flip is written with the complete rounds and leaves no
    event; a change to another reason is written at once, with its event."""
    from jobdash.dispatch.phases.statuses import write_statuses
    from queueing import PendingStatus, Reason

    submit(user, "running", cpu="4")  # the quota is 6 CPUs: it takes 4
    waiting = submit(user, "waiting", cpu="4")
    dispatcher = Dispatcher(gateway, settings(status_interval_s=3600))
    dispatcher.cycle(term)
    waiting.refresh_from_db()
    assert waiting.reason == "QuotaExceeded" and waiting.position == 1
    events = waiting.events.count()
    row = next(row for row in dispatcher.cache.pending.values() if row[1].job.id == waiting.pk)[1]

    class Plan:
        def __init__(self, reason, detail):
            self.pending = {waiting.pk: PendingStatus(waiting.pk, "team-a", 1, reason, detail)}

    flip = Plan(
        Reason.NO_NODE_FITS,
        {"resource": "cpu", "needed": 4000, "free": 0, "scope": "node", "role": "Worker", "pods": 1, "placed": 0},
    )
    assert write_statuses([row], flip, shifts=False, forecasted=False, cache=dispatcher.cache) == 0
    assert Job.objects.get(pk=waiting.pk).reason == "QuotaExceeded"
    assert write_statuses([row], flip, shifts=True, forecasted=False, cache=dispatcher.cache) == 1
    assert Job.objects.get(pk=waiting.pk).reason == "NoNodeFits"
    assert waiting.events.count() == events  # no event for a flip
    backing_off = Plan(Reason.BACKING_OFF, {"until": 0.0, "attempts": 1})
    assert write_statuses([row], backing_off, shifts=False, forecasted=False, cache=dispatcher.cache) == 1
    assert Job.objects.get(pk=waiting.pk).reason == "BackingOff"
    assert waiting.events.count() == events + 1
    assert waiting.events.order_by("-id").first().message.startswith("BackingOff: ")
