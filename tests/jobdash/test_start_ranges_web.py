"""Start times users can trust (issue #16): the pages, the API and the track record show the
range the dispatcher wrote on each job (likely start, 90 % late bound), the first range it was
given, its predicted run time, and whether a queued job is past its first late bound."""

import html
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobdash.jobs import estimates, presenters, services
from jobdash.jobs.models import Job, State
from queueing.predictor import SOURCES

from .conftest import token_client, with_name

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
MIN = timedelta(minutes=1)


@pytest.fixture
def browser(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def base(alice, example_text) -> Job:
    """A job submitted through the service, whose columns the other rows copy."""
    return services.job_submit(user=alice, manifest=with_name(example_text("mnist-cpu"), "base"), source="web")


def now_s():
    return timezone.now().replace(microsecond=0)


def make(base: Job, name: str, namespace=None, **fields) -> Job:
    """A row like `base` under another name, with the dispatcher's fields given."""
    return Job.objects.create(
        namespace=namespace or base.namespace,
        name=name,
        kind=base.kind,
        api_version=base.api_version,
        manifest=base.manifest,
        parsed=base.parsed,
        workload=base.workload,
        source=base.source,
        submitted_by_name="alice",
        **fields,
    )


def started(base: Job, name: str, *, late_by: timedelta, bound_in: timedelta | None, at=None, namespace=None) -> Job:
    """A job that started `late_by` after its first likely start, whose first late bound was
    `bound_in` after that likely start (None: no late bound given)."""
    start = at or now_s() - timedelta(hours=1)
    first = start - late_by
    return make(
        base,
        name,
        namespace=namespace,
        state=State.SUCCEEDED,
        released_at=start,
        started_at=start,
        finished_at=start + timedelta(minutes=30),
        eta_first_at=first - timedelta(minutes=30),
        eta_first=first,
        eta_first_late=None if bound_in is None else first + bound_in,
    )


def text(page: str) -> str:
    """What a person reads: cells and lines apart, other tags dropped, white space collapsed."""
    apart = re.sub(r"</?(?:dt|dd|td|th|tr|p|li|h\d|div|br)\b[^>]*>", " ", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", apart)))


def row(page: str, job: Job) -> str:
    """The table row of `job` in a page."""
    start = page.index(f'<tr data-job="{job.pk}">')
    return page[start : page.index("</tr>", start)]


# --- pages ------------------------------------------------------------------------------


def test_queue_shows_the_range_the_badge_and_unknown(browser, base):
    now = now_s()
    likely, late = now + timedelta(minutes=12, seconds=30), now + timedelta(minutes=55, seconds=30)
    waiting = make(
        base,
        "late-one",
        position=1,
        reason="QuotaExceeded",
        message="quota requests.cpu. Past its late bound: job 7 ran 40m longer than expected.",
        eta=likely,
        eta_late=late,
        eta_first_at=now - timedelta(hours=2),
        eta_first=now - timedelta(hours=1, minutes=30),
        eta_first_late=now - 5 * MIN,
    )
    on_time = make(base, "on-time", position=2, eta=likely, eta_late=late, eta_first_late=now + 30 * MIN)
    Job.objects.filter(pk=base.pk).update(position=3, message="no estimate until the next cycle")

    page = browser.get("/ns/team-a/").content.decode()
    late_row, on_time_row, unknown_row = row(page, waiting), row(page, on_time), row(page, base)
    assert "likely in 12m, in 55m at the latest (90 %)" in text(late_row)
    assert f'<time datetime="{likely.isoformat()}"' in late_row and f'<time datetime="{late.isoformat()}"' in late_row
    assert "past its late bound" in late_row and 'class="badge badge-late"' in late_row
    assert "Past its late bound: job 7 ran 40m longer than expected." in text(late_row)
    assert "likely in 12m, in 55m at the latest (90 %)" in text(on_time_row)
    assert "past its late bound" not in on_time_row
    assert "unknown" in text(unknown_row) and "likely" not in unknown_row and "badge-late" not in unknown_row
    # The live part polled by htmx shows the same.
    part = browser.get("/ns/team-a/", **HTMX).content.decode()
    assert "likely in 12m, in 55m at the latest (90 %)" in text(row(part, waiting)) and "badge-late" in part


def test_a_likely_start_without_a_late_bound_shows_alone(browser, base):
    Job.objects.filter(pk=base.pk).update(position=1, eta=now_s() + timedelta(minutes=12, seconds=30))
    shown = text(row(browser.get("/ns/team-a/").content.decode(), base))
    assert "likely in 12m" in shown and "at the latest" not in shown


def test_a_running_job_is_never_past_its_late_bound(browser, base):
    Job.objects.filter(pk=base.pk).update(
        state=State.RUNNING, released_at=now_s(), started_at=now_s(), eta_first_late=now_s() - timedelta(hours=1)
    )
    assert "past its late bound" not in browser.get("/ns/team-a/").content.decode()
    assert "past its late bound" not in browser.get(f"/jobs/{base.pk}/").content.decode()


def test_job_page_of_a_queued_job(browser, base):
    now = now_s()
    likely, late = now + timedelta(minutes=12, seconds=30), now + timedelta(minutes=55, seconds=30)
    first_at, first, first_late = now - timedelta(minutes=90), now - timedelta(minutes=60), now - timedelta(minutes=20)
    Job.objects.filter(pk=base.pk).update(
        position=1,
        reason="QuotaExceeded",
        message="Past its late bound: job 7 ran longer than expected.",
        eta=likely,
        eta_late=late,
        eta_first_at=first_at,
        eta_first=first,
        eta_first_late=first_late,
        eta_first_forecast=now - timedelta(minutes=70),
        predicted_duration_s=42 * 60,
        predicted_p90_s=126 * 60,
        prediction_source="user+name",
    )
    markup = browser.get(f"/jobs/{base.pk}/").content.decode()
    page = text(markup)
    clock = presenters.clock
    assert (
        f"Estimated start likely in 12m ({clock(likely, now)}), in 55m ({clock(late, now)}) at the latest (90 %)"
        in page
    )
    assert f'<time datetime="{likely.isoformat()}"' in markup and f'<time datetime="{late.isoformat()}"' in markup
    assert (
        f"First estimate likely {clock(first, now)}, by {clock(first_late, now)} at the latest (90 %); given 1h 30m ago"
        in page
    )
    assert 'class="badge badge-late"' in markup.split("</h1>")[0]  # beside the state
    assert "Past its late bound: job 7 ran longer than expected." in page
    assert "Predicted run time likely 42m, at most 2h 06m (90 %), from this user's runs of this name" in page
    assert "Start estimate" not in page  # not started yet
    # The raw forecast is internal.
    assert clock(now - timedelta(minutes=70), now) not in page
    # The htmx poll shows the same.
    assert "past its late bound" in browser.get(f"/jobs/{base.pk}/", **HTMX).content.decode()


@pytest.mark.parametrize(
    ("late_by", "bound_in", "words"),
    [
        (6 * MIN, 45 * MIN, "started 6m 00s after the likely time given at submission; within the 90 % bound"),
        (-8 * MIN, 45 * MIN, "started 8m 00s before the likely time given at submission; within the 90 % bound"),
        (30 * MIN, 20 * MIN, "started 30m after the likely time given at submission; 10m past the 90 % bound"),
        (timedelta(seconds=20), 0 * MIN, "started at the likely time given at submission; 20s past the 90 % bound"),
        (6 * MIN, None, "started 6m 00s after the likely time given at submission"),
    ],
)
def test_job_page_says_how_the_first_estimate_did(browser, base, late_by, bound_in, words):
    job = started(base, "done", late_by=late_by, bound_in=bound_in)
    page = text(browser.get(f"/jobs/{job.pk}/").content.decode())
    assert f"Start estimate {words}" in page
    if bound_in is None:
        assert "90 % bound" not in page
    assert "First estimate" not in page and "Estimated start" not in page  # those are for queued jobs


def test_job_page_shows_the_first_estimate_once_the_range_has_moved(browser, base):
    now = now_s()
    likely, late = now + 10 * MIN, now + 40 * MIN
    Job.objects.filter(pk=base.pk).update(
        eta=likely, eta_late=late, eta_first_at=now - MIN, eta_first=likely, eta_first_late=late
    )
    page = text(browser.get(f"/jobs/{base.pk}/").content.decode())
    assert "Estimated start likely in" in page and "First estimate" not in page
    Job.objects.filter(pk=base.pk).update(eta=likely + 5 * MIN)
    page = text(browser.get(f"/jobs/{base.pk}/").content.decode())
    assert f"First estimate likely {presenters.clock(likely, now)}, by {presenters.clock(late, now)}" in page


def test_job_page_without_estimates_or_prediction(browser, base):
    page = text(browser.get(f"/jobs/{base.pk}/").content.decode())
    assert "Estimated start unknown" in page
    assert "First estimate" not in page and "Predicted run time" not in page and "Start estimate" not in page


@pytest.mark.parametrize("source", SOURCES)
def test_every_prediction_source_has_words(source):
    assert source in presenters.PREDICTION_SOURCE_WORDS
    shown = presenters.predicted_run_time(None if source == "none" else 600, None, source)
    assert shown.endswith(presenters.PREDICTION_SOURCE_WORDS[source])
    assert "+" not in shown


def test_predicted_run_time_words():
    assert presenters.predicted_run_time(None, None, "") == ""  # not seen by the dispatcher yet
    assert presenters.predicted_run_time(None, None, "none") == (
        "unknown: no similar runs have finished yet and the job states no run time"
    )
    assert presenters.predicted_run_time(90, 300, "stated") == (
        "likely 1m 30s, at most 5m 00s (90 %), from the run time stated on the job"
    )
    assert presenters.predicted_run_time(3600, None, "namespace").startswith("likely 1h 00m, from")


# --- the track record -----------------------------------------------------------------------


def test_track_record_on_the_namespace_page(browser, base, team_b):
    at = now_s() - timedelta(days=1)
    # The last 10 starts: 8 within 20 min, 9 by their late bound.
    for i in range(8):
        started(base, f"close-{i}", late_by=(i - 4) * 4 * MIN, bound_in=30 * MIN, at=at + i * MIN)
    started(base, "far-in-bound", late_by=25 * MIN, bound_in=30 * MIN, at=at + 8 * MIN)
    started(base, "far-past-bound", late_by=50 * MIN, bound_in=30 * MIN, at=at + 9 * MIN)
    # Older, of another namespace, or never given an estimate: not counted.
    started(base, "older", late_by=2 * MIN, bound_in=30 * MIN, at=at - timedelta(days=1))
    started(base, "elsewhere", late_by=90 * MIN, bound_in=30 * MIN, at=at + 20 * MIN, namespace=team_b)
    make(base, "no-estimate", state=State.SUCCEEDED, started_at=at + 30 * MIN, finished_at=at + 40 * MIN)

    page = text(browser.get("/ns/team-a/").content.decode())
    assert "Start estimates here: within 20 min for 8 of the last 10 jobs; 9 of 10 started by their late bound." in page


def test_track_record_without_judged_jobs_claims_nothing(browser, base):
    Job.objects.filter(pk=base.pk).update(eta_first=now_s(), eta_first_late=now_s())  # queued: not started yet
    page = text(browser.get("/ns/team-a/").content.decode())
    assert "Start estimates here: no estimates to judge yet." in page
    assert "of the last" not in page


def test_track_record_words_for_few_jobs():
    words = presenters.estimate_record_words
    assert words(estimates.EstimateRecord(1, 1, 0)) == (
        "Start estimates here: within 20 min for 1 of the 1 job so far; 0 of 1 started by its late bound."
    )
    assert words(estimates.EstimateRecord(3, 2, 3)) == (
        "Start estimates here: within 20 min for 2 of the 3 jobs so far; 3 of 3 started by their late bound."
    )


def test_estimate_record_boundaries(base, team_a, team_b):
    at = now_s() - timedelta(hours=3)
    started(base, "exactly-20-late", late_by=20 * MIN, bound_in=20 * MIN, at=at)  # within; exactly at the bound
    started(base, "exactly-20-early", late_by=-20 * MIN, bound_in=1 * MIN, at=at + MIN)  # within; by the bound
    started(base, "just-over", late_by=20 * MIN + timedelta(seconds=1), bound_in=20 * MIN, at=at + 2 * MIN)
    started(base, "no-bound", late_by=0 * MIN, bound_in=None, at=at + 3 * MIN)  # within; no bound to start by
    make(base, "no-first", state=State.SUCCEEDED, started_at=at + 4 * MIN, eta=at, eta_late=at + MIN)
    started(base, "other-ns", late_by=0 * MIN, bound_in=MIN, at=at + 5 * MIN, namespace=team_b)
    make(base, "still-queued", eta_first=at, eta_first_late=at + MIN)
    expected = estimates.EstimateRecord(jobs=4, within_20_min=3, by_late_bound=2)
    assert estimates.estimate_record(team_a) == expected
    assert estimates.estimate_records([team_a, team_b]) == {
        team_a.pk: expected,
        team_b.pk: estimates.EstimateRecord(1, 1, 1),
    }


def test_estimate_record_counts_the_last_10_starts_only(base, team_a, team_b):
    at = now_s() - timedelta(days=2)
    for i in range(10):  # the newest ten: all within 20 min and by their bound
        started(base, f"new-{i}", late_by=MIN, bound_in=5 * MIN, at=at + timedelta(hours=1, minutes=i))
    for i in range(5):  # older: far off, started after their bound
        started(base, f"old-{i}", late_by=timedelta(hours=2), bound_in=5 * MIN, at=at + i * MIN)
    assert estimates.estimate_record(team_a) == estimates.EstimateRecord(10, 10, 10)
    with CaptureQueriesContext(connection) as queries:
        records = estimates.estimate_records([team_a, team_b])
    assert len(queries) == 1
    assert records == {team_a.pk: estimates.EstimateRecord(10, 10, 10), team_b.pk: estimates.EstimateRecord()}
    assert estimates.estimate_records([]) == {}


# --- the API ---------------------------------------------------------------------------------


def test_api_job_carries_the_range_the_prediction_and_past_late_bound(api, base):
    now = now_s()
    fields = {
        "eta": now + 12 * MIN,
        "eta_late": now + 55 * MIN,
        "eta_first_at": now - 90 * MIN,
        "eta_first": now - 60 * MIN,
        "eta_first_late": now - 20 * MIN,
        "predicted_duration_s": 2520.0,
        "predicted_p90_s": 7560.0,
        "prediction_source": "user+name",
    }
    Job.objects.filter(pk=base.pk).update(eta_first_forecast=now - 70 * MIN, **fields)
    on_time = make(base, "on-time", eta=now + MIN, eta_first_late=now + 5 * MIN)

    body = api.get(f"/api/v1/jobs/{base.pk}/").json()
    for name, value in fields.items():
        expected = value if isinstance(value, float | str) else value.isoformat().replace("+00:00", "Z")
        assert body[name] == expected, name
    assert body["past_late_bound"] is True
    assert "eta_first_forecast" not in body  # internal
    listed = {j["id"]: j for j in api.get("/api/v1/jobs/").json()["results"]}
    assert listed[base.pk]["past_late_bound"] is True and listed[on_time.pk]["past_late_bound"] is False
    assert listed[on_time.pk]["eta_late"] is None and listed[on_time.pk]["prediction_source"] == ""
    queue = api.get("/api/v1/namespaces/team-a/queue/").json()["results"]
    assert {j["id"]: j["past_late_bound"] for j in queue} == {base.pk: True, on_time.pk: False}

    # Started: no longer past its late bound; the first range stays.
    Job.objects.filter(pk=base.pk).update(state=State.RUNNING, released_at=now, started_at=now)
    body = api.get(f"/api/v1/jobs/{base.pk}/").json()
    assert body["past_late_bound"] is False and body["eta_first_late"] == fields["eta_first_late"].isoformat().replace(
        "+00:00", "Z"
    )


def test_api_namespace_estimate_record(api, base, team_b, bob):
    at = now_s() - timedelta(hours=5)
    started(base, "close", late_by=5 * MIN, bound_in=30 * MIN, at=at)
    started(base, "far", late_by=45 * MIN, bound_in=30 * MIN, at=at + MIN)
    started(base, "theirs", late_by=0 * MIN, bound_in=MIN, at=at, namespace=team_b)
    record = {"jobs": 2, "within_20_min": 1, "by_late_bound": 1}
    assert api.get("/api/v1/namespaces/team-a/").json()["estimate_record"] == record
    assert [n["estimate_record"] for n in api.get("/api/v1/namespaces/").json()["results"]] == [record]
    assert token_client(bob).get("/api/v1/namespaces/team-b/").json()["estimate_record"] == {
        "jobs": 1,
        "within_20_min": 1,
        "by_late_bound": 1,
    }


def test_api_namespace_list_reads_every_record_in_one_query(staff_api, base, team_b):
    started(base, "one", late_by=MIN, bound_in=MIN, at=now_s() - timedelta(hours=1))
    with CaptureQueriesContext(connection) as few:
        staff_api.get("/api/v1/namespaces/")
    for i in range(5):
        started(base, f"more-{i}", late_by=MIN, bound_in=MIN, at=now_s() - timedelta(hours=2), namespace=team_b)
    with CaptureQueriesContext(connection) as more:
        results = staff_api.get("/api/v1/namespaces/").json()["results"]
    assert len(more) == len(few)
    assert [n["estimate_record"]["jobs"] for n in results] == [1, 5]


def test_schema_documents_the_new_read_only_fields(api):
    schema = api.get("/api/v1/schema/?format=json").json()
    components = schema["components"]["schemas"]
    job = components["Job"]["properties"]
    for name in ("eta_late", "eta_first_at", "eta_first", "eta_first_late", "predicted_duration_s", "predicted_p90_s"):
        assert job[name]["readOnly"] is True and job[name]["nullable"] is True, name
    assert job["past_late_bound"]["type"] == "boolean" and job["past_late_bound"]["readOnly"] is True
    assert "likely start" in job["eta"]["description"]
    assert "eta_first_forecast" not in job
    record = components["Namespace"]["properties"]["estimate_record"]
    assert record["allOf"][0]["$ref"].endswith("/EstimateRecord") or record.get("$ref", "").endswith("/EstimateRecord")
    assert set(components["EstimateRecord"]["properties"]) == {"jobs", "within_20_min", "by_late_bound"}
