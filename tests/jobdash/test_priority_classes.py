"""Priority classes the Kubernetes way (#14 item 1): PriorityClasses live in the cluster
(kubesim here, read by the web through KUBECONFIG only when a submission involves one), a
job's priority is its class's value, namespaces have a default and a limit, and a numeric
priority is staff's override."""

import json

import pytest

from jobdash.jobs import services
from jobdash.jobs.exceptions import Forbidden
from jobdash.jobs.models import Job, JobEvent, State
from kubesim.testing import running_kubesim, tfjob_manifest

from .dispatch_support import JOBDASH

pytestmark = pytest.mark.django_db
CLASSES = {"low": 100, "normal": 1000, "high": 10000, "urgent": 100000}


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


@pytest.fixture
def cluster(settings):
    config = {
        "namespaces": [{"name": "team-a"}, {"name": "team-b"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "objects": [priority_class(name, value) for name, value in CLASSES.items()],
    }
    with running_kubesim(config, manual_clock=True) as sim:
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        yield sim


@pytest.fixture
def limited(team_a, cluster):
    """team-a: members may go up to `normal`; jobs that name nothing get `low`."""
    team_a.default_priority_class, team_a.max_priority_class = "low", "normal"
    team_a.save()
    return team_a


def tf(name: str, pod_class: str | None = None) -> str:
    manifest = tfjob_manifest(name, "team-a", workers=1)
    if pod_class is not None:
        manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = pod_class
    return json.dumps(manifest)


def submit(client, manifest: str, **fields):
    return client.post("/api/v1/jobs/", {"manifest": manifest, **fields}, format="json")


def errors(response) -> list[tuple[str, str]]:
    return [(e["path"], e["message"]) for e in response.json()["errors"]]


def test_a_members_class_within_the_limit_gives_its_value(api, limited):
    response = submit(api, tf("a"), priority_class="normal")
    assert response.status_code == 201, response.content
    assert (response.json()["priority"], response.json()["priority_class"]) == (1000, "normal")
    job = Job.objects.get()
    assert (job.priority, job.priority_class) == (1000, "normal")
    assert JobEvent.objects.get(job=job).message == "queued from api with priority 1000 (class 'normal')"


def test_a_class_above_the_limit_is_403_naming_the_limit_and_stores_nothing(api, limited):
    response = submit(api, tf("a"), priority_class="urgent")
    assert response.status_code == 403
    assert errors(response) == [
        ("priority_class", "priority class 'urgent' (100000) is above team-a's limit 'normal' (1000)")
    ]
    assert not Job.objects.exists()


def test_a_members_numeric_priority_is_403_and_staffs_is_accepted(api, staff_api, limited):
    response = submit(api, tf("a"), priority=999)
    assert response.status_code == 403 and errors(response)[0][0] == "priority"
    response = api.post("/api/v1/jobs/?priority=999", data=tf("a"), content_type="application/yaml")
    assert response.status_code == 403 and errors(response)[0][0] == "priority"
    assert not Job.objects.exists()
    # Staff's number wins over the class; staff is not held to the namespace's limit.
    response = submit(staff_api, tf("b"), priority=999, priority_class="urgent")
    assert response.status_code == 201, response.content
    assert (response.json()["priority"], response.json()["priority_class"]) == (999, "urgent")
    response = submit(staff_api, tf("c"), priority_class="urgent")
    assert response.json()["priority"] == 100000


def test_the_pods_priority_class_name_is_used(api, limited):
    response = submit(api, tf("a", pod_class="normal"))
    assert response.status_code == 201, response.content
    assert (response.json()["priority"], response.json()["priority_class"]) == (1000, "normal")
    # ... and held to the limit, naming where it was found
    response = submit(api, tf("b", pod_class="high"))
    assert response.status_code == 403
    assert errors(response)[0][0] == "spec.tfReplicaSpecs.Worker.template.spec.priorityClassName"
    # an explicit choice wins over the pods'
    response = submit(api, tf("c", pod_class="high"), priority_class="low")
    assert response.json()["priority"] == 100


def test_the_namespace_default_applies_when_nothing_is_named(api, limited, team_b, staff_api):
    response = submit(api, tf("a"))
    assert (response.json()["priority"], response.json()["priority_class"]) == (100, "low")
    # a YAML body names its class in the query string
    response = api.post("/api/v1/jobs/?priority_class=normal", data=tf("b"), content_type="application/yaml")
    assert response.status_code == 201 and response.json()["priority"] == 1000
    # a namespace without a default: priority 0, no class
    manifest = json.dumps(tfjob_manifest("c", "team-b", workers=1))
    response = submit(staff_api, manifest)
    assert (response.json()["priority"], response.json()["priority_class"]) == (0, "")


def test_an_unknown_class_is_400_naming_the_field(api, limited):
    response = submit(api, tf("a"), priority_class="nope")
    assert response.status_code == 400
    assert errors(response) == [("priority_class", "priority class 'nope' does not exist in the cluster")]
    response = submit(api, tf("a"), priority_class="Not/A/Name")
    assert response.status_code == 400 and "not a priority class name" in errors(response)[0][1]
    response = submit(api, tf("b", pod_class="nope"))
    assert response.status_code == 400
    assert errors(response)[0][0] == "spec.tfReplicaSpecs.Worker.template.spec.priorityClassName"
    assert not Job.objects.exists()


def test_changing_the_class_of_a_queued_job(api, staff_api, limited):
    job_id = submit(api, tf("a")).json()["id"]
    response = api.post(f"/api/v1/jobs/{job_id}/priority_class/", {"priority_class": "normal"}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["priority"], response.json()["priority_class"]) == (1000, "normal")
    event = JobEvent.objects.filter(job_id=job_id, type="PriorityChanged").get()
    assert event.message == "priority class 'low' -> 'normal', priority 100 -> 1000"
    # above the limit: refused for a member, fine for staff
    response = api.post(f"/api/v1/jobs/{job_id}/priority_class/", {"priority_class": "urgent"}, format="json")
    assert response.status_code == 403 and "above team-a's limit" in errors(response)[0][1]
    response = staff_api.post(f"/api/v1/jobs/{job_id}/priority_class/", {"priority_class": "urgent"}, format="json")
    assert response.status_code == 200 and response.json()["priority"] == 100000
    # unknown: 400; not Queued any more: 409
    response = api.post(f"/api/v1/jobs/{job_id}/priority_class/", {"priority_class": "nope"}, format="json")
    assert response.status_code == 400 and errors(response)[0][0] == "priority_class"
    Job.objects.filter(pk=job_id).update(state=State.RUNNING)
    response = staff_api.post(f"/api/v1/jobs/{job_id}/priority_class/", {"priority_class": "low"}, format="json")
    assert response.status_code == 409


def test_requeue_is_staff_only(api, staff_api, limited):
    job_id = submit(api, tf("a")).json()["id"]
    Job.objects.filter(pk=job_id).update(state=State.RUNNING)
    response = api.post(f"/api/v1/jobs/{job_id}/requeue/", {}, format="json")
    assert response.status_code == 403
    response = staff_api.post(f"/api/v1/jobs/{job_id}/requeue/", {"reason": "node drain"}, format="json")
    assert response.status_code == 200, response.content
    assert Job.objects.get(pk=job_id).requeue_requested_at is not None
    assert JobEvent.objects.filter(job_id=job_id, type="RequeueRequested").exists()


def test_the_submit_page_offers_the_clusters_classes(client, alice, limited):
    client.force_login(alice)
    page = client.get("/submit/").content.decode()
    assert '<option value="normal">normal (1000)</option>' in page
    assert 'name="priority"' not in page  # the numeric override is staff's


def test_a_webhook_submission_is_held_to_the_limit(limited):
    with pytest.raises(Forbidden) as refused:
        services.job_submit(user=None, manifest=tf("a", pod_class="urgent"), source="webhook", submitted_by_name="kf")
    assert "above team-a's limit" in str(refused.value)
    job = services.job_submit(user=None, manifest=tf("b", pod_class="normal"), source="webhook", submitted_by_name="kf")
    assert (job.priority, job.priority_class) == (1000, "normal")
