"""Usage end to end (issue 37): jobs run through kubesim and the real dispatcher, one of them
taken back and requeued once (two runs); the usage page, its CSV, the API (JSON and CSV),
the CLI (JSON and CSV) and /metrics all say what the timelines give directly, to the second."""

import csv
import io
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client as WebClient
from rest_framework.authtoken.models import Token

from jobdash.dispatch.cycle import Dispatcher
from jobdash.jobs import services
from jobdash.jobs.models import Job, JobEvent, State
from jobdash.usage import services as usage_services
from jobdash_client.cli import main as cli
from kubesim.testing import batch_job_manifest, running_kubesim
from queueing.usage import ENDS

from .dispatch_support import JOBDASH, ManualClock, settings, start_gateway
from .dispatch_support import cycle_until as until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sim():
    config = {
        "nodes": [
            {
                "prefix": "node",
                "count": 2,
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "4"},
            }
        ],
        "namespaces": [{"name": "team-a", "quota": {"requests.cpu": "64"}}, {"name": "team-b"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "kubelet": {"start_delay_seconds": 1.0},
    }
    with running_kubesim(config, manual_clock=True) as sim:
        yield sim


@pytest.fixture
def dispatcher(sim):
    gateway = start_gateway(sim)
    yield Dispatcher(gateway, settings(backoff_s=1.0), clock=ManualClock())
    gateway.stop()


def submit(user, name: str, gpu: int, runs_s: float) -> Job:
    manifest = batch_job_manifest(name, "team-a", cpu="2", memory="2Gi", gpu=gpu, duration=runs_s, backoff_limit=0)
    return services.job_submit(user=user, manifest=json.dumps(manifest), source="api")


def direct(jobs: list[Job]) -> tuple[float, float, int]:
    """GPU-hours and CPU core-hours from the timelines, by hand; and the runs counted."""
    gpu_s = cpu_s = 0.0
    runs = 0
    for job in jobs:
        start = None
        for kind, at in JobEvent.objects.filter(job=job).order_by("id").values_list("type", "created_at"):
            if kind == "Running" and start is None:
                start = at
            elif kind in ENDS and start is not None:
                seconds = (at - start).total_seconds()
                gpu_s += job.workload["requests"].get("nvidia.com/gpu", 0) * seconds
                cpu_s += job.workload["requests"]["cpu"] / 1000 * seconds
                start, runs = None, runs + 1
    return gpu_s / 3600, cpu_s / 3600, runs


def test_the_page_api_cli_csv_and_metrics_agree_with_the_timelines(
    user, staff, sim, dispatcher, term, live_server, capsys
):
    jobs = [submit(user, "one", 1, 20), submit(user, "two", 2, 40), submit(user, "three", 1, 30)]
    until(dispatcher, sim, term, lambda: Job.objects.filter(state=State.RUNNING).count() == 3, seconds=1)
    services.job_requeue(job_id=jobs[1].pk, user=staff, reason="usage test")
    until(dispatcher, sim, term, lambda: Job.objects.get(pk=jobs[1].pk).state == State.QUEUED, seconds=1)
    until(dispatcher, sim, term, lambda: Job.objects.filter(state=State.SUCCEEDED).count() == 3, seconds=5, steps=120)
    jobs = [Job.objects.get(pk=j.pk) for j in jobs]
    assert [t for (t,) in JobEvent.objects.filter(job=jobs[1], type="Running").values_list("type")] == ["Running"] * 2
    gpu_hours, cpu_hours, runs = direct(jobs)
    assert runs == 4 and gpu_hours > 0
    usage_services.fold(limit=5, settle_s=0)  # part folded, the rest read from the timelines

    today = datetime.now(UTC).date()
    params = {
        "from": str(today - timedelta(days=1)),
        "to": str(today + timedelta(days=1)),
        "group_by": "namespace,user",
    }
    second = 1 / 3600
    token = Token.objects.create(user=staff).key

    api = WebClient(HTTP_AUTHORIZATION=f"Token {token}")
    body = api.get("/api/v1/usage/", params).json()
    assert body["group_by"] == ["namespace", "user"]
    assert [(r["namespace"], r["user"]) for r in body["rows"]] == [("team-a", "ana")]
    assert body["rows"][0]["gpu_hours"] == pytest.approx(gpu_hours, abs=second)
    assert body["rows"][0]["cpu_hours"] == pytest.approx(cpu_hours, abs=second)

    def csv_rows(text: str) -> list[dict]:
        return list(csv.DictReader(io.StringIO(text)))

    api_csv = api.get("/api/v1/usage/", {**params, "format": "csv"})
    assert api_csv["Content-Type"].startswith("text/csv")
    web = WebClient()
    web.force_login(staff)
    page_csv = web.get("/usage/", {**params, "format": "csv"})
    assert page_csv.content == api_csv.content
    (row,) = csv_rows(api_csv.content.decode())
    assert (row["namespace"], row["user"]) == ("team-a", "ana")
    assert float(row["gpu_hours"]) == pytest.approx(gpu_hours, abs=second)

    page = web.get("/usage/", params).content.decode()
    assert "<svg" in page and 'href="?' in page and "format=csv" in page
    table = page[page.index('<table id="usage">') :]
    cells = re.findall(r'<data value="([0-9.]+)">', table)
    assert re.search(r"<td>team-a</td><td>ana</td>", table)
    assert float(cells[0]) == pytest.approx(gpu_hours, abs=second)
    assert float(cells[1]) == pytest.approx(cpu_hours, abs=second)

    server = ["--server", live_server.url, "--token", token]
    window = ["--from", params["from"], "--to", params["to"], "--group-by", "namespace,user"]

    def usage_cli(*output: str) -> str:
        assert cli(["usage", *server, *window, *output]) == 0
        return capsys.readouterr().out

    from_cli = json.loads(usage_cli("-o", "json"))
    assert from_cli["rows"][0]["gpu_hours"] == pytest.approx(gpu_hours, abs=second)
    assert usage_cli("-o", "csv") == api_csv.content.decode()
    table = usage_cli()
    assert "team-a" in table and f"{gpu_hours:.2f}" in table

    usage_services.fold_all(settle_s=0)
    assert api.get("/api/v1/usage/", params).json() == body  # folding changes nothing read
    scrape = web.get("/metrics").content.decode()
    (line,) = [x for x in scrape.splitlines() if x.startswith('jobdash_gpu_seconds_total{namespace="team-a"}')]
    assert float(line.split()[-1]) == pytest.approx(gpu_hours * 3600, abs=1.0)
