"""The queue as cluster objects (dispatch/writers/mirror.py) and the Kubernetes Events of each state
change (dispatch/writers/cluster_events.py): PostgreSQL, the real gateway, kubesim over HTTP."""

import pytest
from kubernetes import client

from jobdash.cluster.kube import KubeGateway, api_client
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.writers import cluster_events, mirror, transitions
from jobdash.dispatch.writers.release import sending_pool
from jobdash.jobs import services
from jobdash.jobs.models import CLUSTER_EVENT_TYPES, EventOutbox, Job, QueuedMirror, State
from kubesim.resources import EVENTS, QUEUEDJOBS
from kubesim.testing import running_kubesim
from tests.waiting import eventually

from .dispatch_support import JOBDASH, cluster_config, create_namesake, manifest, run_until, settings, start_gateway

pytestmark = pytest.mark.django_db
GROUP, VERSION, PLURAL = "jobdash.io", "v1alpha1", "queuedjobs"


def submit(user, name, cpu="4", **kwargs) -> Job:
    return services.job_submit(user=user, manifest=manifest(name, cpu=cpu, **kwargs), source="api")


def queued_objects(sim, namespace="team-a") -> dict[str, dict]:
    listed = sim.cluster.store.items(QUEUEDJOBS, namespace)
    return {obj["metadata"]["name"]: obj for obj in listed}


def custom(sim) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client("kubeconfig", sim.kubeconfig_path))


def synced(gateway, sim) -> None:
    """The watch cache sees the QueuedJobs kubesim has."""
    eventually(
        lambda: {o.name for o in gateway.queued_objects() or []} == set(queued_objects(sim)),
        timeout=3,
        message="the watch cache never caught up with the QueuedJobs",
    )


def test_waiting_jobs_are_mirrored_with_their_place_and_leave_with_the_queue(user, sim, gateway, term):
    first, second, third = (submit(user, name) for name in ("first", "second", "third"))  # 4 CPUs of 6 each
    dispatcher = Dispatcher(gateway, settings())
    result = dispatcher.cycle(term)
    assert result.mirrored == {"created": 2}
    assert "mirror" in result.phases and "events" in result.phases
    objects = queued_objects(sim)
    assert set(objects) == {"second", "third"}
    second.refresh_from_db()
    obj = objects["second"]
    assert obj["metadata"]["labels"]["jobdash.io/job-id"] == str(second.pk)
    assert obj["metadata"]["annotations"]["jobdash.io/term"] == str(term)
    assert obj["spec"] == {"jobId": second.pk, "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "second"}
    assert obj["status"]["state"] == "Queued"
    assert obj["status"]["position"] == second.position == 1
    assert obj["status"]["reason"] == second.reason and obj["status"]["message"] == second.message
    assert objects["third"]["status"]["position"] == 2
    assert set(QueuedMirror.objects.values_list("job_id", "name")) == {(second.pk, "second"), (third.pk, "third")}

    synced(gateway, sim)
    assert dispatcher.cycle(term).mirrored == {}  # nothing changed: nothing written
    # The first finishes; the second is released and leaves the queue; the third moves up.
    run_until(dispatcher, sim, gateway, second, State.RELEASED, term=term, steps=60)
    synced(gateway, sim)
    dispatcher.cycle(term)
    synced(gateway, sim)
    objects = queued_objects(sim)
    assert set(objects) == {"third"}
    assert objects["third"]["status"]["position"] == 1
    assert list(QueuedMirror.objects.values_list("job_id", flat=True)) == [third.pk]
    assert Job.objects.get(pk=first.pk).state == State.SUCCEEDED


def test_deleting_a_queued_job_object_cancels_the_job(user, sim, gateway, term):
    submit(user, "runs")
    waiting = submit(user, "waits")
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)
    synced(gateway, sim)
    custom(sim).delete_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, "waits")
    synced(gateway, sim)
    result = dispatcher.cycle(term)
    assert result.mirrored.get("cancelled") == 1
    waiting.refresh_from_db()
    assert waiting.state == State.CANCELLED
    assert waiting.message == "its QueuedJob team-a/waits was deleted from the cluster: it left the queue"
    assert waiting.events.last().actor == "cluster"
    assert not QueuedMirror.objects.filter(job_id=waiting.pk).exists() or dispatcher.cycle(term)
    dispatcher.cycle(term)
    assert not QueuedMirror.objects.filter(job_id=waiting.pk).exists()


def test_a_create_the_watch_cache_has_not_seen_yet_cancels_nothing(user, sim, gateway, term):
    """The row is written after the object is made; a cycle whose watch cache lags behind
    that create asks the API server before it calls the object deleted."""
    submit(user, "runs")
    waiting = submit(user, "waits")
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)
    # A second gateway whose cache is stopped before it could see anything: a lagging watch.
    lagging = KubeGateway(api_client("kubeconfig", sim.kubeconfig_path))
    lagging.informers["queuedjob"].served = True
    lagging.informers["queuedjob"].synced.set()
    assert lagging.queued_objects() == []
    assert mirror.sync(lagging, term=term, limit=10, pool=sending_pool(2)) == {}
    waiting.refresh_from_db()
    assert waiting.state == State.QUEUED
    assert set(queued_objects(sim)) == {"waits"}  # not made twice either: the create found it


def test_a_new_leader_finds_the_objects_and_makes_no_duplicates(user, sim, gateway, term):
    submit(user, "runs")
    waiting = [submit(user, f"w-{i}") for i in range(3)]
    Dispatcher(gateway, settings()).cycle(term)
    created = {name: obj["metadata"]["uid"] for name, obj in queued_objects(sim).items()}
    assert set(created) == {"w-0", "w-1", "w-2"}
    # The old leader made one object but stopped before its row was written.
    QueuedMirror.objects.filter(job_id=waiting[2].pk).delete()
    transitions.take_term(2, "another")
    successor = start_gateway(sim)
    try:
        result = Dispatcher(successor, settings()).cycle(2)
    finally:
        successor.stop()
    assert result.mirrored.get("adopted") == 1 and "created" not in result.mirrored
    assert {name: obj["metadata"]["uid"] for name, obj in queued_objects(sim).items()} == created
    assert QueuedMirror.objects.count() == 3
    assert all(Job.objects.get(pk=job.pk).state == State.QUEUED for job in waiting)


def test_the_writes_a_cycle_are_bounded(user, sim, gateway, term):
    submit(user, "runs")
    for i in range(5):
        submit(user, f"w-{i}")
    dispatcher = Dispatcher(gateway, settings(mirror_writes=2))
    assert dispatcher.cycle(term).mirrored == {"created": 2, "deferred": 3}
    assert set(queued_objects(sim)) == {"w-0", "w-1"}  # the front of the queue first
    synced(gateway, sim)
    dispatcher.cycle(term)
    synced(gateway, sim)
    dispatcher.cycle(term)
    assert len(queued_objects(sim)) == 5


def test_a_name_taken_by_another_jobs_object_gets_a_stable_one(user, sim, gateway, term):
    submit(user, "runs")
    waiting = submit(user, "same")
    sim.cluster.create(
        {
            "apiVersion": "jobdash.io/v1alpha1",
            "kind": "QueuedJob",
            "metadata": {"name": "same", "namespace": "team-a", "labels": {"jobdash.io/job-id": "999999"}},
            "spec": {"jobId": 999999, "kind": "TFJob", "name": "same"},
        }
    )
    synced(gateway, sim)
    dispatcher = Dispatcher(gateway, settings())
    result = dispatcher.cycle(term)
    assert result.mirrored.get("created") == 1
    assert QueuedMirror.objects.get(job_id=waiting.pk).name == f"job-{waiting.pk}"
    assert queued_objects(sim)[f"job-{waiting.pk}"]["spec"]["name"] == "same"


def test_every_state_change_is_a_kubernetes_event_once(user, sim, gateway, term):
    submit(user, "before", duration=2)
    job = submit(user, "story", duration=3)  # waits for "before": 4 + 4 CPUs of 6
    dispatcher = Dispatcher(gateway, settings())

    def told() -> list[dict]:
        dispatcher.cycle(term)  # the Queued Event waits for its QueuedJob to reach the watch
        return [e for e in sim.cluster.store.items(EVENTS, "team-a") if e["metadata"]["name"].startswith("story.")]

    eventually(told, 5, "the Queued Event was never sent")
    (queued,) = [e for e in sim.cluster.store.items(EVENTS, "team-a") if e["metadata"]["name"].startswith("story.")]
    assert queued["involvedObject"]["kind"] == "QueuedJob" and queued["involvedObject"]["name"] == "story"
    assert queued["involvedObject"]["uid"] == queued_objects(sim)["story"]["metadata"]["uid"]
    run_until(dispatcher, sim, gateway, job, State.SUCCEEDED, term=term, steps=60)
    dispatcher.cycle(term)
    assert not EventOutbox.objects.exists()
    events = [e for e in sim.cluster.store.items(EVENTS, "team-a") if e["metadata"]["name"].startswith("story.")]
    assert [e["metadata"]["name"] for e in events] == sorted(e["metadata"]["name"] for e in events)
    events.sort(key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1], 16))
    assert [e["reason"] for e in events] == ["Queued", "Released", "Running", "Succeeded"]
    job.refresh_from_db()
    changes = job.events.filter(type__in=CLUSTER_EVENT_TYPES).order_by("id")
    timeline = list(changes.values_list("message", flat=True))
    assert [e["message"] for e in events] == timeline
    assert {e["reportingComponent"] for e in events} == {"jobdash"}
    assert [e["type"] for e in events] == ["Normal"] * 4
    # The Queued one is about the QueuedJob (deny mode: no object yet), the rest about the TFJob.
    assert events[0]["involvedObject"]["kind"] == "QueuedJob"
    assert {e["involvedObject"]["kind"] for e in events[1:]} == {"TFJob"}
    assert {e["involvedObject"]["uid"] for e in events[1:]} == {job.object_uid}


def test_places_that_only_moved_beyond_the_front_wait_for_a_round_of_moves(user, sim, gateway, term):
    submit(user, "runs")
    waiting = [submit(user, f"w-{i:02d}") for i in range(mirror.FRONT + 4)]
    dispatcher = Dispatcher(gateway, settings())
    assert dispatcher.cycle(term).mirrored == {"created": mirror.FRONT + 4}
    synced(gateway, sim)
    services.job_cancel(job_id=waiting[0].pk, user=user)  # from the web: every place behind moves up
    result = dispatcher.cycle(term)
    assert result.mirrored == {"deleted": 1, "updated": mirror.FRONT, "later": 3}
    synced(gateway, sim)
    objects = queued_objects(sim)
    assert objects["w-01"]["status"]["position"] == 1
    assert objects["w-28"]["status"]["position"] == mirror.FRONT + 4  # not yet: its old place
    assert mirror.sync(gateway, term=term, limit=10, pool=sending_pool(2), moves_due=True) == {"updated": 3}
    assert queued_objects(sim)["w-28"]["status"]["position"] == mirror.FRONT + 3
    # The cancel from the web process is an Event too, sent by the leader, on the QueuedJob.
    (cancelled,) = [e for e in sim.cluster.store.items(EVENTS, "team-a") if e["reason"] == "Cancelled"]
    assert cancelled["involvedObject"]["name"] == "w-00" and cancelled["type"] == "Warning"
    assert cancelled["message"] == f"cancelled by {user.username}"


def test_the_outbox_loses_nothing_across_leaders_and_a_resend_is_no_duplicate(user, sim, gateway, term):
    submit(user, "runs")
    waiting = submit(user, "waits")
    services.job_cancel(job_id=waiting.pk, user=user)  # no leader has run a cycle yet
    assert EventOutbox.objects.count() == 3  # two Submitted, one Cancelled: written with them
    first = Dispatcher(gateway, settings(events_per_cycle=1)).cycle(term)
    assert first.events == {"sent": 1} and EventOutbox.objects.count() == 3 - 1 + 1  # + the release's
    # The leader stops; the next one sends the rest.
    transitions.take_term(2, "another")
    successor = start_gateway(sim)
    try:
        Dispatcher(successor, settings()).cycle(2)
        assert not EventOutbox.objects.exists()
        # A leader that stopped between sending and deleting leaves a row: its resend is the same Event.
        sent = {e["metadata"]["name"] for e in sim.cluster.store.items(EVENTS, "team-a")}
        EventOutbox.objects.create(event=waiting.events.get(type="Cancelled"))
        assert Dispatcher(successor, settings()).cycle(2).events == {"sent": 1}
    finally:
        successor.stop()
    assert {e["metadata"]["name"] for e in sim.cluster.store.items(EVENTS, "team-a")} == sent
    reasons = sorted(e["reason"] for e in sim.cluster.store.items(EVENTS, "team-a"))
    assert reasons == ["Cancelled", "Queued", "Queued", "Released"]


def test_a_release_the_cluster_refuses_for_good_is_a_refused_warning(user, sim, gateway, term):
    create_namesake(sim, "taken")  # a TFJob of that name jobdash did not make
    job = submit(user, "taken", cpu="1")
    Dispatcher(gateway, settings()).cycle(term)
    job.refresh_from_db()
    assert job.state == State.FAILED and job.events.filter(type="Refused").exists()
    (refused,) = [e for e in sim.cluster.store.items(EVENTS, "team-a") if e["reason"] == "Refused"]
    assert refused["type"] == "Warning" and refused["message"] == job.message
    # not about the namesake, which is not this job's: about the job's QueuedJob
    assert (refused["involvedObject"]["kind"], refused["involvedObject"]["name"]) == ("QueuedJob", "taken")


def test_a_leader_whose_lease_lapsed_keeps_its_outbox_for_the_next(user, sim, gateway, term):
    submit(user, "kept")
    assert mirror.sync(gateway, term=term, limit=10, pool=sending_pool(2)) == {"created": 1}
    eventually(lambda: gateway.queued_objects(), 5, "the QueuedJob never reached the watch")
    gateway.writes_while(lambda: False)  # its leadership lapsed, by its own clock
    assert cluster_events.send(gateway, limit=10, pool=sending_pool(2)) == {"kept": 1}
    submit(user, "later")
    assert mirror.sync(gateway, term=term, limit=10, pool=sending_pool(2)) == {"failed": 1}
    assert EventOutbox.objects.count() == 2 and len(queued_objects(sim)) == 1
    gateway.writes_while(lambda: True)
    # the first job's Event goes; the second's waits for its QueuedJob, made by the next sync
    assert cluster_events.send(gateway, limit=10, pool=sending_pool(2)) == {"sent": 1, "waiting": 1}
    assert EventOutbox.objects.count() == 1


def test_a_cluster_that_refuses_queued_jobs_pauses_the_mirror(user, db, term):
    """An operator who upgraded jobdash but not its ClusterRole: the writes are refused
    (403), and the mirror does not ask again every cycle; the rest of the cycle goes on."""
    rbac = "rbac.authorization.k8s.io"
    groups = ["", "kubeflow.org", "batch", "jobset.x-k8s.io", "trainer.kubeflow.org", "scheduling.k8s.io"]
    role = {
        "apiVersion": f"{rbac}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "old-jobdash"},
        "rules": [
            {"apiGroups": groups, "resources": ["*"], "verbs": ["*"]},
            {"apiGroups": ["jobdash.io"], "resources": ["queuedjobs"], "verbs": ["get", "list", "watch"]},
        ],
    }
    binding = {
        "apiVersion": f"{rbac}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "old-jobdash"},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "old-jobdash"},
        "subjects": [{"kind": "User", "name": JOBDASH, "apiGroup": rbac}],
    }
    with running_kubesim(cluster_config(rbac=True, objects=[role, binding]), manual_clock=True) as sim:
        gateway = start_gateway(sim)
        try:
            submit(user, "runs")
            waiting = submit(user, "waits")
            dispatcher = Dispatcher(gateway, settings())
            assert dispatcher.cycle(term).mirrored == {"refused": 1}
            second = dispatcher.cycle(term)
            assert second.mirrored == {} and "mirror" in second.phases
            assert Job.objects.get(pk=waiting.pk).state == State.QUEUED and not queued_objects(sim)
            assert Job.objects.get(name="runs").state == State.RELEASED
        finally:
            gateway.stop()
