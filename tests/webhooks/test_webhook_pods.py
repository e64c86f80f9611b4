"""The webhook's decisions for plain Pods and pod groups, review by review (webhooks/pods.py):
what passes untouched, the patch that gates a queued pod, dry runs, retries, generateName,
jobdash's own writes; the end-to-end behaviour is test_webhook_pods_e2e.py."""

import json

import pytest

from jobdash.cluster.gateway import JOB_ID_LABEL
from jobdash.jobs import services
from jobdash.jobs.exceptions import InvalidInput
from jobdash.jobs.models import Job, PodGroupMember
from queueing.kinds.pod import COUNT_ANNOTATION, GROUP_LABEL, POD
from queueing.placement import GATE

from .conftest import ALICE, JOBDASH, apply_patch, decoded_patch, of_kind

pytestmark = pytest.mark.django_db
POD_REVIEW = of_kind(POD)


def gpu_pod(name: str = "p-0", gpus: int = 2, **meta) -> dict:
    amounts = {"nvidia.com/gpu": str(gpus)}
    metadata = {"namespace": "team-a", **({"name": name} if name else {}), **meta}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": amounts, "limits": amounts}}]},
    }


def test_pods_of_a_controller_or_outside_managed_namespaces_pass_untouched(webhook, team_a):
    tfjob = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "t", "uid": "u", "controller": True}
    for body in (gpu_pod(ownerReferences=[tfjob]), gpu_pod(namespace="elsewhere")):
        response = webhook(body, user=ALICE, **POD_REVIEW)
        assert response["allowed"] and "patch" not in response, response
    assert not Job.objects.exists()


def test_a_queued_pod_is_gated_and_labelled_with_its_group_and_job(webhook, team_a):
    body = gpu_pod("solo")
    body["spec"]["schedulingGates"] = [{"name": "example.com/theirs"}]
    response = webhook(body, user=ALICE, **POD_REVIEW)
    assert response["allowed"], response
    patched = apply_patch(body, decoded_patch(response))
    job = Job.objects.get(name="solo")
    assert [g["name"] for g in patched["spec"]["schedulingGates"]] == ["example.com/theirs", GATE]
    assert patched["metadata"]["labels"] == {GROUP_LABEL: "solo", JOB_ID_LABEL: str(job.pk)}
    assert "queued by jobdash as job" in response["warnings"][0]
    # A retry of the same create lands on the same job and is no second member.
    assert webhook(body, user=ALICE, **POD_REVIEW)["allowed"]
    assert Job.objects.count() == 1 and PodGroupMember.objects.filter(job=job).count() == 1


def test_a_dry_run_stores_nothing(webhook, team_a):
    response = webhook(gpu_pod("dry"), user=ALICE, dry_run=True, **POD_REVIEW)
    assert response["allowed"] and "dry run" in response["warnings"][0]
    assert not Job.objects.exists() and not PodGroupMember.objects.exists()


def test_generate_name_is_named_here_and_queued_under_that_name(webhook, team_a):
    body = gpu_pod("", generateName="worker-")
    response = webhook(body, user=ALICE, **POD_REVIEW)
    name = apply_patch(body, decoded_patch(response))["metadata"]["name"]
    assert name.startswith("worker-") and len(name) == len("worker-") + 5
    assert Job.objects.get(kind="Pod").name == name


def test_jobdash_lifts_its_own_gate_and_others_may_change_other_things(webhook, team_a):
    gated = gpu_pod("g")
    gated["spec"]["schedulingGates"] = [{"name": GATE}]
    lifted = gpu_pod("g")
    lifted["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-0"}
    assert webhook(lifted, old_object=gated, operation="UPDATE", user=JOBDASH, **POD_REVIEW)["allowed"]
    refused = webhook(lifted, old_object=gated, operation="UPDATE", user=ALICE, **POD_REVIEW)
    assert not refused["allowed"] and refused["status"]["code"] == 403
    relabelled = gpu_pod("g", labels={"team": "a"})
    relabelled["spec"]["schedulingGates"] = [{"name": GATE}]
    assert webhook(relabelled, old_object=gated, operation="UPDATE", user=ALICE, **POD_REVIEW)["allowed"]


def test_a_pod_is_queued_only_through_the_cluster(team_a, django_user_model):
    user = django_user_model.objects.create_user("ana")
    team_a.members.add(user)
    body = gpu_pod("via-api", labels={GROUP_LABEL: "g"}, annotations={COUNT_ANNOTATION: "2"})
    with pytest.raises(InvalidInput) as error:
        services.job_submit(user=user, manifest=json.dumps(body), source="api")
    assert error.value.found[0].path == "kind"
    assert "created in the cluster" in error.value.found[0].message


def test_bad_input_is_a_4xx_naming_the_field_never_a_500(webhook, team_a):
    long_name = webhook(gpu_pod("p" * 64), user=ALICE, **POD_REVIEW)
    assert not long_name["allowed"] and long_name["status"]["code"] == 422
    assert "metadata.name" in long_name["status"]["message"]
    # a member's own name may be long: the group names the job
    member = gpu_pod("m" * 100, labels={GROUP_LABEL: "g"}, annotations={COUNT_ANNOTATION: "2"})
    assert webhook(member, user=ALICE, **POD_REVIEW)["allowed"]
    broken = gpu_pod("broken")
    broken["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "lots"
    refused = webhook(broken, user=ALICE, **POD_REVIEW)
    assert refused["status"]["code"] == 422 and "spec.containers[0].resources" in refused["status"]["message"]
