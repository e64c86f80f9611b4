"""`make run`'s cluster shares GPUs four ways beside its whole-GPU nodes (issue 34): each
sharing example submitted through the API is queued, admitted and run on the node of its
model, on the card the planner chose, and the card it holds is published for the pages."""

from pathlib import Path

import pytest
import yaml

from jobdash.embedded.stack import EmbeddedStack
from jobdash.jobs.models import ClusterState, Job, Namespace, State
from tests.waiting import eventually

from .conftest import token_client

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "jobdash/embedded/embedded_cluster.yaml"
# Each sharing example and the node of its model in make run's cluster.
EXAMPLES = {
    "notebook-gpushare.yaml": "share-gpushare-0",
    "notebook-hami.yaml": "share-hami-0",
    "eval-mig.yaml": "share-mig-0",
    "notebook-timeslice.yaml": "share-ts-0",
}


def test_each_sharing_example_runs_on_its_model_s_node_and_its_card_is_shown(tmp_path, staff):
    for name in ("team-a", "team-b"):
        Namespace.objects.create(name=name)
    quick = yaml.safe_load(EMBEDDED.read_text())
    quick["kubelet"] = {"start_delay_seconds": 0.1}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(quick))
    api = token_client(staff)
    with EmbeddedStack(tmp_path, tmp_path / "cluster.yaml", tick_seconds=0.2):
        ids = {}
        for example in EXAMPLES:
            created = api.post(
                "/api/v1/jobs/", data=(ROOT / "examples" / example).read_text(), content_type="application/yaml"
            )
            assert created.status_code == 201, created.content
            ids[example] = created.json()["id"]
        running = Job.objects.filter(pk__in=ids.values(), state=State.RUNNING)
        eventually(
            lambda: running.count() == len(ids), 60, message=str(list(Job.objects.values("name", "state", "message")))
        )
        for example, node in EXAMPLES.items():
            job = Job.objects.get(pk=ids[example])
            assert {where for _, _, where in job.placement} == {node}, (example, job.placement)
        # The two that share cards by memory hold a card each, as the cycle published it.
        for example in ("notebook-gpushare.yaml", "notebook-hami.yaml"):
            assert Job.objects.get(pk=ids[example]).cards, example

        def shown() -> dict:
            nodes = (ClusterState.objects.filter(id=1).values_list("nodes", flat=True).first()) or []
            return {
                node["name"]: [pod["job"] for card in node["cards"] for pod in card["pods"]]
                for node in nodes
                if node.get("cards")
            }

        eventually(
            lambda: (
                shown().get("share-gpushare-0") == ["team-a/notebook-gpushare"]
                and shown().get("share-hami-0") == ["team-a/notebook-hami"]
            ),
            15,
            message=str(shown()),
        )
