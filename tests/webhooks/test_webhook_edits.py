"""UPDATEs of objects jobdash has admitted or holds (webhooks/edits.py): an admitted job's
demand and jobdash's marks on it are not edited around admission; a held, queued object's
edit updates its queued job; everything else passes."""

import copy
from datetime import timedelta

import pytest
import yaml
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobdash.dispatch.writers import transitions
from jobdash.jobs import services
from jobdash.jobs.models import Fence, Job, JobEvent, Namespace, Source, State
from queueing import capabilities
from queueing.placement import GATE, hold
from queueing.workload import read_path
from tests.examples import examples
from tests.queueing.test_queueing_demand_change import BASES, RUNTIMES, adapter_of, edits, expected, pod_specs

from .conftest import ALICE, KATIB, of_kind

pytestmark = pytest.mark.django_db
OWN_LABELS = ("jobdash.io/job-id", "jobdash.io/managed", "jobdash.io/queued")
IDS = [f"{b['kind']}-{b['metadata']['name']}" for b in BASES]


@pytest.fixture(autouse=True)
def runtimes(monkeypatch):
    """A TrainJob's runtime, from memory (no cluster here)."""
    from jobdash.cluster import runtimes as cluster_runtimes

    monkeypatch.setattr(cluster_runtimes, "from_settings", lambda: RUNTIMES)


def submitted(base: dict, state: str = State.RUNNING) -> Job:
    Namespace.objects.get_or_create(name=base["metadata"]["namespace"])
    job = services.job_submit(user=None, manifest=yaml.safe_dump(base), source=Source.WEBHOOK, submitted_by_name=KATIB)
    Job.objects.filter(pk=job.pk).update(state=state)
    job.refresh_from_db()
    return job


def admitted_object(base: dict, job: Job) -> dict:
    """The object as jobdash released it: gated, labelled with its job, stamped with its term."""
    adapter = adapter_of(base)
    obj = hold(adapter, base, adapter.validate_and_build(base, RUNTIMES))
    obj["metadata"].setdefault("labels", {}).update({"jobdash.io/job-id": str(job.pk), "jobdash.io/managed": "true"})
    obj["metadata"].setdefault("annotations", {})["jobdash.io/term"] = "1"
    return obj


def held_object(base: dict) -> dict:
    obj = copy.deepcopy(base)
    path = capabilities.suspend_path(adapter_of(base))
    holder = obj
    for step in path[:-1]:
        holder = holder.setdefault(step, {})
    holder[path[-1]] = True
    obj["metadata"].setdefault("labels", {})["jobdash.io/queued"] = "true"
    return obj


def marks_changed(old: dict, new: dict) -> bool:
    """jobdash's labels, term annotation or placement gate taken off or changed, found here."""
    for section, keys in (("labels", OWN_LABELS), ("annotations", ("jobdash.io/term",))):
        before, after = old["metadata"].get(section) or {}, new["metadata"].get(section) or {}
        if any(key in before and before[key] != after.get(key) for key in keys):
            return True

    def gated(obj):
        return any(GATE in [g.get("name") for g in spec.get("schedulingGates") or []] for spec in pod_specs(obj))

    return gated(old) and not gated(new)


def update(webhook, old: dict, new: dict, user: str = ALICE, **kwargs) -> dict:
    return webhook(new, old_object=old, operation="UPDATE", user=user, **of_kind(adapter_of(old)), **kwargs)


def workers(body: dict, count: int) -> dict:
    body = copy.deepcopy(body)
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = count
    return body


def pytorch() -> dict:
    return copy.deepcopy(next(b for b in BASES if b["metadata"]["name"] == "pytorch-ddp"))


# --- the verdict on admitted objects, every kind, random edits ---


@pytest.mark.parametrize("base", BASES, ids=IDS)
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_an_admitted_objects_edit_is_refused_exactly_when_it_changes_the_demand_or_jobdashs_marks(
    webhook, team_a, base, data
):
    job = Job.objects.filter(name=base["metadata"]["name"]).first() or submitted(base)
    old = admitted_object(base, job)
    new, done = data.draw(edits(old))
    response = update(webhook, old, new)
    refuse = expected(old, new) or marks_changed(old, new)
    assert response["allowed"] is not refuse, (done, response)
    if refuse:
        assert response["status"]["code"] == 403 and response["status"]["reason"] == "Forbidden"
        assert f"admitted by jobdash as job #{job.pk} (Running)" in response["status"]["message"]
    assert Job.objects.get(pk=job.pk).manifest == job.manifest  # nothing written


# --- held objects (suspend mode), every kind, random edits ---


AS_SUBMITTED: dict[int, tuple] = {}  # job id -> (manifest, parsed, workload) as submitted


class Classes:
    """The cluster's PriorityClasses, from memory."""

    def get(self, name):
        from jobdash.cluster.priorities import PriorityClass

        return {"high": PriorityClass("high", 1000), "low": PriorityClass("low", 10)}.get(name)


def valid_submission(obj: dict, job: Job) -> bool:
    """Whether `obj` passes the checks a submission of it would (the kind's and the priority's)."""
    from jobdash.jobs.exceptions import JobdashError
    from jobdash.jobs.priority import resolve_priority

    try:
        parsed, _ = services.manifest_check(yaml.safe_dump(obj))
        resolve_priority(None, job.namespace, parsed)
    except JobdashError:
        return False
    return True


@pytest.mark.parametrize("base", BASES, ids=IDS)
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_held_objects_edit_reaches_its_queued_job_exactly_when_it_changes_the_demand(
    webhook, suspend_mode, team_a, monkeypatch, base, data
):
    from jobdash.cluster import priorities

    monkeypatch.setattr(priorities, "from_settings", Classes)
    job = Job.objects.filter(name=base["metadata"]["name"]).first() or submitted(base, state=State.QUEUED)
    # each example starts from the job as submitted
    initial = AS_SUBMITTED.setdefault(job.pk, (job.manifest, job.parsed, job.workload))
    Job.objects.filter(pk=job.pk).update(
        manifest=initial[0], parsed=initial[1], workload=initial[2], priority=0, priority_class=""
    )
    job.refresh_from_db()
    old = held_object(base)
    new, done = data.draw(edits(old))
    response = update(webhook, old, new)
    stored = Job.objects.get(pk=job.pk)
    path = capabilities.suspend_path(adapter_of(base))
    if read_path(new, path) is not True:  # clearing the flag: jobdash unsuspends it, nobody else
        assert response["allowed"] is False and response["status"]["code"] == 403, done
        assert stored.manifest == job.manifest
    elif not expected(old, new):
        assert response["allowed"] is True and "warnings" not in response, (done, response)
        assert stored.manifest == job.manifest
    elif not valid_submission(new, job):
        assert response["allowed"] is False and response["status"]["code"] == 422, (done, response)
        assert stored.manifest == job.manifest
    else:
        assert response["allowed"] is True and f"jobdash job #{job.pk} now asks" in response["warnings"][0], done
        workload = adapter_of(base).validate_and_build(new, RUNTIMES)
        assert stored.workload["pod_sets"] == [p.to_json() for p in workload.pod_sets], done
        assert read_path(stored.parsed, path) is not True and stored.state == State.QUEUED
        named = {spec.get("priorityClassName") for spec in pod_specs(new)} - {None}
        values = {"": 0, "high": 1000, "low": 10}
        chosen = named.pop() if named else ""
        assert (stored.priority_class, stored.priority) == (chosen, values[chosen]), done


# --- admitted: messages, what passes ---


def test_more_workers_on_a_running_job_are_refused_with_what_changed_and_what_to_do(webhook, team_a):
    job = submitted(pytorch())
    old = admitted_object(pytorch(), job)
    response = update(webhook, old, workers(old, 40))
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"] == (
        f"PyTorchJob team-a/pytorch-ddp was admitted by jobdash as job #{job.pk} (Running) for the demand it had "
        "then; this update changes what it asks of the cluster (Worker: 3 -> 40 pods): to run it so, cancel "
        f"jobdash job #{job.pk} and submit the edited PyTorchJob again"
    )


def test_an_elastic_jobs_message_says_there_is_no_resize(webhook, team_a):
    base = next(b for b in BASES if b["metadata"]["name"] == "pytorch-elastic")
    old = admitted_object(base, submitted(base))
    bigger = copy.deepcopy(old)
    bigger["spec"]["elasticPolicy"]["maxReplicas"] = 8
    message = update(webhook, old, bigger)["status"]["message"]
    assert "Worker: elastic range 2-4 (3 replicas) -> 2-8 (3 replicas)" in message
    assert "jobdash cannot resize an elastic job in place either" in message


def test_user_metadata_images_and_status_pass_without_a_query(webhook, team_a, django_assert_num_queries):
    old = admitted_object(pytorch(), submitted(pytorch()))
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["team"] = "vision"
    new["metadata"]["annotations"]["note"] = "rerun"
    new["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = "other:2"
    with django_assert_num_queries(0):
        assert update(webhook, old, new)["allowed"] is True
        status = copy.deepcopy(old)
        status["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
        assert update(webhook, old, workers(status, 40), sub_resource="status")["allowed"] is True


@pytest.mark.parametrize("label", OWN_LABELS[:2])
def test_taking_off_jobdashs_label_or_gate_is_refused(webhook, team_a, label):
    job = submitted(pytorch())
    old = admitted_object(pytorch(), job)
    unlabelled = copy.deepcopy(old)
    unlabelled["metadata"]["labels"].pop(label)
    message = update(webhook, old, unlabelled)["status"]["message"]
    assert f"removes or changes jobdash's own label {label}" in message
    assert "patch the fields you mean to change instead of replacing the object" in message
    # a replace with the user's own file: no gate, no labels
    replaced = update(webhook, old, pytorch())
    assert replaced["allowed"] is False
    assert f"scheduling gate {GATE} in its pod templates" in replaced["status"]["message"]


def test_a_finished_jobs_object_and_an_unbound_object_take_any_edit(webhook, team_a):
    done = submitted(pytorch(), state=State.SUCCEEDED)
    old = admitted_object(pytorch(), done)
    assert update(webhook, old, workers(old, 40))["allowed"] is True
    # an object jobdash never released nor holds (created before jobdash managed team-a)
    assert update(webhook, pytorch(), workers(pytorch(), 40))["allowed"] is True


def test_jobdashs_own_writes_pass(webhook, team_a):
    old = admitted_object(pytorch(), submitted(pytorch()))
    transitions.take_term(1, "test")
    taken_back = copy.deepcopy(pytorch())  # restored and relabelled by the dispatcher
    taken_back["metadata"]["annotations"]["jobdash.io/term"] = "1"
    response = update(webhook, old, taken_back, user="system:serviceaccount:jobdash:jobdash")
    assert response["allowed"] is True


# --- held and queued (suspend mode): the queued job takes the edit ---


@pytest.fixture
def held(suspend_mode, team_a):
    job = submitted(pytorch(), state=State.QUEUED)
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(hours=1))
    job.refresh_from_db()
    return job, held_object(pytorch())


def test_more_workers_on_a_held_object_update_its_queued_job_and_send_it_back(webhook, held):
    job, old = held
    Fence.objects.create(id=1, term=1, claims=7)
    response = update(webhook, old, workers(old, 5))
    assert response["allowed"] is True
    assert response["warnings"] == [
        f"PyTorchJob team-a/pytorch-ddp: its queued jobdash job #{job.pk} now asks for the edited demand "
        "(Worker: 3 -> 5 pods); it goes to the back of team-a's queue (its demand grew)"
    ]
    edited = Job.objects.get(pk=job.pk)
    assert edited.state == State.QUEUED and edited.workload["pods"] == 6
    assert edited.parsed["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 5
    assert edited.parsed["spec"]["runPolicy"]["suspend"] is False  # stored as a job to run
    assert "jobdash.io/queued" not in (edited.parsed["metadata"].get("labels") or {})
    assert yaml.safe_load(edited.manifest) == edited.parsed
    assert edited.submitted_at > job.submitted_at + timedelta(minutes=59)
    assert edited.predicted_duration_s is None
    event = JobEvent.objects.filter(job=edited, type="Edited").get()
    assert event.actor == ALICE and "Worker: 3 -> 5 pods" in event.message and "to the back" in event.message
    # a cycle that planned from the old demand claims nothing
    assert Fence.objects.get().claims == 8


def test_fewer_workers_keep_the_queued_jobs_place(webhook, held):
    job, old = held
    response = update(webhook, old, workers(old, 1))
    assert response["allowed"] is True and "it keeps its place in the queue" in response["warnings"][0]
    edited = Job.objects.get(pk=job.pk)
    assert edited.workload["pods"] == 2 and edited.submitted_at == job.submitted_at


def test_an_invalid_edit_of_a_held_object_is_422_naming_the_field_and_writes_nothing(webhook, held):
    job, old = held
    bad = copy.deepcopy(old)
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    response = update(webhook, old, bad)
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert "spec.pytorchReplicaSpecs.Master.replicas" in response["status"]["message"]
    assert Job.objects.get(pk=job.pk).manifest == job.manifest
    assert not JobEvent.objects.filter(type="Edited").exists()


def test_a_dry_run_edit_of_a_held_object_writes_nothing(webhook, held):
    job, old = held
    response = update(webhook, old, workers(old, 5), dry_run=True)
    assert response["allowed"] is True and "dry run: nothing stored" in response["warnings"][0]
    assert Job.objects.get(pk=job.pk).manifest == job.manifest


def test_a_held_object_whose_job_was_released_is_admitted(webhook, held):
    job, old = held
    Job.objects.filter(pk=job.pk).update(state=State.RELEASED)
    response = update(webhook, old, workers(old, 5))
    assert (
        response["allowed"] is False
        and f"admitted by jobdash as job #{job.pk} (Released)" in (response["status"]["message"])
    )
    assert Job.objects.get(pk=job.pk).manifest == job.manifest


def test_clearing_suspend_of_a_held_object_is_still_refused_first(webhook, held):
    job, old = held
    running = copy.deepcopy(workers(old, 5))
    running["spec"]["runPolicy"]["suspend"] = False
    response = update(webhook, old, running)
    assert response["allowed"] is False and "only jobdash unsuspends it" not in response["status"]["message"]
    assert "jobdash unsuspends it when the quota allows" in response["status"]["message"]
    assert Job.objects.get(pk=job.pk).manifest == job.manifest


@pytest.mark.parametrize("base", BASES, ids=IDS)
def test_every_kinds_held_object_edit_reaches_its_queued_job(webhook, suspend_mode, team_a, base):
    job = submitted(base, state=State.QUEUED)
    old = held_object(base)
    new = copy.deepcopy(old)
    specs = pod_specs(new)
    specs[-1]["nodeSelector"] = {"disktype": "ssd"}
    response = update(webhook, old, new)
    assert response["allowed"] is True and "it keeps its place in the queue" in response["warnings"][0]
    stored = Job.objects.get(pk=job.pk)
    assert any(p["node_selector"] == {"disktype": "ssd"} for p in stored.workload["pod_sets"])
    assert read_path(stored.parsed, capabilities.suspend_path(adapter_of(base))) is not True
