"""Issue #17: `/metrics` (every jobdash_* family, with its labels) and JSON logs.

A job goes through the dispatcher on kubesim until it succeeds; then the web's `/metrics`
(Django's test client), the dispatcher's registry and its HTTP port are read."""

import io
import json
import logging
import subprocess
import sys
import urllib.request
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from jobdash import logs, metrics
from jobdash.dispatch.cycle import Dispatcher
from jobdash.dispatch.phases.active import read_active
from jobdash.dispatch.writers import preempt
from jobdash.jobs import services
from jobdash.jobs.models import Job, State
from jobdash.leader import LeaderLoop, make_elector
from jobdash.metrics import exposition
from queueing.preemption import RECLAIM, Preemption
from tests.webhooks.conftest import admission_review, trial_tfjob

from .dispatch_support import create_namesake, eventually, manifest, run_until, settings, state

pytestmark = pytest.mark.django_db
PHASES = (
    "snapshot",
    "expect",
    "lost",
    "build",
    "plan",
    "release",
    "preempt",
    "statuses",
    "track",
    "replace",
    "sent",
    "pin",
    "publish",
)
STATES = ("Queued", "Released", "Running", "Succeeded", "Failed", "Cancelled")


def submit(user, name, namespace="team-a", **kwargs) -> Job:
    return services.job_submit(user=user, manifest=manifest(name, namespace=namespace, **kwargs), source="api")


def value(name: str, **labels) -> float:
    """A sample of the dispatcher's registry (this process's: the tests run it in-process)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def parse(text: str) -> dict[str, list]:
    """family name -> its samples."""
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def sample(families: dict, family: str, name: str, **labels) -> float | None:
    for s in families.get(family, []):
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


@pytest.fixture
def no_token(settings):
    settings.JOBDASH_METRICS_TOKEN = ""
    return settings


def test_a_job_through_the_dispatcher_shows_in_every_family(user, sim, gateway, term, no_token):
    before = {
        "wait": value("jobdash_admission_wait_seconds_count", namespace="team-a", kind="TFJob"),
        "latency": value("jobdash_start_latency_seconds_count", namespace="team-a", kind="TFJob"),
        "created": value("jobdash_releases_total", outcome="created"),
        "error": value("jobdash_start_estimate_error_seconds_count", namespace="team-a"),
        "within": value("jobdash_start_within_late_bound_total", namespace="team-a", within="true"),
        **{phase: value("jobdash_cycle_phase_seconds_count", phase=phase) for phase in PHASES},
    }
    first = submit(user, "first", workers=4, cpu="1", duration=3)
    waiting = submit(user, "second", workers=4, cpu="1", duration=3)  # 4 + 4 CPU > the quota's 6
    dispatcher = Dispatcher(gateway, settings())
    dispatcher.cycle(term)
    assert (state(first), state(waiting)) == (State.RELEASED, State.QUEUED)
    # Its first range, as a cycle gives one when the forecast has a run time to go by.
    now = timezone.now()
    Job.objects.filter(pk=waiting.pk).update(eta_first_at=now, eta_first=now, eta_first_late=now + timedelta(hours=1))
    for job in (first, waiting):  # each seen Running by the tracker (that is when it observes), then done
        run_until(dispatcher, sim, gateway, job, State.RUNNING)
        run_until(dispatcher, sim, gateway, job, State.SUCCEEDED)
    never = submit(user, "too-big", workers=8, cpu="1")  # 8 CPU > the quota's 6: never fits
    dispatcher.cycle(term)
    submit(user, "unplanned", namespace="team-b")  # no cycle has seen it yet

    # The dispatcher's own families, as its process observed them.
    assert value("jobdash_admission_wait_seconds_count", namespace="team-a", kind="TFJob") - before["wait"] == 2
    assert value("jobdash_admission_wait_seconds_sum", namespace="team-a", kind="TFJob") > 0
    assert value("jobdash_start_latency_seconds_count", namespace="team-a", kind="TFJob") - before["latency"] == 2
    assert value("jobdash_releases_total", outcome="created") - before["created"] == 2
    for phase in PHASES:
        assert value("jobdash_cycle_phase_seconds_count", phase=phase) - before[phase] >= 3, phase
    # The waiting job had a first likely start: its error and whether it kept to the late bound.
    assert value("jobdash_start_estimate_error_seconds_count", namespace="team-a") - before["error"] == 1
    assert value("jobdash_start_within_late_bound_total", namespace="team-a", within="true") - before["within"] == 1

    # The web's /metrics: the database's families, and the process's.
    reply = Client().get("/metrics")
    assert reply.status_code == 200 and reply["Content-Type"].startswith("text/plain")
    families = parse(reply.content.decode())
    for state_name in STATES:
        assert sample(families, "jobdash_jobs", "jobdash_jobs", namespace="team-a", kind="TFJob", state=state_name) == (
            2 if state_name == "Succeeded" else 1 if state_name == "Queued" else 0
        ), state_name
    assert sample(families, "jobdash_queue_length", "jobdash_queue_length", namespace="team-a", reason="NeverFitsQuota")
    assert Job.objects.get(pk=never.pk).reason == "NeverFitsQuota"
    assert sample(families, "jobdash_queue_length", "jobdash_queue_length", namespace="team-b", reason="New") == 1
    assert sample(
        families, "jobdash_admission_wait_seconds", "jobdash_admission_wait_seconds_count", namespace="team-a"
    )
    assert sample(
        families, "jobdash_cycle_phase_seconds", "jobdash_cycle_phase_seconds_bucket", phase="track", le="+Inf"
    )
    assert sample(families, "jobdash_releases", "jobdash_releases_total", outcome="created")

    # The dispatcher's HTTP port (JOBDASH_METRICS_PORT; here an ephemeral one).
    server = metrics.serve(0, addr="127.0.0.1")
    assert server is not None
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            served = parse(response.read().decode())
    finally:
        server.shutdown()
        server.server_close()
        exposition._served.clear()
    for family in (
        "jobdash_admission_wait_seconds",
        "jobdash_start_latency_seconds",
        "jobdash_cycle_phase_seconds",
        "jobdash_releases",
        "jobdash_start_estimate_error_seconds",
        "jobdash_start_within_late_bound",
    ):
        assert family in served, family
    assert "jobdash_jobs" not in served  # the database's families are the web's alone
    for phase in PHASES:
        assert sample(served, "jobdash_cycle_phase_seconds", "jobdash_cycle_phase_seconds_count", phase=phase), phase


def test_preemptions_are_counted_by_the_victims_namespace(user, gateway, term):
    victim = submit(user, "victim")
    preemptor = submit(user, "preemptor", namespace="team-b")
    Job.objects.filter(pk=victim.pk).update(state=State.RUNNING, started_at=timezone.now())
    before = value("jobdash_preemptions_total", namespace="team-a")
    marked = preempt.mark(
        gateway,
        [Preemption(victim.pk, "team-a", preemptor.pk, RECLAIM)],
        active=read_active({}),
        waiting={preemptor.pk: ("team-b", "preemptor")},
        grace_s=60.0,
        term=term,
    )
    assert marked == 1
    assert value("jobdash_preemptions_total", namespace="team-a") - before == 1
    families = parse(Client().get("/metrics").content.decode())
    assert sample(families, "jobdash_preemptions", "jobdash_preemptions_total", namespace="team-a") >= 1


def test_the_leader_gauges_follow_the_leadership():
    elector = make_elector("none", identity="metrics-test:1")
    loop = LeaderLoop(elector, renew_every=0.05, retry_every=0.05)
    loop.start()
    try:
        eventually(lambda: value("jobdash_leader", instance="metrics-test:1") == 1, timeout=5)
        assert value("jobdash_leader_term", instance="metrics-test:1") == 1
    finally:
        loop.stop()
    assert value("jobdash_leader", instance="metrics-test:1") == 0
    assert value("jobdash_leader_term", instance="metrics-test:1") == 1  # the last term held
    families = parse(Client().get("/metrics").content.decode())
    assert sample(families, "jobdash_leader", "jobdash_leader", instance="metrics-test:1") == 0


def test_each_webhook_review_is_timed_by_kind_and_decision(team_a, settings):
    settings.ROOT_URLCONF = "webhooks.urls"
    before = value("jobdash_webhook_review_seconds_count", kind="TFJob", allowed="false")
    review = admission_review(trial_tfjob())  # Katib's TFJob: queued, and denied in deny mode
    reply = Client().generic("POST", "/webhooks/admission/tfjobs", json.dumps(review), content_type="application/json")
    assert reply.status_code == 200 and reply.json()["response"]["allowed"] is False
    assert value("jobdash_webhook_review_seconds_count", kind="TFJob", allowed="false") - before == 1
    assert value("jobdash_webhook_review_seconds_sum", kind="TFJob", allowed="false") > 0
    settings.ROOT_URLCONF = "jobdash.urls"
    families = parse(Client().get("/metrics").content.decode())
    assert sample(
        families,
        "jobdash_webhook_review_seconds",
        "jobdash_webhook_review_seconds_count",
        kind="TFJob",
        allowed="false",
    )


def test_metrics_need_no_login_and_no_allowed_host(no_token):
    reply = Client().get("/metrics", HTTP_HOST="10.1.2.3:8000")  # Prometheus scrapes the pod's address
    assert reply.status_code == 200
    assert "jobdash_jobs" in reply.content.decode()


def test_jobs_are_counted_by_the_cluster_they_were_released_to_and_each_clusters_health(user, no_token):
    """Issue 49: jobdash_jobs's `cluster` ("" queued or with one cluster), jobdash_cluster_up
    and jobdash_cluster_lost_seconds."""
    from jobdash.clusters.models import Cluster, ClusterHealth

    east, queued, west = (submit(user, name) for name in ("in-east", "queued", "in-west"))
    Job.objects.filter(pk=east.pk).update(state=State.RUNNING, cluster="east")
    Job.objects.filter(pk=west.pk).update(state=State.SUCCEEDED, cluster="west")
    families = parse(Client().get("/metrics").content.decode())
    assert families["jobdash_cluster_up"] == [] == families["jobdash_cluster_lost_seconds"]  # one cluster: no sample
    jobs = {
        (s.labels["cluster"], s.labels["state"]): s.value
        for s in families["jobdash_jobs"]
        if s.labels["namespace"] == "team-a"
    }
    assert jobs[("east", "Running")] == 1 and jobs[("", "Queued")] == 1 and jobs[("west", "Succeeded")] == 1
    assert jobs[("east", "Queued")] == 0 and jobs[("west", "Running")] == 0  # every state, zeros included
    assert sum(jobs.values()) == 3 and {c for c, _ in jobs} == {"", "east", "west"}

    now = timezone.now()
    Cluster.objects.create(name="east", answered_at=now)
    Cluster.objects.create(name="west", health=ClusterHealth.LOST, lost_at=now - timedelta(seconds=90))
    families = parse(Client().get("/metrics").content.decode())
    up = {s.labels["cluster"]: s.value for s in families["jobdash_cluster_up"]}
    lost = {s.labels["cluster"]: s.value for s in families["jobdash_cluster_lost_seconds"]}
    assert up == {"east": 1.0, "west": 0.0}
    assert lost["east"] == 0.0 and 90 <= lost["west"] < 150


def test_a_metrics_token_refuses_a_missing_or_wrong_bearer(settings):
    settings.JOBDASH_METRICS_TOKEN = "s3cret-token"
    client = Client()
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Token s3cret-token").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    right = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert right.status_code == 200 and b"jobdash_queue_length" in right.content


def test_a_release_log_line_is_json_with_the_job_its_namespace_and_the_term(user, sim, gateway, term):
    # The handler of settings.LOGGING, built for the deployment's format.
    config = logs.configure("json")
    factory = config["formatters"]["structlog"]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(factory["()"](fmt=factory["fmt"]))
    logger = logging.getLogger("jobdash.dispatch.writers.release")
    logger.addHandler(handler)
    try:
        job = submit(user, "refused")
        create_namesake(sim, "refused")  # a namesake jobdash did not create: a permanent refusal
        Dispatcher(gateway, settings()).cycle(term)
    finally:
        logger.removeHandler(handler)
    assert state(job) == State.FAILED
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    line = next(line for line in lines if line["event"].startswith(f"release of job {job.pk}:"))
    assert (line["job_id"], line["namespace"], line["term"]) == (job.pk, "team-a", term)
    assert line["level"] == "warning" and line["logger"] == "jobdash.dispatch.writers.release" and line["timestamp"]


def test_the_log_format_setting_is_checked():
    code = "import jobdash.settings"
    env = {"JOBDASH_LOG_FORMAT": "xml", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "JOBDASH_LOG_FORMAT" in result.stderr


def test_the_console_format_renders_stdlib_records_with_their_fields():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.formatter("console"))
    logger = logging.getLogger("jobdash.test.console")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("tracking job %s: %s", 7, "gone", extra=logs.job(7, "team-a"))
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    text = stream.getvalue()
    assert "tracking job 7: gone" in text and "job_id=7" in text and "namespace=team-a" in text
