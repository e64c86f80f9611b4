"""Bad input is a 4xx naming the field, never a 5xx, never a row: on the API, the pages,
the forms, the live check and the admin. Each case here answered 500 before."""

import json

import pytest
from django.db import connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobdash.jobs.models import Job
from tests.examples import examples

from .conftest import with_name

pytestmark = pytest.mark.django_db
NUL = "\x00"


def rows() -> int:
    return Job.objects.count()


def errors(response) -> list[dict]:
    return response.json()["errors"]


def test_a_json_integer_of_thousands_of_digits_is_400(api):
    body = '{"manifest": "x", "priority": ' + "9" * 5000 + "}"
    response = api.post("/api/v1/jobs/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in errors(response)[0]["message"]
    assert rows() == 0


def test_json_nested_100000_deep_is_400(api):
    body = "[" * 100_000 + "]" * 100_000
    response = api.post("/api/v1/jobs/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in errors(response)[0]["message"]
    assert rows() == 0


def test_a_nul_in_the_json_envelope_names_the_field(api, example_text):
    body = json.dumps({"manifest": example_text("mnist-cpu"), "priority": 1, "note": "a" + NUL})
    response = api.post("/api/v1/jobs/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert errors(response)[0]["path"] == "note" and "NUL" in errors(response)[0]["message"]
    assert rows() == 0


@pytest.mark.parametrize("content_type", ["application/yaml", "application/json"])
def test_a_nul_in_a_manifest_string_names_its_path(api, example_text, content_type):
    # YAML's "\0" escape decodes to NUL: valid YAML, and PostgreSQL's jsonb refuses it.
    text = example_text("mnist-cpu").replace("name: mnist-cpu", 'name: mnist-cpu\n  labels: {team: "a\\0b"}', 1)
    data = text if content_type == "application/yaml" else json.dumps({"manifest": text})
    response = api.post("/api/v1/jobs/", data=data, content_type=content_type)
    assert response.status_code == 400, response.content
    assert errors(response)[0]["path"] == "metadata.labels.team"
    assert rows() == 0


def test_a_label_value_the_api_server_refuses_is_400(api, example_text):
    text = example_text("mnist-cpu").replace("name: mnist-cpu", 'name: mnist-cpu\n  labels: {team: "not valid!"}', 1)
    response = api.post("/api/v1/jobs/", data=text, content_type="application/yaml")
    assert response.status_code == 400
    assert errors(response) == [
        {
            "path": "metadata.labels.team",
            "message": "must be empty or alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric, "
            "got 'not valid!'",
        }
    ]
    text = example_text("mnist-cpu").replace("  annotations:\n", "  annotations:\n    'a b/c': x\n", 1)
    response = api.post("/api/v1/jobs/", data=text, content_type="application/yaml")
    assert response.status_code == 400 and errors(response)[0]["path"] == "metadata.annotations.a b/c"
    assert rows() == 0


@pytest.mark.parametrize(
    ("url", "parameter"),
    [
        ("/api/v1/jobs/?namespace=team%00a", "?namespace"),
        ("/api/v1/jobs/?state=Queued%00", "?state"),
        ("/api/v1/namespaces/?x%00=1", "?(parameter name)"),
    ],
)
def test_a_nul_in_an_api_parameter_is_400_naming_it(api, url, parameter):
    response = api.get(url)
    assert response.status_code == 400
    assert errors(response)[0]["path"] == parameter


@pytest.mark.parametrize(
    "url", ["/ns/team-a%00/", "/ns/team-a/?q=a%00b", "/ns/team-a/?state=%00", "/admin/jobs/job/?q=%00"]
)
def test_a_nul_in_a_page_address_is_400(admin_client, url):
    response = admin_client.get(url)
    assert response.status_code == 400
    assert b"NUL" in response.content


def test_a_nul_in_the_submit_form_and_the_live_check_is_400(client, alice, example_text):
    client.force_login(alice)
    response = client.post("/submit/", {"namespace": "team-a", "manifest": example_text("mnist-cpu") + NUL})
    assert response.status_code == 400 and b"manifest" in response.content
    response = client.post("/submit/check/", {"namespace": "team" + NUL, "manifest": "a: 1"})
    assert response.status_code == 400 and b"namespace" in response.content
    assert rows() == 0


def test_the_live_check_of_yaml_1000_deep_shows_the_problem(client, alice):
    client.force_login(alice)
    deep = "a: " + "[" * 1000 + "]" * 1000 + "\n"
    response = client.post("/submit/check/", {"namespace": "team-a", "manifest": deep})
    assert response.status_code == 200
    assert b"nest" in response.content  # the strict loader's depth message, shown to the user


@pytest.mark.django_db(transaction=True)
def test_a_database_outage_is_503_with_retry_after(api, alice):
    from django.test import Client

    page_client = Client()
    page_client.force_login(alice)
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    connection.close()
    # A port nothing listens on: the next query really fails to connect.
    connection.settings_dict["PORT"] = "1"
    try:
        response = api.get("/api/v1/jobs/")
        assert response.status_code == 503
        assert response["Retry-After"] == "5"
        assert "database" in errors(response)[0]["message"]
        page = page_client.get("/ns/team-a/")
        assert page.status_code == 503 and page["Retry-After"] == "5"
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert api.get("/api/v1/jobs/").status_code == 200


# --- property: random input through every endpoint never gives a 5xx or a row ---

json_trees = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
texts = st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1"))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=json_trees, text=texts, raw=st.binary(max_size=300))
def test_random_input_never_gives_a_5xx_or_a_row(api, admin_client, tree, text, raw):
    before = rows()
    answers = [
        api.post("/api/v1/jobs/", data=json.dumps(tree), content_type="application/json"),
        api.post(
            "/api/v1/jobs/", data=json.dumps({"manifest": text, "priority": tree}), content_type="application/json"
        ),
        api.post("/api/v1/jobs/", data=raw, content_type="application/yaml"),
        api.post("/api/v1/jobs/", data=text.encode("utf-8", "surrogatepass"), content_type="application/yaml"),
        api.get("/api/v1/jobs/", {"namespace": text, "state": text}),
        admin_client.get("/ns/team-a/", {"q": text, "state": text}),
        admin_client.post("/submit/check/", {"namespace": text, "manifest": text}),
        admin_client.post("/submit/", {"namespace": text, "manifest": text}),
        admin_client.get("/admin/jobs/job/", {"q": text}),
    ]
    for response in answers:
        assert response.status_code < 500, (response.status_code, response.content[:300])
    assert rows() == before


def test_the_property_test_can_see_a_valid_submission(api, example_text):
    """The counterpart of the property above: the same endpoint does write a row for a
    valid manifest, so 'no row' is not an accident of the setup."""
    response = api.post(
        "/api/v1/jobs/", data=with_name(example_text("mnist-cpu"), "ok"), content_type="application/yaml"
    )
    assert response.status_code == 201
    assert rows() == 1
