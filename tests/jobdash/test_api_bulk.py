"""Bulk submission (issue #18): POST /api/v1/jobs/ with a JSON list or a multi-document YAML
stream stores every job or none, in one transaction, and names the document at fault."""

import pytest

from jobdash.jobs import services
from jobdash.jobs.models import Job, JobEvent, Source

from .conftest import with_name

pytestmark = pytest.mark.django_db
YAML = "application/yaml"
URL = "/api/v1/jobs/"


@pytest.fixture
def mnist(example_text):
    def named(name: str, namespace: str = "team-a") -> str:
        return with_name(example_text("mnist-cpu"), name).replace("namespace: team-a", f"namespace: {namespace}")

    return named


@pytest.fixture
def pytorch(example_text):
    def named(name: str, workers: int = 3) -> str:
        text = with_name(example_text("pytorch-ddp"), name)
        return text.replace("replicas: 3", f"replicas: {workers}")

    return named


def paths(response) -> list[str]:
    return [e["path"] for e in response.json()["errors"]]


def test_a_json_list_is_stored_in_order(api, mnist, pytorch):
    body = [{"manifest": mnist("one")}, {"manifest": pytorch("two")}, {"manifest": mnist("three")}]
    response = api.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert [(j["name"], j["kind"], j["state"]) for j in created] == [
        ("one", "TFJob", "Queued"),
        ("two", "PyTorchJob", "Queued"),
        ("three", "TFJob", "Queued"),
    ]
    assert created[1]["demand"] == {"cpu": "8", "memory": "16Gi", "pods": 4}
    single = api.post(URL, {"manifest": mnist("four")}, format="json").json()
    assert set(created[0]) == set(single)  # the same serializer as one job
    stored = list(Job.objects.order_by("id"))
    assert [j.name for j in stored] == ["one", "two", "three", "four"]
    assert [j.id for j in stored[:3]] == [j["id"] for j in created]
    assert [j.manifest for j in stored[:3]] == [item["manifest"] for item in body]  # exactly as written
    assert {(j.source, j.submitted_by_name) for j in stored} == {(Source.API, "alice")}
    events = JobEvent.objects.filter(job__in=stored[:3]).order_by("job_id")
    assert [(e.job.name, e.type, e.actor) for e in events] == [
        ("one", "Submitted", "alice"),
        ("two", "Submitted", "alice"),
        ("three", "Submitted", "alice"),
    ]
    assert events[0].message == "queued from api with priority 0"


def test_each_item_of_a_json_list_has_its_own_options(staff_api, mnist):
    body = [
        {"manifest": mnist("staffs").replace("  namespace: team-a\n", ""), "namespace": "team-b", "priority": 7},
        {"manifest": mnist("plain")},
    ]
    response = staff_api.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    assert [(j["namespace"], j["priority"]) for j in response.json()] == [("team-b", 7), ("team-a", 0)]


def test_a_multi_document_yaml_stream_is_stored_in_order(api, mnist, pytorch):
    first = "# three jobs\n" + mnist("one")
    second = "---\n" + pytorch("two").replace("  namespace: team-a\n", "")
    third = "--- # the last\n" + mnist("three") + "...\n"
    response = api.post(URL + "?namespace=team-a", data=first + second + third + "---\n", content_type=YAML)
    assert response.status_code == 201, response.content
    assert [j["name"] for j in response.json()] == ["one", "two", "three"]
    stored = list(Job.objects.order_by("id"))
    assert [j.name for j in stored] == ["one", "two", "three"]
    assert stored[1].namespace.name == "team-a"  # from ?namespace=, as for one manifest
    # Each job keeps its own document as written: comments, markers and all.
    assert [j.manifest for j in stored] == [first, second, third]


def test_one_document_still_answers_one_job(api, mnist):
    text = "---\n" + mnist("alone") + "---\n"
    response = api.post(URL, data=text, content_type=YAML)
    assert response.status_code == 201, response.content
    assert isinstance(response.json(), dict) and response.json()["name"] == "alone"
    assert Job.objects.get().manifest == text  # the body, untouched, as before


def test_one_bad_json_item_stores_nothing(api, mnist, pytorch):
    body = [{"manifest": mnist(f"ok-{i}")} for i in range(5)]
    body[2] = {"manifest": pytorch("bad", workers=-1)}
    response = api.post(URL, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [
        {"path": "[2].spec.pytorchReplicaSpecs.Worker.replicas", "message": "must not be negative, got -1"}
    ]
    assert not Job.objects.exists() and not JobEvent.objects.exists()


def test_every_bad_document_is_named_at_once(api, mnist, pytorch):
    stream = "---\n".join([mnist("ok"), pytorch("bad", workers=-1), mnist("Bad_Name"), mnist("fine")])
    response = api.post(URL, data=stream, content_type=YAML)
    assert response.status_code == 400, response.content
    assert paths(response) == ["[1].spec.pytorchReplicaSpecs.Worker.replicas", "[2].metadata.name"]
    assert not Job.objects.exists()


def test_a_yaml_error_in_a_later_document_names_it(api, mnist):
    stream = mnist("a") + "---\n" + mnist("b") + "---\nspec: [unclosed\n"
    response = api.post(URL, data=stream, content_type=YAML)
    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    assert error["path"] == "[2]" and error["message"].startswith("invalid YAML: ")
    duplicate = api.post(URL, data=mnist("a") + "---\n" + mnist("b") + "kind: TFJob\n", content_type=YAML)
    assert duplicate.status_code == 400 and paths(duplicate) == ["[1].kind"]
    assert not Job.objects.exists()


def test_json_items_are_checked_like_one_body(api, mnist):
    body = [{"manifest": mnist("a")}, {"manifest": 5}, "not an object", {"priority": "x", "manifest": mnist("b")}]
    response = api.post(URL, body, format="json")
    assert response.status_code == 400, response.content
    assert paths(response) == ["[1].manifest", "[2]", "[3].priority"]
    assert not Job.objects.exists()


def test_a_namespace_of_someone_else_refuses_the_whole_request(api, mnist, team_b):
    body = [{"manifest": mnist("mine")}, {"manifest": mnist("theirs", namespace="team-b")}]
    response = api.post(URL, body, format="json")
    assert response.status_code == 403, response.content
    assert response.json()["errors"] == [{"path": "[1]", "message": "you are not a member of namespace 'team-b'"}]
    # A refusal wins over the problems of other documents, also in a YAML stream.
    stream = mnist("Bad_Name") + "---\n" + mnist("mine") + "---\n" + mnist("secret", namespace="nowhere")
    refused = api.post(URL, data=stream, content_type=YAML)
    assert refused.status_code == 403 and paths(refused) == ["[2]"]
    assert not Job.objects.exists()


def test_two_documents_naming_one_job_conflict(api, mnist):
    response = api.post(URL, [{"manifest": mnist("twin")}, {"manifest": mnist("twin")}], format="json")
    assert response.status_code == 409, response.content
    assert paths(response) == ["[1]"] and "[0]" in response.json()["errors"][0]["message"]
    assert not Job.objects.exists()


def test_a_name_an_active_job_holds_rolls_back_the_others(api, mnist):
    assert api.post(URL, {"manifest": mnist("taken")}, format="json").status_code == 201
    body = [{"manifest": mnist("new-1")}, {"manifest": mnist("new-2")}, {"manifest": mnist("taken")}]
    response = api.post(URL, body, format="json")
    assert response.status_code == 409, response.content
    assert response.json()["errors"] == [
        {"path": "[2]", "message": "an active job named 'taken' already exists in namespace 'team-a'"}
    ]
    assert [j.name for j in Job.objects.all()] == ["taken"]  # new-1 and new-2 were rolled back


def test_at_most_jobdash_bulk_max_jobs(api, mnist, settings):
    settings.JOBDASH_BULK_MAX_JOBS = 2
    three = [{"manifest": mnist(f"j-{i}")} for i in range(3)]
    for response in (
        api.post(URL, three, format="json"),
        api.post(URL, data="---\n".join(item["manifest"] for item in three), content_type=YAML),
    ):
        assert response.status_code == 413, response.content
        (error,) = response.json()["errors"]
        assert "more than 2 jobs" in error["message"] and "JOBDASH_BULK_MAX_JOBS" in error["message"]
    assert not Job.objects.exists()
    assert api.post(URL, three[:2], format="json").status_code == 201  # at the limit is fine


def test_an_empty_list_is_refused(api):
    response = api.post(URL, [], format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["message"].startswith("no jobs to submit")


def test_the_body_size_limit_still_holds(api, mnist, settings):
    settings.JOBDASH_MAX_MANIFEST_BYTES = 4096
    stream = "---\n".join(mnist(f"j-{i}") for i in range(20))
    assert len(stream) > 4096
    response = api.post(URL, data=stream, content_type=YAML)
    assert response.status_code == 413
    assert not Job.objects.exists()


def test_the_service_stores_all_or_nothing(alice, mnist):
    jobs = services.jobs_submit_many(
        user=alice,
        submissions=[services.Submission(mnist("s-1")), services.Submission(mnist("s-2").encode())],
        source=Source.API,
    )
    assert [Job.objects.get(pk=j.pk).name for j in jobs] == ["s-1", "s-2"]
    with pytest.raises(services.InvalidInput) as refused:
        services.jobs_submit_many(
            user=alice,
            submissions=[services.Submission(mnist("s-3")), services.Submission("kind: TFJob\n")],
            source=Source.API,
        )
    assert {p.path for p in refused.value.problems} >= {"[1].apiVersion"}
    assert Job.objects.count() == 2
