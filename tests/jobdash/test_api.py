"""The REST contract of ARCHITECTURE.md, end to end through the HTTP stack."""

import json

import pytest
from rest_framework.test import APIClient

from jobdash.jobs.models import Job, JobEvent

from .conftest import token_client, with_name

pytestmark = pytest.mark.django_db
YAML = "application/yaml"


def post_yaml(client, text, **query):
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    return client.post(f"/api/v1/jobs/{'?' + qs if qs else ''}", data=text, content_type=YAML)


def test_submit_yaml_returns_queued_job_with_demand(staff_api, example_text):
    api = staff_api  # a numeric priority is staff's override
    text = example_text("mnist-cpu")
    response = post_yaml(api, text, priority=5)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "Queued" and body["priority"] == 5 and body["source"] == "api"
    assert body["demand"] == {"cpu": "2", "memory": "4Gi", "pods": 1}
    assert body["namespace"] == "team-a" and body["name"] == "mnist-cpu" and body["kind"] == "TFJob"
    for key in (
        "id",
        "position",
        "reason",
        "message",
        "eta",
        "submitted_at",
        "released_at",
        "started_at",
        "finished_at",
    ):
        assert key in body

    fetched = api.get(f"/api/v1/jobs/{body['id']}/")
    assert fetched.status_code == 200
    assert fetched.json()["manifest"] == text  # byte-identical, comments and all
    assert [e["type"] for e in fetched.json()["events"]] == ["Submitted"]


def test_submit_json_body(staff_api, example_text):
    response = staff_api.post(
        "/api/v1/jobs/", {"manifest": example_text("dist-ps-worker"), "priority": 3}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["demand"] == {"cpu": "18", "memory": "36Gi", "pods": 6}
    assert response.json()["priority"] == 3


def test_yaml_media_type_aliases(api, example_text):
    for i, media_type in enumerate(["text/yaml", "application/x-yaml"]):
        text = with_name(example_text("mnist-cpu"), f"alias-{i}")
        response = api.post("/api/v1/jobs/", data=text, content_type=media_type)
        assert response.status_code == 201, response.content


def test_list_filters_and_visibility(api, alice, bob, staff_api, example_text):
    for i in range(3):
        assert post_yaml(api, with_name(example_text("mnist-cpu"), f"job-{i}")).status_code == 201
    bob_api = token_client(bob)
    assert post_yaml(bob_api, example_text("resnet-multi-gpu")).status_code == 201
    api.post("/api/v1/jobs/1/cancel/")  # may or may not be alice's; visibility decides

    mine = api.get("/api/v1/jobs/").json()
    assert mine["count"] == 3 and {j["namespace"] for j in mine["results"]} == {"team-a"}
    assert api.get("/api/v1/jobs/?namespace=team-b").json()["count"] == 0
    assert staff_api.get("/api/v1/jobs/").json()["count"] == 4
    assert staff_api.get("/api/v1/jobs/?namespace=team-b").json()["count"] == 1
    queued = staff_api.get("/api/v1/jobs/?state=Queued").json()["count"]
    cancelled = staff_api.get("/api/v1/jobs/?state=Cancelled").json()["count"]
    assert queued + cancelled == 4


def test_bad_state_filter_is_400_naming_the_field(api):
    response = api.get("/api/v1/jobs/?state=Exploded")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "state"


def test_pagination(api, example_text):
    for i in range(55):
        assert post_yaml(api, with_name(example_text("mnist-cpu"), f"p-{i}")).status_code == 201
    first = api.get("/api/v1/jobs/").json()
    assert first["count"] == 55 and len(first["results"]) == 50 and first["next"]
    second = api.get(first["next"]).json()
    assert len(second["results"]) == 5


def test_detail_of_invisible_or_missing_job_is_404(api, bob, example_text):
    job = post_yaml(token_client(bob), example_text("resnet-multi-gpu")).json()
    assert api.get(f"/api/v1/jobs/{job['id']}/").status_code == 404
    assert api.get("/api/v1/jobs/999999/").status_code == 404
    assert api.get("/api/v1/jobs/abc/").status_code == 404
    assert api.get("/api/v1/jobs/99999999999999999999999/").status_code == 404


def test_cancel(api, example_text):
    job = post_yaml(api, example_text("mnist-cpu")).json()
    response = api.post(f"/api/v1/jobs/{job['id']}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "Cancelled"
    again = api.post(f"/api/v1/jobs/{job['id']}/cancel/")
    assert again.status_code == 409 and "already Cancelled" in again.json()["errors"][0]["message"]


def test_namespaces(api, alice, staff_api, team_b, example_text):
    post_yaml(api, example_text("mnist-cpu"))
    mine = api.get("/api/v1/namespaces/").json()
    assert [n["name"] for n in mine["results"]] == ["team-a"]
    assert mine["results"][0]["queue_length"] == 1
    assert [n["name"] for n in staff_api.get("/api/v1/namespaces/").json()["results"]] == ["team-a", "team-b"]


def test_status_counts_jobs(api, example_text):
    post_yaml(api, example_text("mnist-cpu"))
    assert api.get("/api/v1/status/").json()["jobs"]["Queued"] == 1


def test_session_auth_works_and_anonymous_is_refused(alice, example_text):
    anonymous = APIClient()
    response = anonymous.get("/api/v1/jobs/")
    assert response.status_code in (401, 403) and "errors" in response.json()
    assert post_yaml(anonymous, example_text("mnist-cpu")).status_code in (401, 403)
    session = APIClient()
    session.force_login(alice)
    assert session.get("/api/v1/jobs/").status_code == 200


def test_bad_token_is_401(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get("/api/v1/jobs/").status_code == 401


def test_openapi_schema_and_docs_are_served_without_cdn(api):
    schema = api.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert "/api/v1/jobs/" in paths and "/api/v1/jobs/{id}/cancel/" in paths
    docs = api.get("/api/v1/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html and "cdn.jsdelivr" not in html and "unpkg.com" not in html


# --- Bad input: every case is a 4xx naming the problem, and nothing is written. ---

VALID = """apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: ok, namespace: team-a}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: tensorflow
              image: tf:2
              resources:
                requests: {cpu: "1", memory: 1Gi}
                limits: {cpu: "2", memory: 1Gi}
"""


def mutate(old: str, new: str) -> str:
    assert old in VALID
    return VALID.replace(old, new)


LAUGHS = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
)

BAD_YAML_CASES = {
    "empty body": ("", 400, ""),
    "not yaml": ("apiVersion: [unclosed\n  kind: {", 400, ""),
    "a list": ("- a\n- b\n", 400, ""),
    "two documents naming one job (a bulk submission)": (VALID + "---\n" + VALID, 409, "[1]"),
    "deeply nested": ("a: " + "[" * 5000 + "]" * 5000 + "\n", 400, ""),
    "billion laughs": (LAUGHS, 400, ""),
    "wrong kind": (mutate("kind: TFJob", "kind: Deployment"), 400, "kind"),
    "wrong apiVersion": (mutate("apiVersion: kubeflow.org/v1", "apiVersion: kubeflow.org/v9"), 400, "apiVersion"),
    "missing name": (
        mutate("metadata: {name: ok, namespace: team-a}", "metadata: {namespace: team-a}"),
        400,
        "metadata.name",
    ),
    "invalid name": (mutate("name: ok,", "name: Not_OK,"), 400, "metadata.name"),
    "unknown replica type": (mutate("    Worker:", "    Gardener:"), 400, "spec.tfReplicaSpecs.Gardener"),
    "negative replicas": (mutate("replicas: 2", "replicas: -1"), 400, "spec.tfReplicaSpecs.Worker.replicas"),
    "non-integer replicas": (mutate("replicas: 2", "replicas: 1.5"), 400, "spec.tfReplicaSpecs.Worker.replicas"),
    "string replicas": (mutate("replicas: 2", "replicas: two"), 400, "spec.tfReplicaSpecs.Worker.replicas"),
    "huge replicas": (mutate("replicas: 2", "replicas: 100000000"), 400, "spec.tfReplicaSpecs.Worker.replicas"),
    "cpu lots": (
        mutate('requests: {cpu: "1"', "requests: {cpu: lots"),
        400,
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu",
    ),
    "negative memory": (
        mutate('limits: {cpu: "2", memory: 1Gi}', 'limits: {cpu: "2", memory: -1Gi}'),
        400,
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.limits.memory",
    ),
    "requests above limits": (
        mutate('requests: {cpu: "1"', 'requests: {cpu: "8"'),
        400,
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu",
    ),
    "no containers": (
        VALID.split("          containers:")[0] + "          containers: []\n",
        400,
        "spec.tfReplicaSpecs.Worker.template.spec.containers",
    ),
    "nul byte": (VALID.replace("image: tf:2", "image: tf\x00:2"), 400, ""),
}


@pytest.mark.parametrize("case", sorted(BAD_YAML_CASES))
def test_bad_yaml_is_4xx_with_path_and_no_write(api, case):
    text, status, path = BAD_YAML_CASES[case]
    response = post_yaml(api, text)
    assert response.status_code == status, response.content
    errors = response.json()["errors"]
    assert errors and all(e["message"] for e in errors)
    if path:
        assert path in [e["path"] for e in errors], errors
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0


def test_valid_base_case_is_accepted(api):
    assert post_yaml(api, VALID).status_code == 201


def test_ten_megabyte_body_is_413(api):
    response = post_yaml(api, VALID + "# " + "x" * (10 * 1024 * 1024) + "\n")
    assert response.status_code == 413 and response.json()["errors"]
    big_json = api.post("/api/v1/jobs/", {"manifest": "x" * (10 * 1024 * 1024)}, format="json")
    assert big_json.status_code == 413
    assert Job.objects.count() == 0


def test_manifest_just_over_the_limit_is_413(api):
    padded = VALID + "#" * (256 * 1024 - len(VALID) + 1)
    response = api.post("/api/v1/jobs/", {"manifest": padded}, format="json")
    assert response.status_code == 413
    assert "256" in response.json()["errors"][0]["message"] or "262144" in response.json()["errors"][0]["message"]


def test_not_a_member_is_403(api, team_b):
    response = post_yaml(api, VALID.replace("namespace: team-a", "namespace: team-b"))
    assert response.status_code == 403 and "team-b" in response.json()["errors"][0]["message"]
    assert Job.objects.count() == 0


def test_duplicate_active_name_is_409(api):
    assert post_yaml(api, VALID).status_code == 201
    response = post_yaml(api, VALID)
    assert response.status_code == 409 and "ok" in response.json()["errors"][0]["message"]
    assert Job.objects.count() == 1


def test_unsupported_media_type_is_415(api):
    response = api.post("/api/v1/jobs/", data=VALID, content_type="text/plain")
    assert response.status_code == 415 and response.json()["errors"]


@pytest.mark.parametrize(
    "body, path",
    [
        ({}, "manifest"),
        ({"manifest": 5}, "manifest"),
        ({"manifest": VALID, "priority": "high"}, "priority"),
        ({"manifest": VALID, "priority": 10**9}, "priority"),
    ],
)
def test_bad_json_fields_name_the_field(api, body, path):
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.content
    assert path in [e["path"] for e in response.json()["errors"]]
    assert Job.objects.count() == 0


def test_malformed_json_is_400(api):
    response = api.post("/api/v1/jobs/", data="{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["errors"]


def test_bad_priority_query_is_400(api):
    response = post_yaml(api, VALID, priority="soon")
    assert response.status_code == 400 and response.json()["errors"][0]["path"] == "priority"


def test_several_errors_are_reported_together(api):
    text = mutate("replicas: 2", "replicas: -1").replace('cpu: "1"', "cpu: lots")
    paths = {e["path"] for e in post_yaml(api, text).json()["errors"]}
    assert "spec.tfReplicaSpecs.Worker.replicas" in paths
    assert "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu" in paths


def test_queue_lists_pending_jobs_in_admission_order(api, alice, team_b, example_text):
    ids = [post_yaml(api, with_name(example_text("mnist-cpu"), f"q-{i}")).json()["id"] for i in range(3)]
    # positions as a cycle would have written them: the last submitted goes first
    for position, job_id in zip((3, 2, 1), ids, strict=False):
        Job.objects.filter(pk=job_id).update(position=position)
    api.post(f"/api/v1/jobs/{ids[1]}/cancel/")
    queue = api.get("/api/v1/namespaces/team-a/queue/").json()
    assert [j["id"] for j in queue["results"]] == [ids[2], ids[0]]
    assert api.get("/api/v1/namespaces/team-b/queue/").status_code == 404  # not a member
    assert api.get("/api/v1/namespaces/Not_A_Name/queue/").status_code == 404


def test_namespaces_show_quota_hard_used_reserved_as_quantities(api):
    from jobdash.jobs.models import ClusterState

    assert api.get("/api/v1/namespaces/").json()["results"][0]["quota"] is None  # no cycle yet
    ClusterState.objects.create(
        quotas={
            "team-a": {
                "hard": {
                    "requests.cpu": 20000,
                    "requests.memory": 64 * 2**30,
                    "requests.nvidia.com/gpu": 8,
                    "pods": 50,
                },
                "used": {"requests.cpu": 4500, "requests.memory": 2**30},
                "reserved": {"requests.cpu": 2000},
            }
        }
    )
    quota = api.get("/api/v1/namespaces/").json()["results"][0]["quota"]
    assert quota["hard"] == {
        "pods": "50",
        "requests.cpu": "20",
        "requests.memory": "64Gi",
        "requests.nvidia.com/gpu": "8",
    }
    assert quota["used"] == {"requests.cpu": "4500m", "requests.memory": "1Gi"}
    assert quota["reserved"] == {"requests.cpu": "2"}


@pytest.mark.parametrize("query", ["nmae=x", "stat=Queued", "namespace=team-a&sort=name"])
def test_an_unknown_list_parameter_is_a_400_naming_it(api, query):
    response = api.get(f"/api/v1/jobs/?{query}")
    assert response.status_code == 400
    unknown = {q.split("=")[0] for q in query.split("&")} - {"namespace"}
    assert {e["path"] for e in response.json()["errors"]} == unknown
    assert api.get("/api/v1/namespaces/?q=1").status_code == 400
    assert api.get("/api/v1/jobs/?namespace=team-a&state=Queued&kind=TFJob&page=1").status_code == 200
    assert api.get("/api/v1/jobs/?name=x&name_contains=x&page_size=5").status_code == 200


def test_jobs_by_name_exactly_or_by_part_as_the_dashboard_filters(api, example_text):
    for name in ("mnist-a", "mnist-ab", "resnet"):
        assert post_yaml(api, with_name(example_text("mnist-cpu"), name)).status_code == 201
    names = lambda query: sorted(j["name"] for j in api.get(f"/api/v1/jobs/?{query}").json()["results"])  # noqa: E731
    assert names("name=mnist-a") == ["mnist-a"]
    assert names("name=mnist") == []
    assert names("name_contains=MNIST") == ["mnist-a", "mnist-ab"]
    assert names("name_contains=mnist&namespace=team-b") == []


def test_page_size_is_the_clients_within_a_bound(api, example_text):
    for i in range(3):
        assert post_yaml(api, with_name(example_text("mnist-cpu"), f"p-{i}")).status_code == 201
    page = api.get("/api/v1/jobs/?page_size=2").json()
    assert (page["count"], len(page["results"])) == (3, 2) and "page_size=2" in page["next"]
    assert len(api.get("/api/v1/jobs/?page_size=500").json()["results"]) == 3
    for bad in ("0", "501", "ten", "-1", ""):
        response = api.get(f"/api/v1/jobs/?page_size={bad}")
        assert response.status_code == 400, bad
        assert [e["path"] for e in response.json()["errors"]] == ["page_size"]
    assert api.get("/api/v1/namespaces/?page_size=1").json()["results"]
