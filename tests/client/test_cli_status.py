"""Issue 45, item 3, live: a real dispatcher loop on kubesim behind a live server. One of its
phases is broken on purpose; the banner on the pages, a waiting job's reason, /readyz,
`jobdash status` (the real command), /metrics and the log all tell it. While cycles
complete, /readyz is 200 with the leader, its term and the last cycle."""

import json
import logging
from contextlib import contextmanager
from datetime import datetime

import pytest
import requests
from django.contrib.auth.models import User
from django.db import OperationalError
from django.test import Client as PageClient
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.authtoken.models import Token

from jobdash.dispatch.phases import snapshot_phase
from jobdash.jobs import services
from jobdash.jobs.dispatcher_health import dispatcher_health
from jobdash.jobs.models import Cycle, CycleFailures
from tests.client.support import running_dispatcher
from tests.jobdash.dispatch_support import manifest
from tests.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)
ERROR = 'OperationalError: unrecognized token ":"'


@contextmanager
def cycling_dispatcher():
    with running_dispatcher() as loop:
        eventually(Cycle.objects.exists, 20, "no cycle completed")
        yield loop


def broken_snapshot(*args, **kwargs):
    raise OperationalError('unrecognized token ":"')


def page(user: User, path: str) -> str:
    client = PageClient()
    client.force_login(user)
    reply = client.get(path)
    assert reply.status_code == 200, path
    return reply.content.decode()


def metric(text: str, name: str) -> float | None:
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]
    return samples[0].value if samples else None


def test_a_dispatcher_whose_cycles_fail_is_seen_everywhere(member, jobdash, monkeypatch, caplog):
    url, token = member
    user = User.objects.get(username="member")
    staff = User.objects.create_user("root", is_staff=True, is_superuser=True)
    caplog.set_level(logging.INFO, logger="jobdash.dispatch.failures")
    with cycling_dispatcher():
        monkeypatch.setattr(snapshot_phase, "build", broken_snapshot)  # the phase a cycle plans from
        job = services.job_submit(user=user, manifest=manifest("stuck"), source="api")  # (no quiet cycle now)
        eventually(lambda: dispatcher_health(reveal=True).cause == "failing", 20, "never failing")

        # Every page: the banner; its error for staff only.
        for path in ("/", "/ns/team-a/", f"/jobs/{job.pk}/", "/usage/"):
            shown = page(user, path)
            assert (
                "Jobs are not being released: the dispatcher&#x27;s last " in shown and "cycles failed, since" in shown
            )
            assert "unrecognized token" not in shown
        assert "OperationalError: unrecognized token &quot;:&quot;" in page(staff, "/ns/team-a/")
        assert "unrecognized token" in page(staff, "/admin/")
        # The waiting job says why it waits: the dispatcher, not "the next cycle".
        assert "Not being released: the dispatcher is not completing cycles" in page(user, f"/jobs/{job.pk}/")
        detail = requests.get(f"{url}/api/v1/jobs/{job.pk}/", headers={"Authorization": f"Token {token}"}).json()
        assert detail["reason"] == "DispatcherNotCycling" and detail["message"].startswith(
            "Jobs are not being released"
        )
        assert detail["dispatcher"]["cause"] == "failing" and detail["dispatcher"]["error"] is None

        ready = requests.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 503
        body = ready.json()
        assert (body["status"], body["cause"]) == ("unavailable", "failing") and body["failures"] >= 3
        assert body["message"].startswith("Jobs are not being released: the dispatcher's last ")

        done = jobdash("status", check=2)
        assert done.stdout.startswith("Jobs are not being released: the dispatcher's last ")
        assert "last error" not in done.stdout and "Leader: term 1, since " in done.stdout
        answer = json.loads(jobdash("status", "-o", "json", check=2).stdout)
        assert (answer["dispatcher"]["healthy"], answer["dispatcher"]["cause"]) == (False, "failing")
        as_staff = {"JOBDASH_URL": url, "JOBDASH_TOKEN": Token.objects.create(user=staff).key}
        assert f"  last error: {ERROR}\n" in jobdash("status", env=as_staff, check=2).stdout

        scraped = requests.get(f"{url}/metrics", timeout=10).text
        row = CycleFailures.objects.get()
        assert metric(scraped, "jobdash_cycle_failures_total") >= 3
        last = Cycle.objects.order_by("-started_at").first()
        succeeded = metric(scraped, "jobdash_last_cycle_success_timestamp_seconds")
        assert succeeded == pytest.approx(last.started_at.timestamp() + last.duration_ms / 1000)
        assert succeeded < row.since.timestamp()  # the last success was before the failures began

        # The log: the traceback once, then one counted line a failure.
        told = [r for r in caplog.records if r.name == "jobdash.dispatch.failures"]
        assert [r.getMessage() for r in told if r.exc_info] == [
            f"cycle failed: {ERROR}; retrying every tick, repeats counted, not traced"
        ]
        assert any(r.getMessage().startswith("cycle failed again (x3 since ") for r in told)

        # Mended: cycles complete again, and everything says so.
        monkeypatch.undo()
        eventually(lambda: dispatcher_health(reveal=True).healthy, 20, "never healthy again")
        assert "Jobs are not being released" not in page(user, "/")
        assert requests.get(f"{url}/readyz", timeout=10).status_code == 200
        jobdash("status", check=0)


def test_readyz_is_200_with_the_leader_its_term_and_the_last_cycle_while_cycles_complete(member, jobdash):
    url, _ = member
    with cycling_dispatcher():
        ready = requests.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 200
        body = ready.json()
        assert (body["status"], body["term"], body["leader"]["term"]) == ("ready", 1, 1)
        assert body["leader"]["identity"] is None  # a probe is no staff member
        finished = datetime.fromisoformat(body["last_cycle"]["finished_at"])
        assert body["last_cycle"]["term"] == 1 and finished >= Cycle.objects.order_by("started_at").first().started_at
        done = jobdash("status", check=0)
        assert done.stdout.startswith("Jobs are being released: the dispatcher is completing cycles\n")
        assert "Last completed cycle: " in done.stdout
