"""End to end: kubesim calls jobdash's webhook (configured with deploy/base/webhook.yaml)
as kube-apiserver would; Katib's identity creates TFJobs owned by a Trial; they land in
jobdash's queue, are released when the namespace's quota allows and exist in the cluster
with their ownerReference; jobdash's own creates pass; retries make no duplicate."""

import json
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobdash.cluster.kube import KubeGateway, api_client
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import Job, Namespace, State
from kubesim.resources import BY_API_VERSION_KIND
from kubesim.testing import running_kubesim
from tests.jobdash.dispatch_support import settings, tf
from tests.pki import with_webhook

from .conftest import ALICE, JOBDASH, KATIB, TRIAL_OWNER, katib_trial_job, trial_tfjob

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
G, V, P = "kubeflow.org", "v1", "tfjobs"
TFJOBS = BY_API_VERSION_KIND[("kubeflow.org/v1", "TFJob")]


def cluster_config(listener, pki) -> dict:
    """kubesim calling the webhook's own TLS listener with the API server's client certificate."""
    config = {
        "nodes": [{"prefix": "node", "count": 2, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}],
        # Two workers of 1 cpu per trial: one trial at a time fits the quota.
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "3"}}, {"name": "kubeflow"}],
        "users": [
            {"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]},
            {"token": "katib-token", "username": KATIB, "groups": ["system:serviceaccounts"]},
            {"token": "alice-token", "username": ALICE, "groups": ["ml-team"]},
        ],
        "kubelet": {"start_delay_seconds": 1.0},
    }
    return with_webhook(config, listener.url, pki)


@pytest.fixture
def team_a():
    return Namespace.objects.create(name="team-a")


@pytest.fixture
def sim(webhook_listener, webhook_pki, team_a):
    with running_kubesim(cluster_config(webhook_listener, webhook_pki), manual_clock=True) as sim:
        yield sim
        assert sim.server.errors == []


@pytest.fixture
def gateway(sim):
    gateway = KubeGateway(api_client("kubeconfig", sim.kubeconfig_path), retries=1, backoff=0.01)
    gateway.start(timeout=10)
    yield gateway
    gateway.stop()


@pytest.fixture
def katib(sim):
    api = sim.api_client(KATIB)
    yield client.CustomObjectsApi(api)
    api.close()


def dispatcher(gateway, release_mode: str) -> Dispatcher:
    transitions.take_term(1, "test")
    return Dispatcher(gateway, settings(release_mode=release_mode, concurrency=4))


def create(api, body: dict, **kwargs) -> dict:
    return api.create_namespaced_custom_object(G, V, body["metadata"]["namespace"], P, body, **kwargs)


def refused(api, body: dict, **kwargs) -> str:
    with pytest.raises(ApiException) as error:
        create(api, body, **kwargs)
    assert error.value.status == 403, error.value.body
    message = json.loads(error.value.body)["message"]
    assert message.startswith('admission webhook "tfjobs.jobdash.io" denied the request: ')
    return message


def job(name: str) -> Job:
    return Job.objects.select_related("namespace").get(
        name=name, state__in=(State.QUEUED, State.RELEASED, State.RUNNING, State.SUCCEEDED)
    )


def run_until(dispatcher, sim, gateway, name: str, wanted: str, steps: int = 40) -> None:
    """Cycles and virtual time, one second a step, until job `name` is `wanted`."""
    for _ in range(steps):
        dispatcher.cycle(1)
        if job(name).state == wanted:
            return
        sim.advance(1.0)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and (
            len([p for p in gateway.pods() if p.namespace == "team-a"]) != len(sim.cluster.pods("team-a"))
        ):
            time.sleep(0.02)
    raise AssertionError(f"{name} is {job(name).state}, never {wanted}")


def creates_by(sim, user: str) -> list[tuple[str, str]]:
    return [(a["name"], a["outcome"]) for a in sim.cluster.audit if a["user"] == user and not a["dry_run"]]


def test_deny_mode_katib_trials_are_queued_released_and_owned(settings, sim, gateway, katib):
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    first = refused(katib, trial_tfjob("trial-1"))
    assert f"jobdash job #{job('trial-1').pk}" in first and "position 1 in team-a's queue" in first
    refused(katib, trial_tfjob("trial-2"))
    # Katib retries until the create succeeds: every retry lands on the same job
    for _ in range(2):
        assert f"jobdash job #{job('trial-1').pk}" in refused(katib, trial_tfjob("trial-1"))
    assert Job.objects.count() == 2 and sim.cluster.tfjob("team-a", "trial-1") is None
    assert job("trial-1").submitted_by_name == KATIB and job("trial-1").source == "webhook"
    # a dry run stores nothing
    assert "would be queued" in refused(katib, trial_tfjob("trial-3"), dry_run="All")
    assert Job.objects.count() == 2
    # outside jobdash's namespaces, Katib's creates pass
    create(katib, trial_tfjob("free-trial", namespace="kubeflow"))

    loop = dispatcher(gateway, "create")
    loop.cycle(1)
    assert (job("trial-1").state, job("trial-2").state) == (State.RELEASED, State.QUEUED)
    tfjob = sim.cluster.tfjob("team-a", "trial-1")
    assert tfjob["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name="trial-1")]
    assert tfjob["metadata"]["labels"]["katib.kubeflow.org/trial"] == "trial-1"
    assert tfjob["metadata"]["labels"]["jobdash.io/job-id"] == str(job("trial-1").pk)
    assert tfjob["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    # a retry while it is released still lands on it
    assert f"jobdash job #{job('trial-1').pk}, Released" in refused(katib, trial_tfjob("trial-1"))
    # trial-2 waits for quota; once trial-1 finishes it is released too
    assert job("trial-2").reason
    run_until(loop, sim, gateway, "trial-1", State.SUCCEEDED)
    run_until(loop, sim, gateway, "trial-2", State.RELEASED)
    assert sim.cluster.tfjob("team-a", "trial-2")["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name="trial-2")]

    assert Job.objects.count() == 2
    # jobdash's own creates passed the webhook; Katib's never reached the cluster in team-a
    assert creates_by(sim, JOBDASH) == [("trial-1", "Created"), ("trial-2", "Created")]
    assert [name for name, outcome in creates_by(sim, KATIB) if outcome == "Created"] == ["free-trial"]
    # (its pod writes, sending each pod to its planned node, go through the pods' webhook too)
    hooks = [c for c in sim.cluster.admission.calls if c["user"] == JOBDASH and c["webhook"] == "tfjobs.jobdash.io"]
    assert [c["allowed"] for c in hooks] == [True, True]


def test_suspend_mode_katib_trials_are_suspended_queued_and_resumed(settings, sim, gateway, katib):
    settings.JOBDASH_WEBHOOK_MODE = "suspend"
    settings.JOBDASH_RELEASE_MODE = "unsuspend"
    for name in ("trial-1", "trial-2"):
        created = create(katib, trial_tfjob(name))
        assert created["spec"]["runPolicy"]["suspend"] is True
        assert created["metadata"]["labels"]["jobdash.io/queued"] == "true"
        assert created["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name=name)]
    assert [j.state for j in Job.objects.order_by("name")] == [State.QUEUED, State.QUEUED]
    # a TFJob its creator suspended is queued too
    alice = client.CustomObjectsApi(sim.api_client(ALICE))
    manual = create(alice, trial_tfjob("manual", suspend=True))
    assert manual["metadata"]["labels"]["jobdash.io/queued"] == "true" and Job.objects.count() == 3
    # its creator cannot run it past the queue: clearing suspend on a held object is refused
    with pytest.raises(ApiException) as refused_unsuspend:
        alice.patch_namespaced_custom_object(
            "kubeflow.org", "v1", "team-a", "tfjobs", "manual", {"spec": {"runPolicy": {"suspend": False}}}
        )
    assert refused_unsuspend.value.status == 403
    assert "held by jobdash job" in json.loads(refused_unsuspend.value.body)["message"]
    assert sim.cluster.tfjob("team-a", "manual")["spec"]["runPolicy"]["suspend"] is True
    # its creator deletes it: its Queued job is cancelled (kubesim admits the DELETE)
    alice.delete_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", "manual")
    manual_job = Job.objects.get(name="manual")
    assert manual_job.state == State.CANCELLED and manual_job.message == f"its TFJob was deleted by {ALICE}"
    assert sim.cluster.tfjob("team-a", "manual") is None
    manual_job.delete()
    # a recreate of a queued name lands on its job (kubesim says AlreadyExists after the webhook)
    with pytest.raises(ApiException) as again:
        create(katib, trial_tfjob("trial-1"))
    assert again.value.status == 409 and Job.objects.count() == 2

    loop = dispatcher(gateway, "unsuspend")
    deadline = time.monotonic() + 5
    while len(gateway.job_objects()) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    loop.cycle(1)
    assert (job("trial-1").state, job("trial-2").state) == (State.RELEASED, State.QUEUED)
    resumed = sim.cluster.tfjob("team-a", "trial-1")
    assert resumed["spec"]["runPolicy"]["suspend"] is False
    assert resumed["metadata"]["labels"]["jobdash.io/job-id"] == str(job("trial-1").pk)
    assert resumed["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name="trial-1")]
    assert sim.cluster.tfjob("team-a", "trial-2")["spec"]["runPolicy"]["suspend"] is True
    run_until(loop, sim, gateway, "trial-1", State.SUCCEEDED)
    run_until(loop, sim, gateway, "trial-2", State.RELEASED)
    assert sim.cluster.tfjob("team-a", "trial-2")["spec"]["runPolicy"]["suspend"] is False
    assert Job.objects.count() == 2
    # jobdash never created anything in this mode: it resumed the creator's objects
    assert creates_by(sim, JOBDASH) == []


def test_a_deposed_leaders_writes_are_refused_by_the_webhook_and_nothing_is_stored(settings, sim, gateway):
    """The fence on the cluster side: every write of jobdash's carries its leader term, and
    the webhook refuses one written under a term older than the fence's before the API
    server stores anything: a create, an unsuspend or take-back, the stamp before a delete."""
    from jobdash.cluster.gateway import Fenced, NotFound

    settings.JOBDASH_WEBHOOK_MODE = "deny"
    transitions.take_term(5, "old-leader")
    gateway.create_job_object(job_id=1, manifest=trial_tfjob("under-five"), term=5)
    transitions.take_term(6, "new-leader")  # the old leader was paused; a new one took over
    with pytest.raises(Fenced, match="term 6 leads now"):
        gateway.create_job_object(job_id=2, manifest=trial_tfjob("late-create"), term=5)
    with pytest.raises(NotFound):
        gateway.read_job_object(tf("team-a", "late-create"))  # nothing stored
    with pytest.raises(Fenced):
        gateway.set_suspended(tf("team-a", "under-five"), True, term=5)
    assert not sim.cluster.tfjob("team-a", "under-five")["spec"].get("runPolicy", {}).get("suspend")
    with pytest.raises(Fenced):
        gateway.delete_job_object(tf("team-a", "under-five"), term=5)
    assert gateway.read_job_object(tf("team-a", "under-five")).job_id == 1  # still there
    # the current leader's writes pass: the stamp, then the delete of exactly that version
    gateway.set_suspended(tf("team-a", "under-five"), True, term=6)
    gateway.delete_job_object(tf("team-a", "under-five"), term=6)
    with pytest.raises(NotFound):
        gateway.read_job_object(tf("team-a", "under-five"))
    assert gateway.create_job_object(job_id=2, manifest=trial_tfjob("late-create"), term=6).job_id == 2


# --- Katib's default trial: a batch/v1 Job (the webhook entry of deploy/base/webhook.yaml for jobs) ---


def katib_batch_trial(name: str) -> dict:
    body = katib_trial_job(name)
    body["metadata"]["annotations"] = {"kubesim.io/duration-seconds": "5"}
    return body


def create_batch_job(api, body: dict) -> dict:
    return api.create_namespaced_custom_object("batch", "v1", body["metadata"]["namespace"], "jobs", body)


def test_deny_mode_a_katib_batch_job_trial_is_queued_released_and_owned(settings, sim, gateway, katib):
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    body = katib_batch_trial("job-trial-1")
    with pytest.raises(ApiException) as error:
        create_batch_job(katib, body)
    assert error.value.status == 403, error.value.body
    message = json.loads(error.value.body)["message"]
    assert message.startswith(
        'admission webhook "jobs.jobdash.io" denied the request: '
        f"Job team-a/job-trial-1 is queued by jobdash as jobdash job #{job('job-trial-1').pk}, Queued"
    )
    assert sim.cluster.job("jobs.batch", "team-a", "job-trial-1") is None
    assert (job("job-trial-1").kind, job("job-trial-1").submitted_by_name) == ("Job", KATIB)

    loop = dispatcher(gateway, "create")
    loop.cycle(1)
    assert job("job-trial-1").state == State.RELEASED
    released = sim.cluster.job("jobs.batch", "team-a", "job-trial-1")
    assert released["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name="job-trial-1")]
    assert released["metadata"]["labels"]["katib.kubeflow.org/trial"] == "job-trial-1"
    assert released["metadata"]["labels"]["jobdash.io/job-id"] == str(job("job-trial-1").pk)
    run_until(loop, sim, gateway, "job-trial-1", State.SUCCEEDED)
    assert creates_by(sim, JOBDASH) == [("job-trial-1", "Created")]


def test_suspend_mode_a_katib_batch_job_trial_is_created_suspended_and_resumed(settings, sim, gateway, katib):
    settings.JOBDASH_WEBHOOK_MODE = "suspend"
    settings.JOBDASH_RELEASE_MODE = "unsuspend"
    created = create_batch_job(katib, katib_batch_trial("job-trial-1"))
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["labels"]["jobdash.io/queued"] == "true"
    assert created["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name="job-trial-1")]
    assert job("job-trial-1").state == State.QUEUED
    assert sim.cluster.pods_of("jobs.batch", "team-a", "job-trial-1") == []  # suspended: no pods

    loop = dispatcher(gateway, "unsuspend")
    deadline = time.monotonic() + 5
    while not gateway.job_objects() and time.monotonic() < deadline:
        time.sleep(0.02)
    loop.cycle(1)
    assert job("job-trial-1").state == State.RELEASED
    assert sim.cluster.job("jobs.batch", "team-a", "job-trial-1")["spec"]["suspend"] is False
    run_until(loop, sim, gateway, "job-trial-1", State.SUCCEEDED)
    assert creates_by(sim, JOBDASH) == []  # it resumed Katib's object


# --- a PyTorchJob trial (Katib's trialTemplate for PyTorch), through its own webhook entry ---


def katib_pytorch_trial(name: str) -> dict:
    from kubesim.testing import pytorchjob_manifest

    body = pytorchjob_manifest(name, "team-a", workers=1, cpu="1", memory="1Gi", duration=5)
    body["metadata"]["ownerReferences"] = [dict(TRIAL_OWNER, name=name)]
    body["metadata"]["labels"] = {"katib.kubeflow.org/trial": name, "katib.kubeflow.org/experiment": "random-exp"}
    return body


def create_pytorchjob(api, body: dict) -> dict:
    return api.create_namespaced_custom_object("kubeflow.org", "v1", "team-a", "pytorchjobs", body)


def test_deny_mode_a_katib_pytorchjob_trial_is_queued_released_once_and_owned(settings, sim, gateway, katib):
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    for _attempt in range(3):  # Katib retries a refused create: every retry lands on the one job
        with pytest.raises(ApiException) as error:
            create_pytorchjob(katib, katib_pytorch_trial("torch-trial-1"))
        assert error.value.status == 403
    message = json.loads(error.value.body)["message"]
    assert message.startswith('admission webhook "pytorchjobs.jobdash.io" denied the request: PyTorchJob team-a/')
    assert Job.objects.filter(name="torch-trial-1").count() == 1 and job("torch-trial-1").kind == "PyTorchJob"
    loop = dispatcher(gateway, "create")
    loop.cycle(1)
    released = sim.cluster.job("pytorchjobs.kubeflow.org", "team-a", "torch-trial-1")
    assert released["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name="torch-trial-1")]
    run_until(loop, sim, gateway, "torch-trial-1", State.SUCCEEDED)
    created = [a for a in sim.cluster.audit if a.get("name") == "torch-trial-1" and a.get("outcome") == "Created"]
    assert [a["user"] for a in created] == [JOBDASH]  # created once, by jobdash


def test_suspend_mode_a_katib_pytorchjob_trial_is_created_suspended_and_resumed(settings, sim, gateway, katib):
    settings.JOBDASH_WEBHOOK_MODE = "suspend"
    settings.JOBDASH_RELEASE_MODE = "unsuspend"
    created = create_pytorchjob(katib, katib_pytorch_trial("torch-trial-1"))
    assert created["spec"]["runPolicy"]["suspend"] is True
    assert job("torch-trial-1").state == State.QUEUED
    loop = dispatcher(gateway, "unsuspend")
    deadline = time.monotonic() + 5
    while not gateway.job_objects() and time.monotonic() < deadline:
        time.sleep(0.02)
    loop.cycle(1)
    assert job("torch-trial-1").state == State.RELEASED
    resumed = sim.cluster.job("pytorchjobs.kubeflow.org", "team-a", "torch-trial-1")
    assert resumed["spec"]["runPolicy"]["suspend"] is False
    run_until(loop, sim, gateway, "torch-trial-1", State.SUCCEEDED)
    assert [a for a in sim.cluster.audit if a.get("user") == JOBDASH and a.get("outcome") == "Created"] == []


def test_deny_mode_a_tfjob_its_creator_suspended_is_queued_and_runs_once_released(settings, sim, gateway):
    """Suspended by its creator, it used to pass untouched, and its creator could later clear
    suspend and run it past the queue. Now it is queued; jobdash releases it unsuspended."""
    settings.JOBDASH_WEBHOOK_MODE = "deny"
    alice = client.CustomObjectsApi(sim.api_client(ALICE))
    with pytest.raises(ApiException) as queued:
        create(alice, trial_tfjob("parked", suspend=True))
    assert queued.value.status == 403 and f"jobdash job #{job('parked').pk}" in json.loads(queued.value.body)["message"]
    assert sim.cluster.tfjob("team-a", "parked") is None
    loop = dispatcher(gateway, "create")
    loop.cycle(1)
    released = sim.cluster.tfjob("team-a", "parked")
    assert released is not None and not released["spec"].get("runPolicy", {}).get("suspend")
    run_until(loop, sim, gateway, "parked", State.SUCCEEDED)
