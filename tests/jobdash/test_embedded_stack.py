"""`make run`'s stack (jobdash/embedded/stack.py) as a person meets it: a job created on its
cluster with the demo member's kubeconfig goes through jobdash's webhook (kubesim calls it
with the API server's client certificate) into the queue, shows up as a Queued job, and the
dispatcher releases it under jobdash's own identity until it succeeds."""

import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from jobdash.embedded.stack import EmbeddedStack
from jobdash.jobs.models import Job, Namespace, State
from kubesim.testing import tfjob_manifest
from tests.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)
EMBEDDED = Path(__file__).resolve().parents[2] / "jobdash/embedded/embedded_cluster.yaml"


def test_a_job_a_member_creates_on_the_embedded_cluster_is_queued_and_runs(tmp_path):
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name)
    quick = yaml.safe_load(EMBEDDED.read_text())
    quick["kubelet"] = {"start_delay_seconds": 0.1}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(quick))
    with EmbeddedStack(tmp_path, tmp_path / "cluster.yaml", tick_seconds=0.2) as stack:
        people = yaml.safe_load(stack.people_kubeconfig.read_text())
        assert people["current-context"] == "demo"
        assert {c["name"] for c in people["contexts"]} == {"demo", "kubernetes-admin"}
        member = client.CustomObjectsApi(config.new_client_from_config(str(stack.people_kubeconfig)))
        with pytest.raises(ApiException) as queued:
            member.create_namespaced_custom_object(
                "kubeflow.org", "v1", "team-a", "tfjobs", tfjob_manifest("from-kubectl", "team-a", duration=1)
            )
        job = Job.objects.get(name="from-kubectl")
        assert queued.value.status == 403
        assert f"jobdash job #{job.pk}" in json.loads(queued.value.body)["message"]
        assert (job.source, job.submitted_by_name) == ("webhook", "demo")
        eventually(lambda: Job.objects.get(pk=job.pk).state == State.SUCCEEDED, 30)
        created = [a for a in stack.cluster.audit if a["name"] == "from-kubectl" and a["outcome"] == "Created"]
        assert [a["user"] for a in created] == ["system:serviceaccount:jobdash:jobdash"]


def test_a_member_sees_a_waiting_job_as_a_queued_job_and_leaves_the_queue_by_deleting_it(tmp_path):
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name)
    with EmbeddedStack(tmp_path, EMBEDDED, tick_seconds=0.2) as stack:
        member = client.CustomObjectsApi(config.new_client_from_config(str(stack.people_kubeconfig)))
        with pytest.raises(ApiException):  # queued by the webhook; 10,000 CPUs: it waits for good
            member.create_namespaced_custom_object(
                "kubeflow.org", "v1", "team-a", "tfjobs", tfjob_manifest("huge", "team-a", cpu="10000")
            )
        job = Job.objects.get(name="huge")

        def mirrored():
            listed = member.list_namespaced_custom_object("jobdash.io", "v1alpha1", "team-a", "queuedjobs")
            return [o for o in listed["items"] if o["metadata"]["name"] == "huge" and "reason" in o["status"]]

        (queued,) = eventually(mirrored, 10)
        assert queued["spec"]["jobId"] == job.pk and queued["status"]["reason"].startswith("NeverFits")
        member.delete_namespaced_custom_object("jobdash.io", "v1alpha1", "team-a", "queuedjobs", "huge")
        job.refresh_from_db()
        assert (job.state, job.message) == (
            State.CANCELLED,
            "its QueuedJob team-a/huge was deleted by demo: it left the queue",
        )
