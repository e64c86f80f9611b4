"""The topology annotations through the API: a slice request that cannot be read is a 400
naming the annotation, with nothing stored; a good one is stored and asks for slices."""

import html

import pytest

from jobdash.jobs.models import Job
from queueing import Workload
from queueing.topology_request import SLICE_REQUIRED_ANNOTATION, SLICE_SIZE_ANNOTATION, request_of

from .conftest import with_name

pytestmark = pytest.mark.django_db
YAML = "application/yaml"
URL = "/api/v1/jobs/"
RACK = "topology.jobdash.io/rack"


def annotated(text: str, annotations: dict[str, str]) -> str:
    lines = "".join(f'    {key}: "{value}"\n' for key, value in annotations.items())
    return text.replace("  annotations:\n", "  annotations:\n" + lines, 1)


def paths(response) -> list[str]:
    return [e["path"] for e in response.json()["errors"]]


@pytest.mark.parametrize(
    ("annotations", "refused"),
    [
        ({SLICE_REQUIRED_ANNOTATION: RACK, SLICE_SIZE_ANNOTATION: "0"}, [SLICE_SIZE_ANNOTATION]),
        ({SLICE_REQUIRED_ANNOTATION: RACK, SLICE_SIZE_ANNOTATION: "two"}, [SLICE_SIZE_ANNOTATION]),
        ({SLICE_REQUIRED_ANNOTATION: RACK}, [SLICE_SIZE_ANNOTATION]),
        ({SLICE_SIZE_ANNOTATION: "2"}, [SLICE_REQUIRED_ANNOTATION]),
    ],
)
def test_a_slice_request_that_cannot_be_read_is_a_400_naming_the_annotation(api, example_text, annotations, refused):
    text = annotated(with_name(example_text("mnist-cpu"), "sliced"), annotations)
    response = api.post(URL, text, content_type=YAML)
    assert response.status_code == 400, response.content
    assert paths(response) == [f'metadata.annotations["{name}"]' for name in refused]
    assert not Job.objects.exists()


def test_a_good_slice_request_is_stored_and_asks_for_slices(api, example_text):
    annotations = {SLICE_REQUIRED_ANNOTATION: RACK, SLICE_SIZE_ANNOTATION: "2"}
    response = api.post(URL, annotated(with_name(example_text("mnist-cpu"), "sliced"), annotations), content_type=YAML)
    assert response.status_code == 201, response.content
    request = request_of(Workload.from_json(Job.objects.get().workload))
    assert request is not None and (request.slice_level, request.slice_size) == (RACK, 2)


def test_the_submit_pages_check_refuses_what_submitting_refuses(client, alice, example_text):
    """The live check (as people type) names the slice annotation as the API does."""
    client.force_login(alice)
    bad = annotated(
        with_name(example_text("mnist-cpu"), "sliced"), {SLICE_REQUIRED_ANNOTATION: RACK, SLICE_SIZE_ANNOTATION: "0"}
    )
    part = client.post("/submit/check/", {"manifest": bad}).content.decode()
    assert f'metadata.annotations["{SLICE_SIZE_ANNOTATION}"]' in html.unescape(part) and "Valid for" not in part
