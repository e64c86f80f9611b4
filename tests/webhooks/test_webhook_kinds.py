"""Every job kind jobdash manages goes through the webhook, whatever kinds the registry
holds: the kinds here are read from queueing's registry (a kind that lands later is
covered), each with its example from examples/. Queued in deny mode, suspended at the
kind's own suspend path in suspend mode, named here when only generateName is set; the
children a managed parent creates (a JobSet's Jobs, a TrainJob's JobSet) pass; Katib's
batch Job trial, whose parent is a Trial, is queued."""

import copy
import re
from pathlib import Path

import pytest
import yaml

from jobdash.cluster.gateway import STALE_TERM_REASON, TERM_ANNOTATION
from jobdash.dispatch.writers import transitions
from jobdash.jobs.models import Job, JobEvent, State
from queueing import capabilities
from queueing.workload import BY_KEY, JobAdapter, adapter_for, read_path

from .conftest import (
    ALICE,
    JOBDASH,
    KATIB,
    TRIAL_OWNER,
    apply_patch,
    decoded_patch,
    katib_trial_job,
    of_kind,
    trial_tfjob,
)

pytestmark = pytest.mark.django_db
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GENERATED = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")
JOBSET_CONTROLLER = "system:serviceaccount:jobset-system:jobset-controller-manager"


def _examples() -> dict[tuple[str, str], dict]:
    found: dict[tuple[str, str], dict] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        if isinstance(document, dict):
            found.setdefault((document.get("apiVersion"), document.get("kind")), document)
    return found


EXAMPLE_OF = _examples()
# Every registered kind whose job is an object of its own, by its key ("tfjobs.kubeflow.org");
# the kinds whose jobs are their pods (a plain Pod) are gated, not suspended or refused:
# test_webhook_pods_e2e.py, test_webhook_pods.py.
KINDS = sorted(key for key, adapter in BY_KEY.items() if not capabilities.objects_are_pods(adapter))


def sample(adapter: JobAdapter, name: str, namespace: str = "team-a") -> dict:
    """The kind's example as a creator would create it in `namespace` under `name`."""
    example = EXAMPLE_OF.get((adapter.api_version, adapter.kind))
    if example is None:
        pytest.fail(f"no example of {adapter.kind} ({adapter.api_version}) in examples/: add one")
    body = copy.deepcopy(example)
    body["metadata"].update(name=name, namespace=namespace)
    return body


# A runtime for a TrainJob (it names one; its pods are the runtime's), modelled on Trainer's
# torch-distributed ClusterTrainingRuntime. The webhook reads it through the services layer.
RUNTIME = {
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                            "spec": {
                                "template": {
                                    "spec": {
                                        "containers": [
                                            {
                                                "name": "node",
                                                "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                                                "command": ["torchrun", "/workspace/train.py"],
                                            }
                                        ]
                                    }
                                }
                            },
                        },
                    }
                ]
            }
        },
    }
}


class EveryRuntime:
    """A RuntimeSource that has every runtime a job names, and records what was read."""

    def __init__(self):
        self.read: list[tuple[str, str, str]] = []

    def runtime(self, kind, namespace, name):
        self.read.append((kind, namespace, name))
        return {"kind": kind, "metadata": {"name": name}, **copy.deepcopy(RUNTIME)}


@pytest.fixture(autouse=True)
def runtimes(monkeypatch):
    """No cluster here: what a job refers to comes from memory."""
    from jobdash.cluster import runtimes as cluster_runtimes

    source = EveryRuntime()
    monkeypatch.setattr(cluster_runtimes, "from_settings", lambda: source)
    return source


def registered(api_version: str, kind: str) -> JobAdapter:
    adapter = adapter_for(api_version, kind)
    assert adapter is not None, f"{kind} ({api_version}) is not in queueing's registry"
    return adapter


def with_generate_name(body: dict, prefix: str) -> dict:
    body = copy.deepcopy(body)
    body["metadata"].pop("name")
    body["metadata"]["generateName"] = prefix
    return body


def set_path(obj: dict, path: tuple[str, ...], value) -> dict:
    obj = copy.deepcopy(obj)
    here = obj
    for step in path[:-1]:
        here = here.setdefault(step, {})
    here[path[-1]] = value
    return obj


# --- every kind, in both modes ---


@pytest.mark.parametrize("key", KINDS)
def test_every_kind_is_queued_in_deny_mode(webhook, team_a, deny_mode, key):
    adapter = BY_KEY[key]
    body = sample(adapter, "from-alice")
    response = webhook(body, user=ALICE, **of_kind(adapter))
    job = Job.objects.get()
    assert response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert message.startswith(f"{adapter.kind} team-a/from-alice is queued by jobdash as jobdash job #{job.pk}, ")
    assert "position 1 in team-a's queue" in message
    assert (job.kind, job.api_version, job.name, job.state) == (
        adapter.kind,
        adapter.api_version,
        "from-alice",
        "Queued",
    )
    assert (job.source, job.submitted_by_name) == ("webhook", ALICE)
    assert job.parsed["spec"] == body["spec"] and yaml.safe_load(job.manifest) == job.parsed
    # a retry lands on the same job, and says the kind
    again = webhook(body, user=ALICE, **of_kind(adapter))["status"]["message"]
    assert again.startswith(f"{adapter.kind} team-a/from-alice is held by jobdash job #{job.pk}")
    assert Job.objects.count() == 1


@pytest.mark.parametrize("key", KINDS)
def test_every_kind_is_suspended_at_its_own_suspend_path_in_suspend_mode(webhook, team_a, suspend_mode, key):
    adapter = BY_KEY[key]
    body = sample(adapter, "from-alice")
    response = webhook(body, user=ALICE, **of_kind(adapter))
    job = Job.objects.get()
    assert response["allowed"] is True and "status" not in response
    patched = apply_patch(body, decoded_patch(response))
    assert read_path(patched, adapter.suspend_path) is True
    assert patched["metadata"]["labels"]["jobdash.io/queued"] == "true"
    # nothing else changed: the patch only suspends and labels
    unpatched = copy.deepcopy(patched)
    unpatched["metadata"]["labels"].pop("jobdash.io/queued")
    if not unpatched["metadata"]["labels"]:
        unpatched["metadata"].pop("labels")
    assert set_path(body, adapter.suspend_path, True) == unpatched
    assert response["warnings"] == [
        f"{adapter.kind} team-a/from-alice is queued by jobdash as jobdash job #{job.pk}, Queued, "
        "position 1 in team-a's queue until the next admission cycle ranks it; "
        "it stays suspended until jobdash releases it"
    ]
    assert (job.kind, job.name, job.state) == (adapter.kind, "from-alice", State.QUEUED)
    # the stored object is the creator's: a fallback create runs it
    assert read_path(job.parsed, adapter.suspend_path) is not True
    # the same retry gets the same patch
    assert decoded_patch(webhook(body, user=ALICE, **of_kind(adapter))) == decoded_patch(response)


@pytest.mark.parametrize("key", KINDS)
@pytest.mark.parametrize("mode", ["deny_mode", "suspend_mode"])
def test_every_kind_suspended_by_its_creator_is_queued(webhook, team_a, request, mode, key):
    request.getfixturevalue(mode)
    adapter = BY_KEY[key]
    body = set_path(sample(adapter, "manual"), adapter.suspend_path, True)
    response = webhook(body, user=ALICE, **of_kind(adapter))
    job = Job.objects.get()
    assert job.name == "manual" and job.state == "Queued"
    if mode == "deny_mode":
        assert response["allowed"] is False and f"jobdash job #{job.pk}" in response["status"]["message"]
    else:  # already suspended: the label alone binds it
        assert response["allowed"] is True
        assert [op["path"] for op in decoded_patch(response)] in (
            ["/metadata/labels"],
            ["/metadata/labels/jobdash.io~1queued"],
        )


@pytest.mark.parametrize("key", KINDS)
def test_every_kind_with_generate_name_is_queued_under_the_name_given_here_deny(webhook, team_a, deny_mode, key):
    adapter = BY_KEY[key]
    body = with_generate_name(sample(adapter, "x"), "run-")
    response = webhook(body, name="", user=ALICE, **of_kind(adapter))
    job = Job.objects.get()
    assert job.name.startswith("run-") and GENERATED.fullmatch(job.name[len("run-") :]), job.name
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(f"{adapter.kind} team-a/{job.name} is queued by jobdash as")
    assert job.parsed["metadata"]["name"] == job.name


@pytest.mark.parametrize("key", KINDS)
def test_every_kind_with_generate_name_keeps_the_name_given_here_suspend(webhook, team_a, suspend_mode, key):
    """The patch names the object, so the API server keeps that name (it generates one only
    for an object without a name) and the queued job is bound to the object."""
    adapter = BY_KEY[key]
    body = with_generate_name(sample(adapter, "x"), "run-")
    response = webhook(body, name="", user=ALICE, **of_kind(adapter))
    job = Job.objects.get()
    assert response["allowed"] is True
    patch = decoded_patch(response)
    assert {"op": "add", "path": "/metadata/name", "value": job.name} in patch
    patched = apply_patch(body, patch)
    assert patched["metadata"]["name"] == job.name and GENERATED.fullmatch(job.name[len("run-") :])
    assert read_path(patched, adapter.suspend_path) is True
    assert response["warnings"][0].startswith(f"{adapter.kind} team-a/{job.name} is queued by jobdash")


@pytest.mark.parametrize("key", KINDS)
def test_every_kind_fences_jobdash_s_own_writes(webhook, team_a, key):
    adapter = BY_KEY[key]
    transitions.take_term(2, "test")
    stale = sample(adapter, "released")
    stale["metadata"].setdefault("annotations", {})[TERM_ANNOTATION] = "1"
    for operation in ("CREATE", "UPDATE"):
        refused = webhook(stale, user=JOBDASH, operation=operation, **of_kind(adapter))
        assert refused["allowed"] is False and refused["status"]["reason"] == STALE_TERM_REASON
        current = set_path(stale, ("metadata", "annotations", TERM_ANNOTATION), "2")
        assert webhook(current, user=JOBDASH, operation=operation, **of_kind(adapter))["allowed"] is True
    assert Job.objects.count() == 0


# --- children of managed parents, and Katib's batch Job trial ---


def owned_by(body: dict, parent: JobAdapter, name: str = "parent", controller: bool = True) -> dict:
    body = copy.deepcopy(body)
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": parent.api_version,
            "kind": parent.kind,
            "name": name,
            "uid": "5b6c1f0e-2a4d-4b8e-9f3a-0c1d2e3f4a5b",
            "controller": controller,
            "blockOwnerDeletion": True,
        }
    ]
    return body


@pytest.mark.parametrize("parent", KINDS)
@pytest.mark.parametrize("mode", ["deny_mode", "suspend_mode"])
def test_an_object_whose_controller_is_a_managed_kind_passes_untouched(
    webhook, team_a, request, mode, parent, django_assert_num_queries
):
    """Its parent went through the queue; the child runs when the parent does. Decided
    without the database."""
    request.getfixturevalue(mode)
    child = owned_by(trial_tfjob("child"), BY_KEY[parent])
    with django_assert_num_queries(0):
        response = webhook(child, user=JOBSET_CONTROLLER)
    assert response == {"uid": response["uid"], "allowed": True}
    assert Job.objects.count() == 0


def test_an_owner_that_is_not_the_controller_or_no_managed_kind_does_not_let_it_pass(webhook, team_a, deny_mode):
    parent = BY_KEY[KINDS[0]]
    not_controller = owned_by(trial_tfjob("a"), parent, controller=False)
    assert webhook(not_controller)["allowed"] is False
    trial = trial_tfjob("b")  # controlled by a Katib Trial: no kind of jobdash's
    assert webhook(trial)["allowed"] is False
    assert sorted(Job.objects.values_list("name", flat=True)) == ["a", "b"]


@pytest.mark.parametrize("mode", ["deny_mode", "suspend_mode"])
def test_a_jobsets_child_job_passes_untouched(webhook, team_a, request, mode):
    request.getfixturevalue(mode)
    job = registered("batch/v1", "Job")
    jobset = registered("jobset.x-k8s.io/v1alpha2", "JobSet")
    child = owned_by(sample(job, "trainer-workers-0"), jobset, name="trainer")
    child["metadata"]["labels"] = {"jobset.sigs.k8s.io/jobset-name": "trainer"}
    response = webhook(child, user=JOBSET_CONTROLLER, **of_kind(job))
    assert response == {"uid": response["uid"], "allowed": True}
    assert Job.objects.count() == 0


@pytest.mark.parametrize("mode", ["deny_mode", "suspend_mode"])
def test_a_trainjobs_jobset_passes_untouched(webhook, team_a, request, mode):
    request.getfixturevalue(mode)
    jobset = registered("jobset.x-k8s.io/v1alpha2", "JobSet")
    trainjob = registered("trainer.kubeflow.org/v1alpha1", "TrainJob")
    child = owned_by(sample(jobset, "trainjob-torch"), trainjob, name="trainjob-torch")
    response = webhook(
        child, user="system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager", **of_kind(jobset)
    )
    assert response == {"uid": response["uid"], "allowed": True}
    assert Job.objects.count() == 0


def test_a_katib_batch_job_trial_is_queued_in_deny_mode(webhook, team_a, deny_mode):
    job_kind = registered("batch/v1", "Job")
    body = katib_trial_job()
    response = webhook(body, user=KATIB, **of_kind(job_kind))
    job = Job.objects.get()
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"].startswith(
        f"Job team-a/random-exp-trial-1 is queued by jobdash as jobdash job #{job.pk}, Queued"
    )
    assert (job.kind, job.api_version, job.submitted_by_name) == ("Job", "batch/v1", KATIB)
    assert job.parsed["metadata"]["ownerReferences"] == [dict(TRIAL_OWNER, name="random-exp-trial-1")]
    assert job.workload["pods"] == 1
    assert list(JobEvent.objects.filter(job=job).values_list("type", flat=True)) == ["Submitted"]


def test_a_katib_batch_job_trial_is_suspended_in_suspend_mode(webhook, team_a, suspend_mode):
    job_kind = registered("batch/v1", "Job")
    body = katib_trial_job()
    response = webhook(body, user=KATIB, **of_kind(job_kind))
    job = Job.objects.get()
    assert response["allowed"] is True
    patched = apply_patch(body, decoded_patch(response))
    assert patched["spec"]["suspend"] is True
    assert patched["metadata"]["labels"]["jobdash.io/queued"] == "true"
    assert patched["metadata"]["ownerReferences"] == body["metadata"]["ownerReferences"]
    assert (job.kind, job.name, job.state) == ("Job", "random-exp-trial-1", State.QUEUED)
    assert "suspend" not in job.parsed["spec"]


# --- names held across kinds, what a job refers to ---


def two_kinds() -> tuple[JobAdapter, JobAdapter]:
    assert len(KINDS) >= 2, "every kind is registered: more than one"
    return BY_KEY[KINDS[0]], BY_KEY[KINDS[1]]


def test_a_name_held_by_another_kind_is_said_so_in_deny_mode(webhook, team_a, deny_mode):
    first, second = two_kinds()
    webhook(sample(first, "shared"), **of_kind(first))
    job = Job.objects.get()
    message = webhook(sample(second, "shared"), **of_kind(second))["status"]["message"]
    assert message.startswith(f"{second.kind} team-a/shared is held by jobdash job #{job.pk}")
    assert f"The name is held by a {first.kind}, not this {second.kind}: cancel jobdash job #{job.pk}" in message
    assert Job.objects.count() == 1


def test_a_name_held_by_another_kind_is_refused_in_suspend_mode(webhook, team_a, suspend_mode):
    first, second = two_kinds()
    webhook(sample(first, "shared"), **of_kind(first))
    job = Job.objects.get()
    response = webhook(sample(second, "shared"), **of_kind(second))
    assert response["allowed"] is False and response["status"]["code"] == 409
    assert f"cancel jobdash job #{job.pk}" in response["status"]["message"]
    assert f"the name is held by a {first.kind}, not this {second.kind}" in response["status"]["message"]


def test_a_job_whose_reference_cannot_be_read_now_is_refused_for_a_retry(webhook, team_a, deny_mode, runtimes):
    """A TrainJob's pods are its runtime's: when the cluster cannot be asked, the creator
    is told to try again (503), and nothing is stored."""
    from jobdash.cluster.runtimes import RuntimeUnreadable

    trainjob = registered("trainer.kubeflow.org/v1alpha1", "TrainJob")

    def unreadable(kind, namespace, name):
        raise RuntimeUnreadable(f"cannot read {kind} {name!r} from the cluster: connection refused")

    runtimes.runtime = unreadable
    response = webhook(sample(trainjob, "later"), **of_kind(trainjob))
    assert response["allowed"] is False and response["status"]["code"] == 503
    assert response["status"]["message"].startswith("jobdash cannot queue TrainJob team-a/later now: spec.runtimeRef")
    assert Job.objects.count() == 0
