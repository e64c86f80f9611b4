"""The REST API against its own OpenAPI schema: schemathesis generates requests from the
schema drf-spectacular serves and calls the WSGI app in-process (same database
connection as the test), as a member of one namespace and as staff.

Passes: no 5xx, every status code documented, every response body matches its schema.
SCHEMA_EXAMPLES=500 for a long hunt; the default keeps the suite fast.
"""

import json
import os

import pytest
import schemathesis
from django.core import signals
from django.core.management import call_command
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from jobdash.jobs import services
from jobdash.jobs.models import Job, State
from kubesim.testing import running_kubesim
from tests.examples import examples

from .conftest import with_name
from .dispatch_support import JOBDASH

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]
EXAMPLES = examples(int(os.environ.get("SCHEMA_EXAMPLES", 25)))


def _schema() -> dict:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(generated))


def _load():
    loaded = schemathesis.openapi.from_dict(_schema())
    loaded.app = get_wsgi_application()  # what from_wsgi sets: calls go through WSGI, no server
    return loaded


schema = _load()


def test_the_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert (tmp_path / "schema.yaml").stat().st_size > 1000


def test_the_schema_covers_the_contract():
    paths = _schema()["paths"]
    for path in (
        "/api/v1/jobs/",
        "/api/v1/jobs/{id}/",
        "/api/v1/jobs/{id}/cancel/",
        "/api/v1/namespaces/",
        "/api/v1/namespaces/{name}/queue/",
        "/api/v1/status/",
    ):
        assert path in paths, path
    listed = {p["name"]: p for p in paths["/api/v1/jobs/"]["get"]["parameters"]}
    assert {"name", "name_contains", "namespace", "state", "kind", "page", "page_size"} <= set(listed)
    job = _schema()["components"]["schemas"]["JobDetail"]["properties"]
    assert {"position", "reason", "message", "eta", "events", "demand", "manifest"} <= set(job)


@pytest.fixture
def world(db, alice, staff, team_a, team_b, example_text):
    """Some jobs in every state, so lookups by id and name hit real rows."""
    jobs = [
        services.job_submit(user=alice, manifest=with_name(example_text("mnist-cpu"), f"s-{i}"), source="api")
        for i in range(4)
    ]
    Job.objects.filter(pk=jobs[1].pk).update(state=State.RUNNING)
    Job.objects.filter(pk=jobs[2].pk).update(state=State.FAILED)
    Job.objects.filter(pk=jobs[0].pk).update(position=1, reason="QuotaExceeded", message="waits for quota")
    return {"member": Token.objects.create(user=alice).key, "staff": Token.objects.create(user=staff).key}


@pytest.fixture
def in_process():
    """As Django's test client does: a request must not close the test's connection
    (its transaction is the test's database)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def cluster(settings):
    """The PriorityClasses submissions name (the example's `normal`), in kubesim, read
    through KUBECONFIG as in production."""
    classes = {"low": 100, "normal": 1000, "urgent": 100000}
    config = {
        "namespaces": [{"name": "team-a"}, {"name": "team-b"}],
        "users": [{"token": "jobdash-token", "username": JOBDASH, "groups": ["system:serviceaccounts"]}],
        "objects": [
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
            for n, v in classes.items()
        ],
    }
    with running_kubesim(config, manual_clock=True) as sim:
        settings.JOBDASH_CLUSTER, settings.KUBECONFIG = "kubeconfig", sim.kubeconfig_path
        yield sim


@pytest.fixture(params=["member", "staff"])
def token(request, world, in_process, cluster):
    return world[request.param]


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
def test_api_conforms_to_its_schema(case, token):
    case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=CHECKS)
