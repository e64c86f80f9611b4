"""Checkpoints end to end (issue 48) on `make run`'s stack: a PyTorchJob submitted through the
API and a TFJob a member creates with kubectl's client, each with kubesim.io/checkpoint-seconds,
run; kubesim's operator writes jobdash.io/checkpointed-at on their objects as a real job would
(through the API server and jobdash's admission webhook), and the API shows what jobdash
recorded: checkpoints and the last checkpoint's time."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from jobdash.embedded.stack import EmbeddedStack
from jobdash.jobs.models import Job, JobEvent
from kubesim.testing import pytorchjob_manifest, tfjob_manifest
from tests.waiting import eventually

from .conftest import token_client

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "jobdash.io/checkpointed-at"
EMBEDDED = Path(__file__).resolve().parents[2] / "jobdash/embedded/embedded_cluster.yaml"


def test_checkpoints_kubesim_writes_show_in_the_api(tmp_path, alice, team_b):
    quick = yaml.safe_load(EMBEDDED.read_text())
    quick["kubelet"] = {"start_delay_seconds": 0.1}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(quick))
    api = token_client(alice)
    with EmbeddedStack(tmp_path, tmp_path / "cluster.yaml", tick_seconds=0.2) as stack:
        manifest = pytorchjob_manifest("ckpt-torch", "team-a", workers=1, cpu="500m", duration=30, checkpoint=2)
        body = {"manifest": json.dumps(manifest), "checkpoint_every": "2s", "checkpoint_on_notice": "1s"}
        response = api.post("/api/v1/jobs/", body, format="json")
        assert response.status_code == 201, response.content
        torch = response.json()
        assert (torch["checkpoint_every_s"], torch["checkpoint_on_notice_s"]) == (2.0, 1.0)

        member = client.CustomObjectsApi(config.new_client_from_config(str(stack.people_kubeconfig)))
        with pytest.raises(ApiException):  # queued by the webhook (deny mode): jobdash creates it at release
            member.create_namespaced_custom_object(
                "kubeflow.org", "v1", "team-a", "tfjobs", tfjob_manifest("ckpt-tf", "team-a", duration=30, checkpoint=2)
            )
        tf = Job.objects.get(name="ckpt-tf")

        def shown(job_id: int) -> dict | None:
            job = api.get(f"/api/v1/jobs/{job_id}/").json()
            return job if job["checkpoints"] >= 2 else None

        for job_id in (torch["id"], tf.pk):
            job = eventually(lambda job_id=job_id: shown(job_id), 25, f"job {job_id} reported no checkpoints")
            assert job["state"] == "Running"
            last = datetime.fromisoformat(job["last_checkpoint_at"])
            assert datetime.fromisoformat(job["started_at"]).replace(microsecond=0) <= last.replace(microsecond=0)
            types = [event["type"] for event in job["events"]]
            assert types.count("Checkpointed") == job["checkpoints"]
        # Each came from the job's own object, written through the webhook as its service account.
        actors = set(JobEvent.objects.filter(type="Checkpointed").values_list("actor", flat=True))
        assert actors == {"cluster"}
        obj = member.get_namespaced_custom_object("kubeflow.org", "v1", "team-a", "tfjobs", "ckpt-tf")
        assert obj["metadata"]["annotations"]["jobdash.io/checkpointed-at"].endswith("Z")
        # The member's own code may say so too (the README's kubectl annotate): RBAC and the webhook let it.
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patched = member.patch_namespaced_custom_object(
            "kubeflow.org", "v1", "team-a", "tfjobs", "ckpt-tf", {"metadata": {"annotations": {KEY: now}}}
        )
        assert patched["metadata"]["annotations"][KEY] == now
